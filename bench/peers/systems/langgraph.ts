/**
 * LangGraph.js rows: a StateGraph with a messages channel, a model node and a prebuilt ToolNode,
 * compiled with MemorySaver, SqliteSaver or PostgresSaver at LangGraph's default durability
 * (`async`); the `-delta` rows swap the messages field for `MessagesDeltaValue` (a DeltaChannel:
 * only each step's new messages are written, plus a full snapshot every `snapshotFrequency`
 * updates); the `-cairn-` rows compile it with Cairn's `CairnSaver` over SqliteStore or
 * PostgresStore (built against Cairn's own copy of LangGraph's checkpoint package, whose types
 * differ from this one's only by identity). Each is measured against the same graph compiled
 * without a checkpointer.
 */
import { createRequire } from 'node:module'
import { join } from 'node:path'
import type BetterSqlite3 from 'better-sqlite3'
import { AIMessage, HumanMessage, type BaseMessage } from '@langchain/core/messages'
import { tool } from '@langchain/core/tools'
import { END, MemorySaver, MessagesDeltaValue, MessagesValue, START, StateGraph, StateSchema, type BaseCheckpointSaver } from '@langchain/langgraph'
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite'
import { ToolNode } from '@langchain/langgraph/prebuilt'
import { z } from 'zod'
import { CairnSaver } from '../../../src/langgraph.js'
import { PostgresStore } from '../../../src/postgres.js'
import { SqliteStore } from '../../../src/sqlite.js'
import { sqliteBytes } from '../../disk-usage.js'
import { countRows, pgUrl, PG_DATABASES, schemaBytes } from '../pg-admin.js'
import { cpuMsSince, cycleEnds, HISTORY_BUDGET_MS, RUN_ID, timedMs, WARMUP_CYCLES, type ChildRequest, type ResumeFigures, type RunFigures, type SystemDriver } from '../protocol.js'
import { sqliteBreakdown } from '../sqlite-breakdown.js'
import { assistantText, cycleOf, cycleOfInput, CycleClock, FINAL_TEXT, PROMPT, TOOL_DESCRIPTION, TOOL_NAME, toolInput, toolResultText } from '../workload.js'

/** The connection of each CairnSaver's SqliteStore. */
const sqliteDatabases = new WeakMap<SqliteStore, BetterSqlite3.Database>()

/** better-sqlite3 as SqliteStore loads it (Cairn's own copy, not the peers'): the CairnSaver rows run on the SQLite they always do. */
const Database = createRequire(new URL('../../../package.json', import.meta.url))('better-sqlite3') as typeof BetterSqlite3

type Backend = 'memory' | 'sqlite' | 'postgres' | 'cairn-sqlite' | 'cairn-postgres'

/** The driver of a LangGraph system id: `langgraph-<backend>[-delta]`, `langgraph-baseline` or `langgraph-delta-baseline`. */
export function langgraphDriver(id: string): SystemDriver {
  if (id === 'langgraph-baseline') return { run: (request) => runBaseline(request, false) }
  if (id === 'langgraph-delta-baseline') return { run: (request) => runBaseline(request, true) }
  const match = /^langgraph-(memory|sqlite|postgres|cairn-sqlite|cairn-postgres)(-delta)?$/.exec(id)
  if (!match) throw new Error(`unknown LangGraph system ${id}`)
  const backend = match[1] as Backend
  const delta = match[2] !== undefined
  return {
    run: (request) => runDurable(request, backend, delta),
    resume: (request) => resumeFresh(request, backend, delta),
  }
}

