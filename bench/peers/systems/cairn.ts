/**
 * Cairn's rows: the real `Runner` driving the real `Agent`, on each store and durability, and
 * the same agent with no persistence (`agent.invoke`, checkpointing off) as its baseline.
 */
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { z } from 'zod'
import { Agent, FileStore, MemoryStore, Runner, tool, type CheckpointStore, type Model, type ModelRequest, type ModelStreamEvent } from '../../../src/index.js'
import { PostgresStore } from '../../../src/postgres.js'
import { SqliteStore } from '../../../src/sqlite.js'
import { callsUnderWay, isSnapshot } from '../../../src/runner/resume-state.js'
import { directoryBytes, sqliteBytes } from '../../disk-usage.js'
import { pgUrl, PG_DATABASES, schemaBytes } from '../pg-admin.js'
import { cpuMsSince, cycleEnds, HISTORY_BUDGET_MS, RUN_ID, timedMs, WARMUP_CYCLES, type ChildRequest, type ResumeFigures, type RunFigures, type SystemDriver } from '../protocol.js'
import { sqliteBreakdown } from '../sqlite-breakdown.js'
import { assistantText, cycleOf, cycleOfInput, CycleClock, FINAL_TEXT, PROMPT, TOOL_DESCRIPTION, TOOL_NAME, toolInput, toolResultText } from '../workload.js'

/** A Cairn store backend as the bench opens it. */
type Backend = 'memory' | 'file' | 'sqlite' | 'postgres'

/** The driver of a Cairn system id: `cairn-<backend>-<async|sync>` or `cairn-baseline`. */
export function cairnDriver(id: string): SystemDriver {
  if (id === 'cairn-baseline') return { run: runBaseline }
  const match = /^cairn-(memory|file|sqlite|postgres)-(async|sync)$/.exec(id)
  if (!match) throw new Error(`unknown Cairn system ${id}`)
  const backend = match[1] as Backend
  const durability = match[2] as 'async' | 'sync'
  return {
    run: (request) => runDurable(request, backend, durability),
    resume: (request) => resumeFresh(request, backend),
  }
}

async function runDurable(request: ChildRequest, backend: Backend, durability: 'async' | 'sync'): Promise<{ run: RunFigures; resume?: ResumeFigures }> {
  const warm = openStore(backend, { ...request, location: join(request.location, 'warmup'), schema: `${request.schema}_warmup` })
  await new Runner({ store: warm, durability }).run(buildAgent(WARMUP_CYCLES, new CycleClock()), { input: PROMPT, runId: 'warmup' })
  await warm.close()

  const store = openStore(backend, request)
  await store.getRun('not-a-run') // open and migrate outside the timed run
  const storeCalls: NonNullable<RunFigures['storeCalls']> = {}
  const clock = new CycleClock()
  const runner = new Runner({ store: timeCalls(store, storeCalls), durability })
  const agent = buildAgent(request.n, clock)
  const cpu = process.cpuUsage()
  const { ms, value: result } = await timedMs(() => runner.run(agent, { input: PROMPT, runId: RUN_ID }), 'run')
  const cpuMs = cpuMsSince(cpu)
  if (result.state !== 'completed' || result.toolCalls !== request.n) {
    throw new Error(`Cairn run ended ${result.state} after ${result.toolCalls} tool calls, expected completed after ${request.n}`)
  }
  const bytesOpen = await bytesOf(backend, request)
  const storage = backend === 'sqlite' ? sqliteBreakdown(join(request.location, 'cairn.db')) : undefined
  const checkpoints = (await listHeaders(store)).length
  const resume = backend === 'memory' ? await loadAndList(store, request.fullHistory !== false) : undefined
  await store.close()
  const bytesClosed = await bytesOf(backend, request)
  const run: RunFigures = { wallMs: ms, ...cycleEnds(clock.cycleMs()), bytesOpen, bytesClosed, checkpoints, cpuMs, storeCalls, ...(storage ? { storage } : {}) }
  return { run, ...(resume ? { resume } : {}) }
}

