import { spawn } from 'node:child_process'
import { appendFile, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { encodeValue } from '../src/core/codec.js'
import { CheckpointCorruptionError, InvalidArgumentError } from '../src/core/errors.js'
import type { CommitRequest } from '../src/store/engine/storage-engine.js'
import type { RunRow } from '../src/store/engine/rows.js'
import { FileEngine } from '../src/store/backends/file/file-engine.js'
import { FileStore, type FileStoreOptions } from '../src/store/backends/file/file-store.js'
import { MemoryStore } from '../src/store/backends/memory/memory-store.js'
import { checkpointDigest } from '../src/store/encoding/checkpoint-rows.js'
import type { CheckpointStore } from '../src/store/checkpoint-store.js'
import { runLogOf } from './support/file-log.js'

const cleanup: (() => Promise<void>)[] = []

afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn()
})

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-file-'))
  cleanup.push(() => rm(dir, { recursive: true, force: true }))
  return dir
}

function open(directory: string, options: Omit<FileStoreOptions, 'directory'> = {}): FileStore {
  const store = new FileStore({ directory, onWarning: () => undefined, ...options })
  cleanup.push(() => store.close())
  return store
}

/** A conversation of `n` messages of about 1.1 KB each. */
function conversation(n: number, from = 0): { role: string; text: string; at: Date }[] {
  return Array.from({ length: n }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', text: `message ${from + i} `.padEnd(1100, '.'), at: new Date(from + i) }))
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  return entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name).slice(dir.length + 1))
}

function logPath(directory: string, runId: string): string {
  return join(directory, 'runs', runId, 'log.jsonl')
}

/** The list ids a run's log holds after a compaction (its first frame holds every list), the run's log of transitions aside. */
async function compactedLists(directory: string, runId: string): Promise<string[]> {
  const [first = ''] = (await readFile(logPath(directory, runId), 'utf8')).split('\n')
  const record = JSON.parse(first.split(' ').slice(2).join(' ')) as { a?: [string, number, string[]][] }
  return (record.a ?? []).map(([id]) => id).filter((id) => id !== 'run-log')
}

async function expectCorruption(promise: Promise<unknown>, ids: { runId: string; checkpointId: string }): Promise<void> {
  const err: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(CheckpointCorruptionError)
  expect(err).toMatchObject(ids)
}

