import { appendFile } from 'node:fs/promises'
import { join } from 'node:path'
import { inflateRawSync } from 'node:zlib'
import Database from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { Agent, FileStore, MemoryStore, Runner, tool, type CheckpointStore, type JsonObject, type RunEvent } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel } from '../../src/testing.js'
import { useTempDirs } from '../support/temp-dirs.js'
import { followRun } from '../../src/runner/run-stream.js'
import type { RunEventLog } from '../../src/store/event-log/run-event-log.js'

const tempDir = useTempDirs('cairn-streams-')

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

  it('a reader waiting after an event is woken by a next event of 200 KB', async () => {
    const store = await open()
    const log = store.events!
    const [first] = await log.append('r1', [{ n: 1 }])
    const long = { n: 2, text: 'x'.repeat(200_000) }
    const waiting = log.waitForMore('r1', first, { timeoutMs: 5000 })
    const [second] = await log.append('r1', [long])
    expect(await waiting).toBe(true)
    expect(await log.read('r1', { after: first })).toEqual([{ cursor: second, event: long }])
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

/** A tool call of `lookup` for each step, then the answer. */
function lookupAgent(calls: number, lookup: (key: string) => Promise<JsonObject> | JsonObject): Agent {
  const turns = Array.from({ length: calls }, (_, i) => [{ toolUse: { toolUseId: `call-${i}`, name: 'lookup', input: { key: `k${i}` } } }])
  const lookupTool = tool({
    name: 'lookup',
    description: 'Look a key up.',
    inputSchema: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
    callback: (input) => lookup((input as { key: string }).key),
  })
  return new Agent({ model: new ScriptedModel([...turns, [{ text: ANSWER }]]), tools: [lookupTool], name: 'analyst' })
}

/** `store`, with its event log's appends counted. */
function countAppends(store: CheckpointStore): { appends: number } {
  const counter = { appends: 0 }
  const log = store.events!
  const append = log.append.bind(log)
  log.append = (runId, events) => {
    counter.appends++
    return append(runId, events)
  }
  return counter
}

describe('how a run appends to its event log', () => {
  it('the boundaries a step crosses in one go share one append, instead of one append each', async () => {
    const store = new SqliteStore({ path: join(await tempDir(), 'cairn.db') })
    const counter = countAppends(store)
    await new Runner({ store }).run(lookupAgent(5, (key) => ({ key, value: 12 })), { input: 'Look five keys up', runId: 'steps' })
    const stored = await store.events!.read('steps')
    const boundaries = stored.filter((s) => s.event.type !== 'text_delta' && s.event.type !== 'reasoning_delta')
    expect(boundaries.length).toBeGreaterThan(30)
    // A scripted model and a tool that never wait: the run crosses every boundary in a few turns of the event loop.
    expect(counter.appends).toBeLessThan(boundaries.length / 4)
    expect(stored.at(-1)!.event).toMatchObject({ type: 'run_finished', state: 'completed' })
    await store.close()
  })

  it('a boundary is in the log as soon as the run waits, long before flushMs', async () => {
    const store = new SqliteStore({ path: join(await tempDir(), 'cairn.db') })
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    let started!: () => void
    const toolStarted = new Promise<void>((resolve) => (started = resolve))
    const agent = lookupAgent(1, async (key) => {
      started()
      await released
      return { key, value: 12 }
    })
    const running = new Runner({ store, eventLog: { flushMs: 60_000 } }).run(agent, { input: 'Look a key up', runId: 'waits' })
    await toolStarted
    // The tool waits: the next turn of the event loop has appended what came before it.
    expect(await store.events!.waitForMore('waits', undefined, { timeoutMs: 2000 })).toBe(true)
    const until = Date.now() + 2000
    let types: string[] = []
    while (!types.includes('tool_call_started') && Date.now() < until) {
      types = (await store.events!.read('waits')).map((s) => s.event.type as string)
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    expect(types).toContain('model_call_finished')
    expect(types).toContain('tool_call_started')
    expect(types).not.toContain('tool_call_finished')
    release()
    expect((await running).state).toBe('completed')
    await store.close()
  })

  it('a loop that never waits still appends every flushMs', async () => {
    const store = new MemoryStore()
    const counter = countAppends(store)
    // Each call holds the thread 15 ms without letting the event loop turn.
    const agent = lookupAgent(6, (key) => {
      const until = performance.now() + 15
      while (performance.now() < until);
      return { key, value: 12 }
    })
    const appendsDuringRun: number[] = []
    const onEvent = (event: RunEvent) => {
      if (event.type === 'tool_call_started') appendsDuringRun.push(counter.appends)
    }
    const runner = new Runner({ store, eventLog: { flushMs: 10 }, onEvent })
    await runner.run(agent, { input: 'Look six keys up', runId: 'busy' })
    // By the last call, the earlier ones' events were appended, though no timer nor turn could come.
    expect(appendsDuringRun.at(-1)).toBeGreaterThanOrEqual(3)
    await store.close()
  })

  it('a run returns with every event appended, even those that came while an append was in flight', async () => {
    const store = new MemoryStore()
    const log = store.events!
    const append = log.append.bind(log)
    const appended: string[] = []
    // A slow log: each append takes a while, so the run's last events arrive while one is in flight.
    log.append = async (runId, events) => {
      await new Promise((resolve) => setTimeout(resolve, 15))
      appended.push(...events.map((event) => event.type as string))
      return append(runId, events)
    }
    const result = await new Runner({ store }).run(lookupAgent(3, async (key) => {
      await new Promise((resolve) => setTimeout(resolve, 5))
      return { key, value: 12 }
    }), { input: 'Look three keys up', runId: 'slow' })
    expect(result.state).toBe('completed')
    expect(appended.at(-1)).toBe('run_finished')
    await store.close()
  })
})

describe('the FileStore event log', () => {
  it('a long line still being written is not an event until its newline, then wakes the reader', async () => {
    const directory = await tempDir()
    const store = new FileStore({ directory })
    const log = store.events!
    const [first] = await log.append('r1', [{ n: 1 }])
    // A 300 KB event cut short, as a crash or a writer in another process leaves it: no newline yet.
    const line = JSON.stringify({ n: 2, text: 'y'.repeat(300_000) })
    const file = join(directory, 'events', 'r1.jsonl')
    await appendFile(file, line.slice(0, 200_000))
    expect(await log.waitForMore('r1', first, { timeoutMs: 300 })).toBe(false)
    const waiting = log.waitForMore('r1', first, { timeoutMs: 5000 })
    await appendFile(file, `${line.slice(200_000)}\n`)
    expect(await waiting).toBe(true)
    expect((await log.read('r1', { after: first })).map((entry) => entry.event)).toEqual([JSON.parse(line)])
    await store.close()
  })
})

describe('the SQLite event log', () => {
  it('stores an append as one row however many events it carries, and reads inside it from any cursor', async () => {
    const path = join(await tempDir(), 'cairn.db')
    const store = new SqliteStore({ path })
    const log = store.events!
    const first = await log.append('r', [{ n: 1 }, { n: 2 }, { n: 3 }])
    const second = await log.append('r', [{ n: 4 }, { n: 5 }])
    expect([...first, ...second]).toEqual(['1', '2', '3', '4', '5'])
    expect((await log.read('r', { after: '2', limit: 2 })).map((e) => e.event)).toEqual([{ n: 3 }, { n: 4 }])
    expect((await log.read('r', { after: '4' })).map((e) => e.cursor)).toEqual(['5'])
    const db = new Database(path)
    expect(db.prepare('SELECT seq FROM run_events WHERE run_id = ? ORDER BY seq').pluck().all('r')).toEqual([3, 5])
    // Stored deflated; a row of JSON text (one event or an array) reads as well.
    const body = db.prepare('SELECT body FROM run_events WHERE run_id = ? AND seq = 3').pluck().get('r') as Buffer
    expect(JSON.parse(inflateRawSync(body).toString('utf8'))).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }])
    db.prepare('INSERT INTO run_events (run_id, seq, body) VALUES (?, ?, ?), (?, ?, ?)').run('t', 1, '{"n":1}', 't', 3, '[{"n":2},{"n":3}]')
    db.close()
    expect((await log.read('t', { after: '1' })).map((e) => [e.cursor, e.event])).toEqual([['2', { n: 2 }], ['3', { n: 3 }]])
    expect(await log.deleteRun('r')).toBe(5)
    expect(await log.read('r')).toEqual([])
    await store.close()
  })
})

describe('following a run that finished during a wait', () => {
  it('reads the log once more before ending, so events appended during a late last check are not lost', async () => {
    const store = new MemoryStore()
    const runner = new Runner({ store })
    await runner.run(agent(), { input: 'Analyze Q4', runId: 'late' })
    const log = store.events!
    // The follower's page read comes just before the run's last appends, and its wait's last check
    // (made before them too) ends past the deadline: the wait says nothing came.
    let reads = 0
    const late: RunEventLog = {
      append: (runId, events, texts) => log.append(runId, events, texts),
      read: async (runId, options) => (reads++ === 0 ? [] : log.read(runId, options)),
      waitForMore: async () => false,
      deleteRun: (runId) => log.deleteRun(runId),
      replace: (runId, events) => log.replace(runId, events),
      close: () => log.close(),
    }
    const events = await collect(followRun({ events: late, getRun: (runId: string) => store.getRun(runId) } as unknown as Parameters<typeof followRun>[0], 'late'))
    expect(events.map((entry) => entry.event)).toEqual((await log.read('late')).map((entry) => entry.event))
    expect(events.at(-1)!.event).toMatchObject({ type: 'run_finished', state: 'completed' })
    await store.close()
  })
})