async function runBaseline(request: ChildRequest): Promise<{ run: RunFigures }> {
  await buildAgent(WARMUP_CYCLES, new CycleClock()).invoke(PROMPT)
  const clock = new CycleClock()
  const agent = buildAgent(request.n, clock)
  const cpu = process.cpuUsage()
  const { ms, value: result } = await timedMs(() => agent.invoke(PROMPT), 'run')
  const cpuMs = cpuMsSince(cpu)
  if (result.stopReason !== 'end_turn' || agent.messages.length !== 2 * request.n + 2) {
    throw new Error(`baseline ended ${result.stopReason} with ${agent.messages.length} messages, expected ${2 * request.n + 2}`)
  }
  return { run: { wallMs: ms, ...cycleEnds(clock.cycleMs()), bytesOpen: null, bytesClosed: null, checkpoints: null, cpuMs } }
}

/** In a fresh process: open the store, load the run's latest state, then list its history. */
async function resumeFresh(request: ChildRequest, backend: Backend): Promise<ResumeFigures> {
  // The driver's module is loaded before the timer, as the peers' imports load theirs: PostgresStore
  // requires `pg` on first use (from Cairn's own node_modules, not the peers' copy the bench loads).
  if (backend === 'postgres') createRequire(new URL('../../../src/core/peers.ts', import.meta.url))('pg')
  const load = await timedMs(async () => {
    const opened = openStore(backend, request)
    return { store: opened, messages: await loadLatestState(opened, request.n) }
  }, 'load')
  const listed = await list(load.value.store, request.fullHistory !== false)
  // An abandoned listing may still be reading: leave the store to the process's exit then.
  if (listed.historyComplete) await load.value.store.close()
  const { count, bytes } = load.value.messages
  return { ...listed, loadMs: load.ms, messages: count, messageBytes: bytes(), inProcess: false }
}

/** In the writer's process (an in-memory store): load the latest state, then list the history. */
async function loadAndList(store: CheckpointStore, fullHistory: boolean): Promise<ResumeFigures> {
  const load = await timedMs(() => loadLatestState(store, null), 'load')
  return { ...(await list(store, fullHistory)), loadMs: load.ms, messages: load.value.count, messageBytes: load.value.bytes(), inProcess: true }
}

/**
 * The run's whole history: headers only (`listCheckpoints`, paged), then full records
 * (`runner.history`), given up after {@link HISTORY_BUDGET_MS} like LangGraph's listing.
 */
async function list(store: CheckpointStore, fullHistory = true) {
  const headers = await timedMs(() => listHeaders(store))
  if (!fullHistory) return { historyMs: null, historyEntries: null, historyComplete: false, historySkipped: true, headersMs: headers.ms }
  const timeBox = new Promise<undefined>((resolve) => setTimeout(resolve, HISTORY_BUDGET_MS, undefined).unref())
  const full = new Runner({ store }).history(RUN_ID)
  full.catch(() => {}) // when the time box wins, the listing is abandoned with the process
  const history = await timedMs(() => Promise.race([full, timeBox]), 'history')
  return { historyMs: history.ms, historyEntries: history.value?.length ?? null, historyComplete: history.value !== undefined, headersMs: headers.ms }
}

/**
 * The read path of `runner.resume` (resume-state.ts): one `openRun` call that returns the run,
 * its latest checkpoint and the newest runtime snapshot it rests on (here the terminal checkpoint
 * rests on the last tool step's), and the effects of the calls under way (none: the run is
 * finished). When the snapshot is older than `openRun` looks, the newest checkpoint that holds one
 * is found by listing, as a resume does. Returns how
 * many messages the loaded state holds, and their size as JSON (measured after the caller's timer
 * stops: the list is only kept here).
 */