async function runDurable(request: ChildRequest, backend: Backend, delta: boolean): Promise<{ run: RunFigures; resume?: ResumeFigures }> {
  const warm = await openSaver(backend, { ...request, location: join(request.location, 'warmup'), schema: `${request.schema}_warmup` }, true)
  await buildGraph(WARMUP_CYCLES, new CycleClock(), delta, warm).invoke(input(), config(WARMUP_CYCLES, 'warmup'))
  await closeSaver(warm)

  const saver = await openSaver(backend, request, true)
  await saver.getTuple({ configurable: { thread_id: 'not-a-thread' } }) // open and set up outside the timed run
  const clock = new CycleClock()
  const graph = buildGraph(request.n, clock, delta, saver)
  const cpu = process.cpuUsage()
  const { ms, value: state } = await timedMs(() => graph.invoke(input(), config(request.n, RUN_ID)), 'run')
  const cpuMs = cpuMsSince(cpu)
  assertMessages(state.messages, request.n)
  const bytesOpen = await bytesOf(backend, request)
  const storage = backend === 'sqlite' || backend === 'cairn-sqlite' ? sqliteBreakdown(sqlitePath(backend, request)) : undefined
  const checkpoints = await countCheckpoints(saver, request.schema)
  const synchronous = synchronousOf(saver)
  const resume = backend === 'memory' ? await loadAndList(graph, request.n, true) : undefined
  await closeSaver(saver)
  const bytesClosed = await bytesOf(backend, request)
  const run: RunFigures = { wallMs: ms, ...cycleEnds(clock.cycleMs()), bytesOpen, bytesClosed, checkpoints, cpuMs, ...(storage ? { storage } : {}), ...(synchronous ? { synchronous } : {}) }
  return { run, ...(resume ? { resume } : {}) }
}

/** The same graph (with the delta messages field, for the delta rows) compiled without a checkpointer. */
async function runBaseline(request: ChildRequest, delta: boolean): Promise<{ run: RunFigures }> {
  await buildGraph(WARMUP_CYCLES, new CycleClock(), delta, undefined).invoke(input(), config(WARMUP_CYCLES, 'warmup'))
  const clock = new CycleClock()
  const graph = buildGraph(request.n, clock, delta, undefined)
  const cpu = process.cpuUsage()
  const { ms, value: state } = await timedMs(() => graph.invoke(input(), config(request.n, RUN_ID)), 'run')
  const cpuMs = cpuMsSince(cpu)
  assertMessages(state.messages, request.n)
  return { run: { wallMs: ms, ...cycleEnds(clock.cycleMs()), bytesOpen: null, bytesClosed: null, checkpoints: null, cpuMs } }
}

/** In a fresh process: open the saver, `getState` (the latest state), then `getStateHistory`. */
async function resumeFresh(request: ChildRequest, backend: Backend, delta: boolean): Promise<ResumeFigures> {
  const load = await timedMs(async () => {
    const saver = await openSaver(backend, request, false)
    const graph = buildGraph(request.n, new CycleClock(), delta, saver)
    const snapshot = await graph.getState({ configurable: { thread_id: RUN_ID } })
    return { saver, graph, messages: messagesOf(snapshot.values, request.n) }
  }, 'load')
  const listed = await listHistory(load.value.graph)
  // An abandoned listing may still hold a query: leave the saver to the process's exit then.
  if (listed.historyComplete) await closeSaver(load.value.saver)
  return { ...listed, loadMs: load.ms, messages: load.value.messages, inProcess: false }
}

type Graph = ReturnType<typeof buildGraph>

/** In the writer's process (MemorySaver): `getState`, then `getStateHistory`. */
async function loadAndList(graph: Graph, n: number, inProcess: boolean): Promise<ResumeFigures> {
  const load = await timedMs(() => graph.getState({ configurable: { thread_id: RUN_ID } }), 'load')
  return { ...(await listHistory(graph)), loadMs: load.ms, messages: messagesOf(load.value.values, n), inProcess }
}

/**
 * Iterate `getStateHistory` to the end, or until {@link HISTORY_BUDGET_MS} has passed (a saver
 * may fetch every state before yielding the first, so each step races a timer too).
 */