describe('FileStore', () => {
  it('round trips payloads, runs and history through the files', async () => {
    const directory = await tempDir()
    const store = open(directory)
    const ids: string[] = []
    for (let i = 1; i <= 4; i++) {
      const payload = { messages: conversation(i), tags: new Set(['a', 'b']), counts: new Map([['n', BigInt(i)]]) }
      ids.push(await store.save({ runId: 'run-1', kind: 'agent', phase: 'after_model', metadata: { step: i }, payload }))
    }
    const latest = await store.getLatest<{ messages: unknown[]; tags: Set<string>; counts: Map<string, bigint> }>({ runId: 'run-1' })
    expect(latest?.id).toBe(ids[3])
    expect(latest?.seq).toBe(4)
    expect(latest?.payload.messages).toEqual(conversation(4))
    expect(latest?.payload.counts.get('n')).toBe(4n)
    expect((await store.load(ids[1] ?? '')).payload).toMatchObject({ messages: conversation(2) })
    expect((await store.listCheckpoints({ runId: 'run-1' })).map((cp) => cp.seq)).toEqual([4, 3, 2, 1])
    expect((await store.listCheckpoints({ runId: 'run-1', before: ids[2] ?? '', limit: 1 })).map((cp) => cp.id)).toEqual([ids[1]])
    expect((await store.listCheckpoints({ runId: 'run-1', before: 'unknown-id' }))).toEqual([])
    expect(await store.getRun('run-1')).toMatchObject({ runId: 'run-1', status: 'running', lastSeq: 4 })

    await store.updateRun('run-1', { status: 'completed', metadata: { done: true } })
    expect((await store.getRun('run-1'))?.metadata).toEqual({ done: true })
    expect((await store.listRuns({ status: 'completed' })).map((run) => run.runId)).toEqual(['run-1'])
    // A JavaScript caller's stray fields never reach run.json.
    await store.updateRun('run-1', { name: 'n', runId: 'other', lastSeq: 0 } as never)
    expect(await store.getRun('run-1')).toMatchObject({ runId: 'run-1', name: 'n', lastSeq: 4 })
    expect(await store.delete(ids[3] ?? '')).toBe(true)
    await expectCorruption(store.getLatest({ runId: 'run-1' }), { runId: 'run-1', checkpointId: ids[2] ?? '' })
    expect((await store.getRun('run-1'))?.lastSeq).toBe(4)
    expect(await store.deleteRun('run-1')).toBe(true)
    expect(await store.deleteRun('run-1')).toBe(false)
    expect(await store.getRun('run-1')).toBeUndefined()
    await expect(store.load(ids[0] ?? '')).rejects.toMatchObject({ code: 'checkpoint_not_found' })
    expect(await readdir(join(directory, 'runs'))).toEqual([])
  })

  it('orders and pages across runs exactly as the memory store does', async () => {
    const directory = await tempDir()
    const stores: CheckpointStore[] = [open(directory), new MemoryStore()]
    const listings = await Promise.all(
      stores.map(async (store) => {
        const plan = [
          ['a', 30, 'wf'],
          ['b', 10, 'wf'],
          ['a', 30, 'wf'],
          ['c', 20, 'other'],
          ['b', 40, 'wf'],
          ['c', 20, 'wf'],
        ] as const
        let n = 0
        for (const [runId, createdAt, workflowName] of plan) {
          await store.save({ id: `cp-${n++}`, runId, kind: 'workflow', phase: 'superstep', createdAt, workflowName, payload: { n } })
        }
        await store.save({ id: 'cp-d', runId: 'd', seq: 7, kind: 'workflow', phase: 'superstep', createdAt: 5, payload: {} })
        return {
          all: (await store.listCheckpoints()).map((cp) => cp.id),
          wf: (await store.listCheckpoints({ workflowName: 'wf' })).map((cp) => cp.id),
          paged: (await store.listCheckpoints({ before: 'cp-2', limit: 2 })).map((cp) => cp.id),
          filteredRun: (await store.listCheckpoints({ runId: 'c', workflowName: 'wf' })).map((cp) => cp.id),
          filteredCursor: (await store.listCheckpoints({ runId: 'c', workflowName: 'wf', before: 'cp-3' })).map((cp) => cp.id),
          latestWf: (await store.getLatest({ workflowName: 'wf' }))?.id,
          runs: (await store.listRuns()).map((run) => [run.runId, run.lastSeq]),
          runsPaged: (await store.listRuns({ before: 'a', limit: 1 })).map((run) => run.runId),
        }
      }),
    )
    expect(listings[0]).toEqual(listings[1])
    expect(listings[0]?.all[0]).toBe('cp-4')
  })

  it('journals effects: attempts count, the first outcome wins, any call id stays inside the run', async () => {
    const directory = await tempDir()
    const store = open(directory)
    const callIds = ['toolu_01', '../../escape', 'a/b\\c', 'x'.repeat(300), 'ünïcode 🎉']
    for (const callId of callIds) await store.recordEffectIntent({ runId: 'r', callId, name: 'tool', inputHash: 'h', idempotencyKey: `k-${callId}` })
    expect((await store.recordEffectIntent({ runId: 'r', callId: '../../escape', name: 'tool', inputHash: 'h', idempotencyKey: 'k' })).attempts).toBe(2)
    expect(await store.completeEffect({ runId: 'r', callId: 'a/b\\c', status: 'succeeded', output: { at: new Date(1) } })).toMatchObject({
      recorded: true,
      effect: { status: 'succeeded', output: { at: new Date(1) } },
    })
    expect(await store.completeEffect({ runId: 'r', callId: 'a/b\\c', status: 'failed', output: 'late' })).toMatchObject({
      recorded: false,
      effect: { status: 'succeeded' },
    })
    expect((await store.listEffects('r')).map((effect) => effect.callId)).toEqual(callIds)
    expect(await store.getEffect('r', 'never')).toBeUndefined()
    // Every effect is in the run's log: no file is named after a call id.
    expect((await filesUnder(directory)).filter((file) => !file.endsWith('head.json'))).toEqual([join('runs', 'r', 'log.jsonl')])

    await store.close()
    const reopened = open(directory)
    expect(await reopened.getEffect('r', 'ünïcode 🎉')).toMatchObject({ idempotencyKey: 'k-ünïcode 🎉', attempts: 1 })
    expect(await reopened.prune({ runId: 'r' })).toEqual({ checkpointsDeleted: 0, effectsDeleted: 0 })
  })

  it('writes a commit as one frame: its effects, checkpoints and run row land together or not at all', async () => {
    const directory = await tempDir()
    const store = open(directory)
    await store.save({ runId: 'r', id: 'c1', kind: 'agent', phase: 'one', payload: { messages: conversation(2) } })
    const intent = (callId: string) => ({ runId: 'r', callId, name: 'tool', inputHash: 'h', idempotencyKey: `k-${callId}` })
    const framesBefore = (await readFile(logPath(directory, 'r'), 'utf8')).split('\n').length
    await store.write({
      runId: 'r',
      checkpoints: [
        { runId: 'r', id: 'c2', kind: 'agent', phase: 'two', payload: { messages: conversation(4) } },
        { runId: 'r', id: 'c3', kind: 'agent', phase: 'three', payload: { messages: conversation(6) } },
      ],
      intents: [intent('ahead'), intent('done')],
      completions: [{ runId: 'r', callId: 'done', status: 'succeeded', output: 'ok' }],
    })
    const text = await readFile(logPath(directory, 'r'), 'utf8')
    expect(text.split('\n').length).toBe(framesBefore + 1)
    expect(text.split('\n').at(-2)!.split(' ')[1]).toBe('2:c2,3:c3')
    await store.close()

    // The last frame cut short, as a crash part-way through the append leaves it: the commit never happened.
    await writeFile(logPath(directory, 'r'), text.slice(0, text.length - 40))
    // The process died before it synced the log, so its head file does not reach the last frame yet.
    await rm(join(directory, 'runs', 'r', 'head.json'))
    const reopened = open(directory)
    expect((await reopened.listCheckpoints({ runId: 'r' })).map((cp) => cp.id)).toEqual(['c1'])
    expect(await reopened.getEffect('r', 'ahead')).toBeUndefined()
    expect(await reopened.getEffect('r', 'done')).toBeUndefined()
    expect((await reopened.getRun('r'))?.lastSeq).toBe(1)
    // The next commit cuts the torn frame off before it appends.
    await reopened.save({ runId: 'r', kind: 'agent', phase: 'four', payload: { messages: conversation(8) } })
    const after = await readFile(logPath(directory, 'r'), 'utf8')
    expect(after.startsWith(text.slice(0, text.lastIndexOf('\n', text.length - 2) + 1))).toBe(true)
    expect(after.split('\n').length).toBe(framesBefore + 1)
    expect((await reopened.getLatest<{ messages: unknown[] }>({ runId: 'r' }))?.payload.messages).toEqual(conversation(8))
  })

  it('rejects path-traversal ids before anything is written', async () => {
    const base = await tempDir()
    const directory = join(base, 'store')
    const store = open(directory)
    const engine = new FileEngine({ directory })
    cleanup.push(() => engine.close())
    for (const runId of ['../x', 'a/b', '..', '.hidden', 'a\\b', 'nul\u0000byte', '']) {
      await expect(store.save({ runId, kind: 'k', phase: 'p', payload: {} })).rejects.toBeInstanceOf(InvalidArgumentError)
      await expect(store.createRun({ runId })).rejects.toMatchObject({ code: 'invalid_argument' })
      await expect(engine.insertRun(runRow(runId))).rejects.toMatchObject({ code: 'invalid_argument' })
      await expect(engine.commit(commitRequest({ runId, id: 'cp', seq: 1 }))).rejects.toMatchObject({ code: 'invalid_argument' })
      await expect(engine.readLists(runId, [])).rejects.toMatchObject({ code: 'invalid_argument' })
      await expect(engine.listEffects(runId, ['c'])).rejects.toMatchObject({ code: 'invalid_argument' })
      await expect(engine.deleteRun(runId)).rejects.toMatchObject({ code: 'invalid_argument' })
    }
    for (const bad of ['../x', 'a/b', '..']) {
      await expect(engine.commit(commitRequest({ runId: 'ok', id: bad, seq: 1 }))).rejects.toMatchObject({ code: 'invalid_argument' })
      await expect(engine.getCheckpoints([bad])).rejects.toMatchObject({ code: 'invalid_argument' })
      const request = commitRequest({ runId: 'ok', id: 'cp', seq: 1 })
      await expect(engine.commit({ ...request, appends: [{ listId: bad, expectedLength: 0, items: ['1'] }] })).rejects.toMatchObject({
        code: 'invalid_argument',
      })
      await expect(engine.readLists('ok', [{ id: bad, n: 1 }])).rejects.toMatchObject({ code: 'invalid_argument' })
    }
    // Not even the store's directory was created: every id was refused before any disk access.
    expect(await readdir(base)).toEqual([])
  })

  it('a keyed store whose last frame is damaged reports corruption, not tampering', async () => {
    const directory = await tempDir()
    const keys = [{ id: 'key-a', secret: Buffer.alloc(32, 7).toString('base64') }]
    const store = open(directory, { keys })
    await store.save({ runId: 'r', kind: 'agent', phase: 'p', payload: { n: 1 } })
    const last = await store.save({ runId: 'r', kind: 'agent', phase: 'p', payload: { n: 2 } })
    await store.close()
    // The last commit's record damaged, its header and checks intact: its checkpoint and its run
    // row (sealed over checkpoint 2) are lost, and the row kept is sealed over checkpoint 1.
    const log = await runLogOf(directory, 'r')
    const frame = log.lines[log.frameOf(last)]!
    log.lines[log.frameOf(last)] = `${frame.split(' ').slice(0, 2).join(' ')} {"c":[{"id": "torn`
    await log.write(true)

    const reopened = open(directory, { keys })
    // The run reads as having reached seq 2 (its seal over checkpoint 1 accepted), never as tampered with.
    expect((await reopened.getRun('r'))?.lastSeq).toBe(2)
    await expectCorruption(reopened.getLatest({ runId: 'r' }), { runId: 'r', checkpointId: last })
  })

  it('a listing never skips a corrupt checkpoint: it is reported from listing, load, getLatest and the next save', async () => {
    const directory = await tempDir()
    const store = open(directory)
    const ids: string[] = []
    for (let i = 1; i <= 4; i++) ids.push(await store.save({ runId: 'r', kind: 'agent', phase: 'p', payload: { messages: conversation(i) } }))
    await store.close()
    const [first = '', second = '', third = '', fourth = ''] = ids
    // Three records damaged in the log, its checks computed again: cut short, not an object, edited.
    const log = await runLogOf(directory, 'r')
    const record = (id: string) => log.lines[log.frameOf(id)]!
    const header = (id: string) => record(id).split(' ').slice(0, 2).join(' ')
    log.lines[log.frameOf(fourth)] = `${header(fourth)} {"c":[{"id": "torn`
    log.lines[log.frameOf(third)] = `${header(third)} [1, 2]`
    log.lines[log.frameOf(second)] = record(second).replace('"phase":"p"', '"phase":"edited"')
    await log.write(true)

    const reopened = open(directory)
    await expectCorruption(reopened.listCheckpoints({ runId: 'r' }), { runId: 'r', checkpointId: fourth })
    await expectCorruption(reopened.listCheckpoints({ runId: 'r', workflowName: 'wf' }), { runId: 'r', checkpointId: fourth })
    await expectCorruption(reopened.listCheckpoints(), { runId: 'r', checkpointId: fourth })
    await expectCorruption(reopened.listCheckpoints({ runId: 'r', before: third }), { runId: 'r', checkpointId: second })
    expect((await reopened.listCheckpoints({ runId: 'r', before: second })).map((cp) => cp.id)).toEqual([first])
    // Unchecked headers (for a tool that checks each record itself) still never skip one: a malformed header is refused.
    expect((await reopened.listCheckpoints({ runId: 'r', verify: false }).catch((err: unknown) => err))).toBeInstanceOf(CheckpointCorruptionError)
    await expectCorruption(reopened.load(fourth), { runId: 'r', checkpointId: fourth })
    await expectCorruption(reopened.load(third), { runId: 'r', checkpointId: third })
    await expectCorruption(reopened.load(second), { runId: 'r', checkpointId: second })
    await expectCorruption(reopened.getLatest({ runId: 'r' }), { runId: 'r', checkpointId: fourth })
    // Never a silent rewind to checkpoint 1, never a fresh start.
    await expectCorruption(reopened.save({ runId: 'r', kind: 'agent', phase: 'p', payload: { messages: conversation(5) } }), {
      runId: 'r',
      checkpointId: fourth,
    })
    // A corrupt checkpoint can still be deleted; the run is then refused as rolled back, and a
    // fork of the last good checkpoint goes on.
    expect(await reopened.delete(fourth)).toBe(true)
    expect(await reopened.delete(third)).toBe(true)
    expect(await reopened.delete(second)).toBe(true)
    await expectCorruption(reopened.getLatest({ runId: 'r' }), { runId: 'r', checkpointId: first })
    const forked = await reopened.fork({ checkpointId: first, runId: 'r2' })
    expect((await reopened.load(await reopened.save({ runId: 'r2', kind: 'agent', phase: 'p', payload: { messages: conversation(2) } }))).seq).toBe(2)
    expect(forked.payload).toEqual({ messages: conversation(1) })
  })

  it('reports an edited list item, and a damaged frame that holds no checkpoint as the whole run', async () => {
    const directory = await tempDir()
    const store = open(directory)
    const id = await store.save({ runId: 'r', kind: 'agent', phase: 'p', payload: { messages: conversation(3) } })
    await store.updateRun('r', { status: 'completed' })
    await store.close()
    const log = await runLogOf(directory, 'r')
    log.lines[0] = log.lines[0]!.replace('message 1', 'message X')
    await log.write(true)
    const reopened = open(directory)
    await expectCorruption(reopened.load(id), { runId: 'r', checkpointId: id })
    await reopened.close()

    // The frame of the status change, edited without its check computed again.
    log.lines[1] = log.lines[1]!.replace('completed', 'cancelled')
    await log.write(false)
    const again = open(directory)
    await expect(again.getRun('r')).rejects.toThrow(`frame 2 of its log ${logPath(directory, 'r')} is corrupt`)
    await expect(again.getRun('r')).rejects.toBeInstanceOf(CheckpointCorruptionError)
    await expect(again.save({ runId: 'r', kind: 'agent', phase: 'p', payload: {} })).rejects.toThrow('log.jsonl')
    await expect(again.listRuns()).rejects.toThrow('log.jsonl')
  })

  it('keeps storage linear: 200 saves of a growing conversation store it about once', async () => {
    const directory = await tempDir()
    const store = open(directory)
    const messages = conversation(200)
    for (let i = 1; i <= 200; i++) await store.save({ runId: 'long', kind: 'agent', phase: 'after_model', payload: { messages: messages.slice(0, i) } })
    // Every message stored once, as one JSON string in the frame that appended it.
    const finalListBytes = messages.reduce((sum, m) => sum + JSON.stringify(JSON.stringify(encodeValue(m))).length + 1, 0)
    let total = 0
    for (const file of await filesUnder(directory)) total += (await stat(join(directory, file))).size
    // 200 frames of well under 1 KB each besides the list items: not 200 × 100 KB.
    expect(total).toBeGreaterThan(finalListBytes)
    expect(total).toBeLessThan(finalListBytes + 200 * 1024)
    expect((await store.getLatest<{ messages: unknown[] }>({ runId: 'long' }))?.payload.messages).toHaveLength(200)
  }, 60_000)

  it('a reopened store sees everything and keeps appending to the same lists', async () => {
    const directory = await tempDir()
    const first = open(directory)
    await first.createRun({ runId: 'r', name: 'demo', threadId: 't1', metadata: { owner: 'me' } })
    for (let i = 1; i <= 3; i++) await first.save({ runId: 'r', kind: 'agent', phase: 'p', payload: { messages: conversation(i * 2) } })
    await first.recordEffectIntent({ runId: 'r', callId: 'c1', name: 'tool', inputHash: 'h', idempotencyKey: 'k' })
    await first.close()

    const second = open(directory)
    expect(await second.getRun('r')).toMatchObject({ name: 'demo', threadId: 't1', lastSeq: 3, metadata: { owner: 'me' } })
    expect((await second.listCheckpoints({ runId: 'r' })).map((cp) => cp.seq)).toEqual([3, 2, 1])
    expect((await second.getLatest<{ messages: unknown[] }>({ runId: 'r' }))?.payload.messages).toHaveLength(6)
    expect((await second.listEffects('r')).map((effect) => effect.callId)).toEqual(['c1'])
    const id = await second.save({ runId: 'r', kind: 'agent', phase: 'p', payload: { messages: conversation(8) } })
    expect((await second.load(id)).seq).toBe(4)
    expect((await second.getLatest<{ messages: unknown[] }>({ runId: 'r' }))?.payload.messages).toHaveLength(8)
  })

  it('serializes concurrent saves to one run and shares its lock with another handle on the directory', async () => {
    const directory = await tempDir()
    const a = open(directory)
    const ids = await Promise.all(
      Array.from({ length: 20 }, (_, i) => a.save({ runId: 'r', kind: 'agent', phase: 'p', payload: { messages: conversation(2 + i), i } })),
    )
    expect((await a.listCheckpoints({ runId: 'r' })).map((cp) => cp.id)).toEqual([...ids].reverse())
    for (const [i, id] of ids.entries()) expect((await a.load<{ messages: unknown[] }>(id)).payload.messages).toHaveLength(2 + i)

    // A second handle on the same directory sees the first one's writes at once, and both append
    // to the same run in turn without reusing a seq.
    const b = open(directory)
    expect((await b.getLatest({ runId: 'r' }))?.id).toBe(ids[19])
    for (let i = 0; i < 4; i++) await (i % 2 ? a : b).save({ runId: 's', kind: 'agent', phase: 'p', payload: { messages: conversation(2 + i) } })
    expect((await a.listCheckpoints({ runId: 's' })).map((cp) => cp.seq)).toEqual([4, 3, 2, 1])
    expect((await b.getLatest<{ messages: unknown[] }>({ runId: 's' }))?.payload.messages).toEqual(conversation(5))

    // Two engines on one directory: the same seq from both commits once.
    const engines = [new FileEngine({ directory }), new FileEngine({ directory })]
    for (const engine of engines) cleanup.push(() => engine.close())
    const results = await Promise.all(engines.map((engine, k) => engine.commit(commitRequest({ runId: 't', id: `t-${k}`, seq: 1 }))))
    expect(results.map((result) => result.ok).sort()).toEqual([false, true])
  })

  it('drops list items and files no remaining checkpoint references', async () => {
    const directory = await tempDir()
    const store = open(directory)
    const ids: string[] = []
    for (let i = 1; i <= 3; i++) ids.push(await store.save({ runId: 'r', kind: 'agent', phase: 'p', payload: { messages: conversation(i * 2) } }))
    // The conversation was trimmed: a new list starts.
    ids.push(await store.save({ runId: 'r', kind: 'agent', phase: 'p', payload: { messages: conversation(2, 100) } }))
    expect(await store.prune({ runId: 'r', keepLast: 2 })).toEqual({ checkpointsDeleted: 2, effectsDeleted: 0 })
    // The log was compacted to what the two kept checkpoints need: both lists.
    expect(await compactedLists(directory, 'r')).toHaveLength(2)
    expect(await store.delete(ids[3] ?? '')).toBe(true)
    expect(await compactedLists(directory, 'r')).toHaveLength(1)
    expect(await store.delete(ids[2] ?? '')).toBe(true)
    expect(await compactedLists(directory, 'r')).toEqual([])
    expect((await store.getRun('r'))?.lastSeq).toBe(4)
  })

  it('survives SIGKILL in the middle of saves: the latest loads and the run goes on', async () => {
    const directory = await tempDir()
    const fixture = fileURLToPath(new URL('./fixtures/open-file.ts', import.meta.url))
    const script = `
      const { openStore } = await import(${JSON.stringify(fixture)})
      const store = await openStore(${JSON.stringify(directory)})
      const messages = []
      for (let i = 0; ; i++) {
        messages.push({ i, text: 'm'.padEnd(2000, 'x') })
        await store.save({ runId: 'crash', kind: 'agent', phase: 'p', payload: { messages } })
        if (i === 5) process.stdout.write('ready\\n')
      }`
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', () => resolve())
      child.on('exit', (code) => reject(new Error(`child exited early with ${String(code)}`)))
    })
    await new Promise((resolve) => setTimeout(resolve, 30 + Math.random() * 100))
    child.kill('SIGKILL')
    await new Promise((resolve) => child.on('close', resolve))

    const store = open(join(directory, 'store'))
    const latest = await store.getLatest<{ messages: { i: number }[] }>({ runId: 'crash' })
    expect(latest?.payload.messages).toHaveLength(latest?.seq ?? -1)
    expect(latest?.payload.messages.map((m) => m.i)).toEqual(Array.from({ length: latest?.seq ?? 0 }, (_, i) => i))
    const next = [...(latest?.payload.messages ?? []), { i: latest?.seq ?? 0, text: 'after' }]
    const id = await store.save({ runId: 'crash', kind: 'agent', phase: 'p', payload: { messages: next } })
    expect((await store.load<{ messages: unknown[] }>(id)).payload.messages).toEqual(next)
  })
})