export async function loadLatestState(store: CheckpointStore, n: number | null): Promise<{ count: number; bytes: () => number }> {
  type State = { runtime?: { messages?: unknown[] } }
  const opened = await store.openRun<State>(RUN_ID, { base: isSnapshot, effects: callsUnderWay })
  const latest = opened.latest
  if (!latest) throw new Error(`run ${RUN_ID} has no checkpoint`)
  let record = opened.base ?? latest
  if (!isSnapshot(record)) {
    const page = await store.listCheckpoints({ runId: RUN_ID, limit: 16 })
    const info = page.find(isSnapshot)
    if (!info) throw new Error(`run ${RUN_ID} has no runtime snapshot among its last 16 checkpoints`)
    record = await store.load(info.id)
  }
  const count = record.payload.runtime?.messages?.length ?? 0
  if (n !== null && count !== 2 * n + 2) throw new Error(`loaded ${count} messages, expected ${2 * n + 2}`)
  const messages = record.payload.runtime?.messages ?? []
  return { count, bytes: () => Buffer.byteLength(JSON.stringify(messages)) }
}

async function listHeaders(store: CheckpointStore) {
  const all = []
  let before: string | undefined
  for (;;) {
    const page = await store.listCheckpoints({ runId: RUN_ID, limit: 500, ...(before === undefined ? {} : { before }) })
    all.push(...page)
    if (page.length < 500) return all
    before = page[page.length - 1]?.id
  }
}

/** The workload's agent for `n` cycles; `clock`, when given, is marked at every tool call. */
export function buildAgent(n: number, clock?: CycleClock): Agent {
  const lookup = tool({
    name: TOOL_NAME,
    description: TOOL_DESCRIPTION,
    inputSchema: z.object({ query: z.string() }),
    idempotent: true,
    callback: ({ query }) => {
      clock?.mark()
      return toolResultText(cycleOfInput({ query }))
    },
  })
  return new Agent({ model: new BenchModel(n), tools: [lookup] })
}

/** The model step: a ~1 KB reply asking for one lookup per cycle, then a closing answer. */
class BenchModel implements Model {
  readonly modelId = 'bench-model'
  readonly #cycles: number

  constructor(cycles: number) {
    this.#cycles = cycles
  }

  async *stream(request: ModelRequest): AsyncGenerator<ModelStreamEvent> {
    const cycle = cycleOf(request.messages.length)
    yield { type: 'messageStart' }
    if (cycle < this.#cycles) {
      const id = `call-${cycle}`
      yield { type: 'textDelta', text: assistantText(cycle) }
      yield { type: 'toolUseStart', toolUseId: id, name: TOOL_NAME }
      yield { type: 'toolUseInputDelta', toolUseId: id, delta: JSON.stringify(toolInput(cycle)) }
      yield { type: 'messageStop', stopReason: 'tool_use' }
    } else {
      yield { type: 'textDelta', text: FINAL_TEXT }
      yield { type: 'messageStop', stopReason: 'end_turn' }
    }
    yield { type: 'usage', usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 } }
  }
}

/** The store, with the time spent in each of its methods added up into `calls`. */
function timeCalls(store: CheckpointStore, calls: NonNullable<RunFigures['storeCalls']>): CheckpointStore {
  return new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target)
      if (typeof value !== 'function' || typeof property !== 'string') return value
      return (...args: unknown[]) => {
        const start = process.hrtime.bigint()
        const add = () => {
          const entry = (calls[property] ??= { calls: 0, ms: 0 })
          entry.calls++
          entry.ms += Number(process.hrtime.bigint() - start) / 1e6
        }
        const result: unknown = (value as (...a: unknown[]) => unknown).apply(target, args)
        if (result instanceof Promise) return result.finally(add)
        add()
        return result
      }
    },
  })
}

function openStore(backend: Backend, request: Pick<ChildRequest, 'location' | 'schema'>): CheckpointStore {
  switch (backend) {
    case 'memory':
      return new MemoryStore()
    case 'file':
      return new FileStore({ directory: join(request.location, 'store') })
    case 'sqlite':
      return new SqliteStore({ path: join(request.location, 'cairn.db') })
    case 'postgres':
      return new PostgresStore({ connectionString: pgUrl(PG_DATABASES.cairn), schema: request.schema })
  }
}

async function bytesOf(backend: Backend, request: ChildRequest): Promise<number | null> {
  switch (backend) {
    case 'memory':
      return null
    case 'file':
      return directoryBytes(join(request.location, 'store'))
    case 'sqlite':
      return sqliteBytes(join(request.location, 'cairn.db'))
    case 'postgres':
      return schemaBytes('cairn', request.schema)
  }
}
