import { spawn } from 'node:child_process'
import { appendFile, mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { encodeValue } from '../src/core/codec.js'
import { CheckpointCorruptionError, InvalidArgumentError } from '../src/core/errors.js'
import type { CommitRequest } from '../src/store/engine/storage-engine.js'
import type { CheckpointRow, RunRow } from '../src/store/engine/rows.js'
import { FileEngine } from '../src/store/backends/file/file-engine.js'
import { checkpointFileName } from '../src/store/backends/file/file-names.js'
import { FileStore, type FileStoreOptions } from '../src/store/backends/file/file-store.js'
import { MemoryStore } from '../src/store/backends/memory/memory-store.js'
import { checkpointDigest } from '../src/store/encoding/checkpoint-rows.js'
import type { CheckpointStore } from '../src/store/checkpoint-store.js'

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

async function listFiles(directory: string, runId: string): Promise<string[]> {
  const dir = join(directory, 'runs', runId, 'lists')
  return (await readdir(dir)).map((name) => join(dir, name))
}

async function checkpointPath(directory: string, runId: string, checkpointId: string): Promise<string> {
  const dir = join(directory, 'runs', runId, 'checkpoints')
  const name = (await readdir(dir)).find((file) => file.endsWith(`-${checkpointId}.json`))
  if (!name) throw new Error(`no file for checkpoint ${checkpointId}`)
  return join(dir, name)
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
    // Every effect file is inside the run's effects directory; the others are the run's record and its log.
    const all = await filesUnder(directory)
    expect(all.filter((file) => !file.includes('effects'))).toEqual([join('runs', 'r', 'run.json'), join('runs', 'r', 'lists', 'run-log.jsonl')])
    const files = all.filter((file) => file.includes('effects'))
    expect(files.every((file) => file === join('runs', 'r', 'effects', file.split('/').pop() ?? ''))).toBe(true)
    expect(files).toHaveLength(callIds.length)

    await store.close()
    const reopened = open(directory)
    expect(await reopened.getEffect('r', 'ünïcode 🎉')).toMatchObject({ idempotencyKey: 'k-ünïcode 🎉', attempts: 1 })
    expect(await reopened.prune({ runId: 'r' })).toEqual({ checkpointsDeleted: 0, effectsDeleted: 0 })
  })

  it('writes a commit in steps: the journal before the checkpoints; a failed checkpoint step leaves no checkpoint of it and no temp file, and the run log never ahead of the journal', async () => {
    const directory = await tempDir()
    const store = open(directory)
    await store.save({ runId: 'r', id: 'c1', kind: 'agent', phase: 'one', payload: { messages: conversation(2) } })
    // The second checkpoint of the next commit cannot be renamed into place: a directory holds its name.
    await mkdir(join(directory, 'runs', 'r', 'checkpoints', checkpointFileName(3, 'c3')))
    const intent = (callId: string) => ({ runId: 'r', callId, name: 'tool', inputHash: 'h', idempotencyKey: `k-${callId}` })
    const failed = store.write({
      runId: 'r',
      checkpoints: [
        { runId: 'r', id: 'c2', kind: 'agent', phase: 'two', payload: { messages: conversation(4) } },
        { runId: 'r', id: 'c3', kind: 'agent', phase: 'three', payload: { messages: conversation(6) } },
      ],
      intents: [intent('ahead'), intent('done')],
      completions: [{ runId: 'r', callId: 'done', status: 'succeeded', output: 'ok' }],
    })
    await expect(failed).rejects.toThrow(/failed to save checkpoint \(run r\): EISDIR/)
    // The journal is written before the checkpoints, outcomes included: the effect opened and
    // completed in the same commit is there once, completed, so a resume would take its outcome.
    expect(await store.getEffect('r', 'ahead')).toMatchObject({ status: 'pending', attempts: 1 })
    expect(await store.getEffect('r', 'done')).toMatchObject({ status: 'succeeded', attempts: 1, output: 'ok' })
    expect((await readdir(join(directory, 'runs', 'r', 'checkpoints'))).filter((name) => name.endsWith('.tmp'))).toEqual([])

    await rm(join(directory, 'runs', 'r', 'checkpoints', checkpointFileName(3, 'c3')), { recursive: true })
    const reopened = open(directory)
    // The first checkpoint of the failed step was renamed into place before the failure, in order.
    expect((await reopened.listCheckpoints({ runId: 'r' })).map((cp) => cp.id)).toEqual(['c2', 'c1'])
    expect((await reopened.getLatest<{ messages: unknown[] }>({ runId: 'r' }))?.payload.messages).toEqual(conversation(4))
    await reopened.write({
      runId: 'r',
      checkpoints: [{ runId: 'r', kind: 'agent', phase: 'four', payload: { messages: conversation(8) } }],
      completions: [{ runId: 'r', callId: 'ahead', status: 'succeeded', output: 'late' }],
    })
    expect(await reopened.getEffect('r', 'ahead')).toMatchObject({ status: 'succeeded', attempts: 1, output: 'late' })
    expect(await reopened.getEffect('r', 'done')).toMatchObject({ status: 'succeeded', attempts: 1, output: 'ok' })
    expect((await reopened.getLatest<{ messages: unknown[] }>({ runId: 'r' }))?.payload.messages).toEqual(conversation(8))
  })

  it("cuts a crashed save's leftover list tail on the next append and never reads it", async () => {
    const directory = await tempDir()
    const first = open(directory)
    await first.save({ runId: 'r', kind: 'agent', phase: 'after_model', payload: { messages: conversation(3) } })
    const second = await first.save({ runId: 'r', kind: 'agent', phase: 'after_tools', payload: { messages: conversation(5) } })
    await first.close()
    // What a save that died after appending its lines but before writing its checkpoint leaves.
    const [listFile] = await listFiles(directory, 'r')
    if (!listFile) throw new Error('no list file')
    const clean = await readFile(listFile, 'utf8')
    await appendFile(listFile, `${JSON.stringify({ role: 'user', text: 'never saved' })}\n{"role":"assistant","te`)

    const store = open(directory)
    const latest = await store.getLatest<{ messages: unknown[] }>({ runId: 'r' })
    expect(latest?.id).toBe(second)
    expect(latest?.payload.messages).toEqual(conversation(5))
    await store.save({ runId: 'r', kind: 'agent', phase: 'after_model', payload: { messages: conversation(7) } })
    const lines = (await readFile(listFile, 'utf8')).split('\n')
    expect(lines.pop()).toBe('')
    expect(lines.map((line) => JSON.parse(line) as unknown)).toHaveLength(7)
    expect((await readFile(listFile, 'utf8')).startsWith(clean)).toBe(true)
    expect(await listFiles(directory, 'r')).toEqual([listFile])
    expect((await store.getLatest<{ messages: unknown[] }>({ runId: 'r' }))?.payload.messages).toEqual(conversation(7))
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

  it('a listing never skips a corrupt checkpoint: it is reported from listing, load, getLatest and the next save', async () => {
    const directory = await tempDir()
    const store = open(directory)
    const ids: string[] = []
    for (let i = 1; i <= 4; i++) ids.push(await store.save({ runId: 'r', kind: 'agent', phase: 'p', payload: { messages: conversation(i) } }))
    await store.close()
    const [first = '', second = '', third = '', fourth = ''] = ids
    await writeFile(await checkpointPath(directory, 'r', fourth), '{"id": "torn')
    await writeFile(await checkpointPath(directory, 'r', third), '[1, 2]')
    const edited = JSON.parse(await readFile(await checkpointPath(directory, 'r', second), 'utf8')) as CheckpointRow
    await writeFile(await checkpointPath(directory, 'r', second), JSON.stringify({ ...edited, phase: 'edited' }))

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

  it('reports an edited list item and a corrupt run.json', async () => {
    const directory = await tempDir()
    const store = open(directory)
    const id = await store.save({ runId: 'r', kind: 'agent', phase: 'p', payload: { messages: conversation(3) } })
    await store.close()
    const [listFile = ''] = await listFiles(directory, 'r')
    await writeFile(listFile, (await readFile(listFile, 'utf8')).replace('message 1', 'message X'))
    await writeFile(join(directory, 'runs', 'r', 'run.json'), '{"runId":')
    const reopened = open(directory)
    await expectCorruption(reopened.load(id), { runId: 'r', checkpointId: id })
    await expect(reopened.getRun('r')).rejects.toThrow(join(directory, 'runs', 'r', 'run.json'))
    await expect(reopened.save({ runId: 'r', kind: 'agent', phase: 'p', payload: {} })).rejects.toThrow('run.json')
    await expect(reopened.listRuns()).rejects.toThrow('run.json')
  })

  it('keeps storage linear: 200 saves of a growing conversation store it about once', async () => {
    const directory = await tempDir()
    const store = open(directory)
    const messages = conversation(200)
    for (let i = 1; i <= 200; i++) await store.save({ runId: 'long', kind: 'agent', phase: 'after_model', payload: { messages: messages.slice(0, i) } })
    // Every message stored once: one line of its encoded JSON each.
    const finalListBytes = messages.reduce((sum, m) => sum + JSON.stringify(encodeValue(m)).length + 1, 0)
    const lists = await listFiles(directory, 'long')
    expect(lists).toHaveLength(1)
    const listBytes = (await stat(lists[0] ?? '')).size
    expect(listBytes).toBe(finalListBytes)
    let total = 0
    for (const file of await filesUnder(directory)) total += (await stat(join(directory, file))).size
    // 200 checkpoint files of well under 1 KB each on top of the list: not 200 × 100 KB.
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
    const lists = await listFiles(directory, 'r')
    expect(lists).toHaveLength(1)
    expect((await readFile(lists[0] ?? '', 'utf8')).split('\n')).toHaveLength(9)
  })

  it('takes lastSeq from the checkpoint files when run.json lags behind them', async () => {
    const directory = await tempDir()
    const store = open(directory)
    for (let i = 0; i < 3; i++) await store.save({ runId: 'r', kind: 'k', phase: 'p', payload: { i } })
    await store.close()
    // A crash between writing checkpoint 3 and updating run.json.
    const runFile = join(directory, 'runs', 'r', 'run.json')
    await writeFile(runFile, JSON.stringify({ ...(JSON.parse(await readFile(runFile, 'utf8')) as RunRow), lastSeq: 2 }))

    const reopened = open(directory)
    expect((await reopened.getRun('r'))?.lastSeq).toBe(3)
    await expect(reopened.save({ runId: 'r', seq: 3, kind: 'k', phase: 'p', payload: {} })).rejects.toMatchObject({ code: 'seq_conflict' })
    const latest = await reopened.getLatest({ runId: 'r' })
    expect(latest?.seq).toBe(3)
    expect((await reopened.load(await reopened.save({ runId: 'r', kind: 'k', phase: 'p', payload: {} }))).seq).toBe(4)
    expect(await reopened.delete(latest?.id ?? '')).toBe(true)
    await reopened.close()
    const again = open(directory)
    expect((await again.getRun('r'))?.lastSeq).toBe(4)
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
    expect(await listFiles(directory, 'r')).toHaveLength(2)
    expect(await store.prune({ runId: 'r', keepLast: 2 })).toEqual({ checkpointsDeleted: 2, effectsDeleted: 0 })
    const lists = await listFiles(directory, 'r')
    expect(lists).toHaveLength(2)
    expect(await store.delete(ids[3] ?? '')).toBe(true)
    expect(await listFiles(directory, 'r')).toHaveLength(1)
    expect(await store.delete(ids[2] ?? '')).toBe(true)
    expect(await listFiles(directory, 'r')).toEqual([])
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
    const before = await filesUnder(directory)
    expect(await engine.commit(commitRequest({ runId: 'r', id: 'cp2', seq: 1 }))).toEqual({ ok: false, reason: 'stale_seq', lastSeq: 1 })
    expect(await engine.commit(commitRequest({ runId: 'other', id: 'cp1', seq: 1 }))).toEqual({ ok: false, reason: 'duplicate_id' })
    for (const expectedLength of [0, 1, 3]) {
      const conflicting = { ...commitRequest({ runId: 'r', id: 'cp3', seq: 2 }), appends: [{ ...append, expectedLength, items: ['"c"'] }] }
      expect(await engine.commit(conflicting)).toEqual({ ok: false, reason: 'list_conflict' })
    }
    expect(await filesUnder(directory)).toEqual(before)
    expect(await engine.readLists('r', [{ id: 'list-1', n: 5 }])).toEqual([['"a"', '"b"']])
    const concurrent = await Promise.all([engine.commit(commitRequest({ runId: 'r', id: 'x1', seq: 9 })), engine.commit(commitRequest({ runId: 'q', id: 'x1', seq: 1 }))])
    expect(concurrent.filter((result) => result.ok)).toHaveLength(1)
  })

  it('never returns a torn last line of a list file, even to a cold engine', async () => {
    const directory = await tempDir()
    const engine = new FileEngine({ directory })
    expect(await engine.commit({ ...commitRequest({ runId: 'r', id: 'cp1', seq: 1 }), appends: [{ listId: 'l', expectedLength: 0, items: ['1', '2'] }] })).toEqual({
      ok: true,
    })
    await engine.close()
    await appendFile(join(directory, 'runs', 'r', 'lists', 'l.jsonl'), '3\n{"torn')
    const cold = new FileEngine({ directory })
    cleanup.push(() => cold.close())
    expect(await cold.readLists('r', [{ id: 'l', n: 2 }, { id: 'l', n: 9 }, { id: 'missing', n: 1 }])).toEqual([['1', '2'], ['1', '2', '3'], []])
    // An append that expects 2 items cuts the unreferenced line and the torn one.
    const request = { ...commitRequest({ runId: 'r', id: 'cp2', seq: 2 }), appends: [{ listId: 'l', expectedLength: 2, items: ['4'] }] }
    expect(await cold.commit(request)).toEqual({ ok: true })
    expect(await readFile(join(directory, 'runs', 'r', 'lists', 'l.jsonl'), 'utf8')).toBe('1\n2\n4\n')
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
