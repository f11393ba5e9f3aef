import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Agent, FileStore, MemoryStore, Runner, type CheckpointStore, type RunEvent } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel } from '../../src/testing.js'

const dirs: string[] = []
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true })
})

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-streams-'))
  dirs.push(dir)
  return dir
}

const backends: [string, () => Promise<CheckpointStore>][] = [
  ['memory', async () => new MemoryStore()],
  ['file', async () => new FileStore({ directory: await tempDir() })],
  ['sqlite', async () => new SqliteStore({ path: join(await tempDir(), 'cairn.db') })],
]

const ANSWER = 'The fourth quarter grew by twelve percent, led by subscriptions and the new enterprise tier.'

function agent(): Agent {
  return new Agent({ model: new ScriptedModel([[{ reasoning: { text: 'Think about Q4.' } }, { text: ANSWER }]]), name: 'analyst' })
}

async function collect(iterable: AsyncIterable<{ cursor: string; event: RunEvent }>) {
  const out: { cursor: string; event: RunEvent }[] = []
  for await (const item of iterable) out.push(item)
  return out
}

describe.each(backends)('run event log on %s', (_name, open) => {
  it('append, read after a cursor, wait for more, delete', async () => {
    const store = await open()
    const log = store.events!
    expect(await log.read('r1')).toEqual([])
    const cursors = await log.append('r1', [{ n: 1 }, { n: 2 }, { n: 3 }])
    expect(cursors).toHaveLength(3)
    expect((await log.read('r1')).map((e) => e.event)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }])
    expect((await log.read('r1', { after: cursors[0] })).map((e) => e.event)).toEqual([{ n: 2 }, { n: 3 }])
    expect((await log.read('r1', { after: cursors[0], limit: 1 })).map((e) => e.cursor)).toEqual([cursors[1]])
    expect(await log.waitForMore('r1', cursors[2], { timeoutMs: 20 })).toBe(false)
    expect(await log.waitForMore('r1', cursors[1], { timeoutMs: 20 })).toBe(true)
    const waiting = log.waitForMore('r1', cursors[2], { timeoutMs: 10_000 })
    const [next] = await log.append('r1', [{ n: 4 }])
    expect(await waiting).toBe(true)
    expect((await log.read('r1', { after: cursors[2] })).map((e) => e.cursor)).toEqual([next])
    expect(await log.read('other')).toEqual([])
    await log.deleteRun('r1')
    expect(await log.read('r1')).toEqual([])
    await store.close()
  })

  it('runner.events replays a finished run: deltas joined, the answer once, ending at run_finished', async () => {
    const store = await open()
    const runner = new Runner({ store })
    const live: RunEvent[] = []
    for await (const event of runner.stream(agent(), { input: 'Analyze Q4', runId: 'q4' })) live.push(event)
    // The live stream carries every delta as the model streamed it.
    expect(live.filter((e) => e.type === 'text_delta').length).toBeGreaterThan(1)
    expect(live.filter((e) => e.type === 'text_delta').map((e) => (e as { text: string }).text).join('')).toBe(ANSWER)
    const stored = await collect(runner.events('q4'))
    const types = stored.map((s) => s.event.type)
    expect(types[0]).toBe('run_started')
    expect(types[types.length - 1]).toBe('run_finished')
    const text = stored.flatMap((s) => (s.event.type === 'text_delta' ? [s.event.text] : [])).join('')
    expect(text).toBe(ANSWER)
    expect(stored.filter((s) => s.event.type === 'reasoning_delta').map((s) => (s.event as { text: string }).text)).toEqual(['Think about Q4.'])
    // Never one commit per token: the stored deltas are joined.
    expect(stored.filter((s) => s.event.type === 'text_delta').length).toBeLessThan(live.filter((e) => e.type === 'text_delta').length)
    const finished = stored[stored.length - 1]!.event
    expect(finished).toMatchObject({ type: 'run_finished', state: 'completed', text: ANSWER })
    // Reconnecting after any cursor gives exactly what follows it.
    for (const [i, { cursor }] of stored.entries()) {
      expect(await collect(runner.events('q4', { after: cursor }))).toEqual(stored.slice(i + 1))
    }
    // Deleting the run deletes its events.
    await store.deleteRun('q4')
    expect(await store.events!.read('q4')).toEqual([])
    await store.close()
  })

  it('a reader started before the run follows it live to the end', async () => {
    const store = await open()
    const runner = new Runner({ store })
    await store.createRun({ runId: 'live', status: 'queued' })
    const reading = collect(runner.events('live'))
    const result = await runner.run(agent(), { input: 'Analyze Q4', runId: 'live' })
    expect(result.state).toBe('completed')
    const events = await reading
    expect(events.map((e) => e.event.type)).toContain('model_call_finished')
    expect(events[events.length - 1]!.event).toMatchObject({ type: 'run_finished', state: 'completed' })
    await store.close()
  })

  it('the size cap keeps the run whole but drops deltas past a marker', async () => {
    const store = await open()
    const runner = new Runner({ store, eventLog: { maxBytes: 400 } })
    await runner.run(agent(), { input: 'Analyze Q4', runId: 'capped' })
    const stored = await collect(runner.events('capped'))
    const marker = stored.findIndex((s) => s.event.type === 'events_truncated')
    expect(marker).toBeGreaterThan(0)
    expect(stored.slice(marker).some((s) => s.event.type === 'text_delta')).toBe(false)
    expect(stored[stored.length - 1]!.event).toMatchObject({ type: 'run_finished', state: 'completed' })
    await store.close()
  })

  it('prune removes the events of a finished run with its journal', async () => {
    const store = await open()
    const runner = new Runner({ store })
    await runner.run(agent(), { input: 'Analyze Q4', runId: 'old' })
    expect((await store.events!.read('old')).length).toBeGreaterThan(0)
    await store.prune({ runId: 'old' })
    expect(await store.events!.read('old')).toEqual([])
    await store.close()
  })
})