async function listHistory(graph: Graph) {
  const timeBox = new Promise<'late'>((resolve) => setTimeout(resolve, HISTORY_BUDGET_MS, 'late').unref())
  const deadline = performance.now() + HISTORY_BUDGET_MS
  const history = await timedMs(async () => {
    const states = graph.getStateHistory({ configurable: { thread_id: RUN_ID } })[Symbol.asyncIterator]()
    let entries = 0
    for (;;) {
      const next = states.next()
      next.catch(() => {}) // abandoned at the deadline
      const step = await Promise.race([next, timeBox])
      if (step === 'late') return { entries, complete: false }
      if (step.done) return { entries, complete: true }
      if (step.value.values === undefined) throw new Error('a state snapshot without values')
      entries++
      // A saver that answers without yielding to the event loop never lets the timer fire.
      if (performance.now() > deadline) return { entries, complete: false }
    }
  }, 'history')
  return { historyMs: history.ms, historyEntries: history.value.entries, historyComplete: history.value.complete, headersMs: null }
}

function messagesOf(values: unknown, n: number): number {
  const messages = (values as { messages: BaseMessage[] }).messages
  assertMessages(messages, n)
  return messages.length
}

export function buildGraph(n: number, clock: CycleClock, delta: boolean, checkpointer: BaseCheckpointSaver | undefined) {
  const lookup = tool(
    async ({ query }: { query: string }) => {
      clock.mark()
      return toolResultText(cycleOfInput({ query }))
    },
    { name: TOOL_NAME, description: TOOL_DESCRIPTION, schema: z.object({ query: z.string() }) },
  )
  const State = new StateSchema({ messages: delta ? MessagesDeltaValue : MessagesValue })
  return new StateGraph(State)
    .addNode('model', (state) => ({ messages: [modelReply(n, cycleOf(state.messages.length))] }))
    .addNode('tools', new ToolNode([lookup]))
    .addEdge(START, 'model')
    .addConditionalEdges('model', (state) => (hasToolCalls(state.messages[state.messages.length - 1]) ? 'tools' : END), ['tools', END])
    .addEdge('tools', 'model')
    .compile(checkpointer ? { checkpointer } : {})
}

/** The model step: a ~1 KB reply asking for one lookup per cycle, then a closing answer. */
function modelReply(n: number, cycle: number): AIMessage {
  if (cycle >= n) return new AIMessage(FINAL_TEXT)
  return new AIMessage({ content: assistantText(cycle), tool_calls: [{ id: `call-${cycle}`, name: TOOL_NAME, args: toolInput(cycle), type: 'tool_call' }] })
}

function hasToolCalls(message: BaseMessage | undefined): boolean {
  return message instanceof AIMessage && (message.tool_calls?.length ?? 0) > 0
}

export function input() {
  return { messages: [new HumanMessage(PROMPT)] }
}

/** Two supersteps a cycle, plus the closing model call: raise the default limit of 25. */
export function config(n: number, threadId: string) {
  return { configurable: { thread_id: threadId }, recursionLimit: 2 * n + 10 }
}

function assertMessages(messages: readonly BaseMessage[], n: number): void {
  if (messages.length !== 2 * n + 2) throw new Error(`LangGraph state holds ${messages.length} messages, expected ${2 * n + 2}`)
}