describe('FileEngine', () => {
  it('commits nothing on stale_seq, duplicate_id or list_conflict', async () => {
    const directory = await tempDir()
    const engine = new FileEngine({ directory })
    cleanup.push(() => engine.close())
    const append = { listId: 'list-1', expectedLength: 0, items: ['"a"', '"b"'] }
    expect(await engine.commit({ ...commitRequest({ runId: 'r', id: 'cp1', seq: 1 }), appends: [append] })).toEqual({ ok: true })
    const before = await readFile(logPath(directory, 'r'), 'utf8')
    expect(await engine.commit(commitRequest({ runId: 'r', id: 'cp2', seq: 1 }))).toEqual({ ok: false, reason: 'stale_seq', lastSeq: 1 })
    expect(await engine.commit(commitRequest({ runId: 'other', id: 'cp1', seq: 1 }))).toEqual({ ok: false, reason: 'duplicate_id' })
    for (const expectedLength of [0, 1, 3]) {
      const conflicting = { ...commitRequest({ runId: 'r', id: 'cp3', seq: 2 }), appends: [{ ...append, expectedLength, items: ['"c"'] }] }
      expect(await engine.commit(conflicting)).toEqual({ ok: false, reason: 'list_conflict' })
    }
    expect(await readFile(logPath(directory, 'r'), 'utf8')).toBe(before)
    expect(await readdir(join(directory, 'runs'))).toEqual(['r'])
    expect(await engine.readLists('r', [{ id: 'list-1', n: 5 }])).toEqual([['"a"', '"b"']])
    const concurrent = await Promise.all([engine.commit(commitRequest({ runId: 'r', id: 'x1', seq: 9 })), engine.commit(commitRequest({ runId: 'q', id: 'x1', seq: 1 }))])
    expect(concurrent.filter((result) => result.ok)).toHaveLength(1)
  })

  it('never reads a torn last frame, even as a cold engine, and a reader never cuts it', async () => {
    const directory = await tempDir()
    const engine = new FileEngine({ directory })
    expect(await engine.commit({ ...commitRequest({ runId: 'r', id: 'cp1', seq: 1 }), appends: [{ listId: 'l', expectedLength: 0, items: ['1', '2'] }] })).toEqual({
      ok: true,
    })
    await engine.close()
    const clean = await readFile(logPath(directory, 'r'), 'utf8')
    await appendFile(logPath(directory, 'r'), '0123456789abcdef0123456789abcdef 2:cp2 {"a":[["l",2,["3"]]],"c":[{"torn')
    const cold = new FileEngine({ directory })
    cleanup.push(() => cold.close())
    expect(await cold.readLists('r', [{ id: 'l', n: 2 }, { id: 'l', n: 9 }, { id: 'missing', n: 1 }])).toEqual([['1', '2'], ['1', '2'], []])
    expect((await cold.getRun('r'))?.lastSeq).toBe(1)
    expect((await readFile(logPath(directory, 'r'), 'utf8')).length).toBeGreaterThan(clean.length)
    // The next append cuts the torn frame off first.
    const request = { ...commitRequest({ runId: 'r', id: 'cp2', seq: 2 }), appends: [{ listId: 'l', expectedLength: 2, items: ['4'] }] }
    expect(await cold.commit(request)).toEqual({ ok: true })
    const text = await readFile(logPath(directory, 'r'), 'utf8')
    expect(text.startsWith(clean)).toBe(true)
    expect(text.slice(clean.length).split('\n')).toHaveLength(2)
    expect(await cold.readLists('r', [{ id: 'l', n: 9 }])).toEqual([['1', '2', '4']])
  })

  it('keeps ids distinct in file names on case-insensitive file systems', async () => {
    const directory = await tempDir()
    const store = open(directory)
    await store.save({ runId: 'Run:1', kind: 'k', phase: 'p', payload: { upper: true } })
    await store.save({ runId: 'run:1', kind: 'k', phase: 'p', payload: { upper: false } })
    expect((await readdir(join(directory, 'runs'))).sort()).toEqual(['%52un%3a1', 'run%3a1'])
    expect((await store.getLatest({ runId: 'Run:1' }))?.payload).toEqual({ upper: true })
    expect((await store.listRuns()).map((run) => run.runId).sort()).toEqual(['Run:1', 'run:1'])
  })
})

function runRow(runId: string): RunRow {
  return {
    runId,
    status: 'running',
    name: null,
    threadId: null,
    workflowName: null,
    configSignature: null,
    lastSeq: 0,
    createdAt: 1,
    updatedAt: 1,
    metadata: '{}',
  }
}

function commitRequest(params: { runId: string; id: string; seq: number }): CommitRequest {
  const row = {
    id: params.id,
    runId: params.runId,
    parentId: null,
    seq: params.seq,
    kind: 'k',
    phase: 'p',
    schemaVersion: 1,
    createdAt: params.seq,
    workflowName: null,
    terminal: false,
    metadata: '{}',
    body: '{}',
    lists: '[]',
  }
  return { rows: [{ ...row, digest: checkpointDigest(row) }], appends: [], run: runRow(params.runId) }
}