async function openSaver(backend: Backend, request: Pick<ChildRequest, 'location' | 'schema'>, setUp: boolean): Promise<BaseCheckpointSaver> {
  switch (backend) {
    case 'memory':
      return new MemorySaver()
    case 'sqlite': {
      const { mkdirSync } = await import('node:fs')
      mkdirSync(request.location, { recursive: true })
      return SqliteSaver.fromConnString(join(request.location, 'langgraph.db'))
    }
    case 'postgres': {
      // Loaded here: the SQLite rows run without LangGraph's Postgres package installed.
      const { PostgresSaver } = await import('@langchain/langgraph-checkpoint-postgres')
      const saver = PostgresSaver.fromConnString(pgUrl(PG_DATABASES.langgraph), { schema: request.schema })
      if (setUp) await saver.setup()
      return saver
    }
    case 'cairn-sqlite': {
      const { mkdirSync } = await import('node:fs')
      mkdirSync(request.location, { recursive: true })
      // The store syncs as SqliteSaver does (it sets WAL and leaves synchronous at the driver's default).
      const synchronous = await sqliteSaverSynchronous(request.location)
      // The store is given its connection, so the run can read the level it committed at.
      const database = new Database(sqlitePath(backend, request))
      const store = new SqliteStore({ database, synchronous })
      sqliteDatabases.set(store, database)
      return new CairnSaver({ store }) as unknown as BaseCheckpointSaver
    }
    case 'cairn-postgres':
      return new CairnSaver({ store: new PostgresStore({ connectionString: pgUrl(PG_DATABASES.langgraph) }, { schema: request.schema }) }) as unknown as BaseCheckpointSaver
  }
}

/**
 * The `synchronous` level SqliteSaver's connections run at, read from one it opens once it has set
 * itself up (WAL; better-sqlite3's WAL default is NORMAL): `full` or `normal`.
 */
export async function sqliteSaverSynchronous(location: string): Promise<'full' | 'normal'> {
  const saver = SqliteSaver.fromConnString(join(location, 'synchronous-probe.db'))
  try {
    await saver.getTuple({ configurable: { thread_id: 'probe' } })
    const level = saver.db.pragma('synchronous', { simple: true }) as number
    if (level !== 1 && level !== 2) throw new Error(`SqliteSaver runs at synchronous = ${level}, which SqliteStore does not offer`)
    return level === 2 ? 'full' : 'normal'
  } finally {
    saver.db.close()
  }
}

function sqlitePath(backend: Backend, request: Pick<ChildRequest, 'location'>): string {
  return join(request.location, backend === 'cairn-sqlite' ? 'cairn-saver.db' : 'langgraph.db')
}

/** The `synchronous` level the saver's SQLite connection runs at, read from the connection itself: SQLite savers only. */
function synchronousOf(saver: BaseCheckpointSaver): string | undefined {
  const database = saver instanceof SqliteSaver ? saver.db : saver instanceof CairnSaver && saver.store instanceof SqliteStore ? sqliteDatabases.get(saver.store) : undefined
  if (!database) return undefined
  const level = database.pragma('synchronous', { simple: true }) as number
  return ['OFF', 'NORMAL', 'FULL', 'EXTRA'][level] ?? String(level)
}

/** LangGraph's PostgresSaver, recognised without loading its package. */
function isPostgresSaver(saver: BaseCheckpointSaver): saver is BaseCheckpointSaver & { end(): Promise<void> } {
  return saver.constructor.name === 'PostgresSaver'
}

async function closeSaver(saver: BaseCheckpointSaver): Promise<void> {
  if (saver instanceof SqliteSaver) saver.db.close()
  else if (isPostgresSaver(saver)) await saver.end()
  else if (saver instanceof CairnSaver) await saver.store.close()
}

async function countCheckpoints(saver: BaseCheckpointSaver, schema: string): Promise<number | null> {
  if (saver instanceof SqliteSaver) return (saver.db.prepare('SELECT count(*) AS n FROM checkpoints WHERE thread_id = ?').get(RUN_ID) as { n: number }).n
  if (saver instanceof MemorySaver) return Object.keys(saver.storage[RUN_ID]?.[''] ?? {}).length
  if (isPostgresSaver(saver)) return countRows('langgraph', schema, 'checkpoints', RUN_ID)
  if (saver instanceof CairnSaver) return (await saver.store.listCheckpoints({})).length
  return null
}

async function bytesOf(backend: Backend, request: ChildRequest): Promise<number | null> {
  switch (backend) {
    case 'memory':
      return null
    case 'sqlite':
    case 'cairn-sqlite':
      return sqliteBytes(sqlitePath(backend, request))
    case 'postgres':
    case 'cairn-postgres':
      return schemaBytes('langgraph', request.schema)
  }
}
