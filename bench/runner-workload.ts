/** The runner benchmark's workload: one agent loop of n tool cycles, run bare or under a Runner. */
import Database from 'better-sqlite3'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Agent, Runner, tool, type EngineStoreOptions, type Model, type ModelRequest, type ModelStreamEvent } from '../src/index.js'
import { SqliteStore, type SqliteDatabase } from '../src/sqlite.js'
import { microsSince } from './stats.js'

/** Characters of the assistant text of each turn and of each tool result: ~2 KB a cycle. */
export const TURN_CHARS = 1000

export type Mode = 'none' | 'async' | 'sync'

/** One measured run of one mode. */
export interface LoopTrial {
  mode: Mode
  cycles: number
  /** Wall time of `agent.invoke` or `runner.run`, flush included. */
  micros: number
  /** Records the runner wrote: `runner.history(runId).length` (0 with no persistence). */
  checkpoints: number
  /** `RunResult.commits`: durable commits of the checkpoint writer. */
  commits: number
  /** SQLite write transactions and the time spent inside them (writing and syncing), on the loop's thread. */
  sqliteTransactions: number
  sqliteMicros: number
  /** Bytes of the final conversation as JSON, and of the list items the store holds for the run. */
  conversationBytes: number
  listItemBytes: number
}

/**
 * Run `cycles` tool cycles: with `mode: 'none'` the agent's own `invoke` with checkpointing off;
 * otherwise a Runner of that durability over a fresh SqliteStore in a temporary directory.
 */
export async function runLoop(mode: Mode, cycles: number, options: { history?: boolean; store?: EngineStoreOptions } = {}): Promise<LoopTrial> {
  const agent = benchAgent(cycles)
  if (mode === 'none') {
    const start = process.hrtime.bigint()
    const result = await agent.invoke('Work through the cycles.')
    const micros = microsSince(start)
    assertFinished(result.metrics.modelCalls, cycles, mode)
    const conversationBytes = Buffer.byteLength(JSON.stringify(agent.messages))
    return { mode, cycles, micros, checkpoints: 0, commits: 0, sqliteTransactions: 0, sqliteMicros: 0, conversationBytes, listItemBytes: 0 }
  }
  const durability = mode
  const location = await mkdtemp(join(tmpdir(), 'cairn-bench-runner-'))
  const path = join(location, 'runner.db')
  const clock = { transactions: 0, micros: 0 }
  const extra = options.store ?? {}
  const store = new SqliteStore({ database: timedDatabase(new Database(path), clock), ...extra })
  try {
    // Steady state: the file's tables are warm before the clock starts.
    await store.save({ runId: 'warm-up', kind: 'bench', phase: 'warm-up', payload: {} })
    const runner = new Runner({ store, durability })
    const before = { ...clock }
    const start = process.hrtime.bigint()
    const run = await runner.run(agent, { input: 'Work through the cycles.', runId: 'bench-run' })
    const micros = microsSince(start)
    const after = { ...clock }
    const sqlite = { transactions: after.transactions - before.transactions, micros: after.micros - before.micros }
    if (run.state !== 'completed') throw new Error(`the ${mode} run ended ${run.state}: ${run.error?.message ?? ''}`)
    assertFinished(run.llmCalls, cycles, mode)
    const checkpoints = options.history === false ? 0 : (await runner.history('bench-run')).length
    const reader = new Database(path, { readonly: true })
    const listItemBytes = reader.prepare('SELECT coalesce(sum(length(item)), 0) FROM list_items').pluck().get() as number
    reader.close()
    return {
      mode,
      cycles,
      micros,
      checkpoints,
      commits: run.commits,
      sqliteTransactions: sqlite.transactions,
      sqliteMicros: sqlite.micros,
      conversationBytes: Buffer.byteLength(JSON.stringify(agent.messages)),
      listItemBytes,
    }
  } finally {
    await store.close()
    if (process.env.CAIRN_BENCH_KEEP) console.error(`kept ${location}`)
    else await rm(location, { recursive: true, force: true })
  }
}

/** An agent whose model asks for one tool per turn for `cycles` turns, then answers. */
function benchAgent(cycles: number): Agent {
  const fetchRecord = tool({
    name: 'fetch_record',
    description: 'Fetch a record by its number.',
    inputSchema: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] },
    idempotent: true,
    callback: (input) => filler(`record ${(input as { n: number }).n}:`),
  })
  return new Agent({ model: new CycleModel(cycles), tools: [fetchRecord], systemPrompt: 'Fetch every record, then answer.' })
}

/**
 * A scripted model without bookkeeping (ScriptedModel keeps a copy of every request, which would
 * add a growing cost to every mode alike): the turn follows from the answers already given.
 */
class CycleModel implements Model {
  readonly modelId = 'bench-cycle-model'
  readonly #cycles: number

  constructor(cycles: number) {
    this.#cycles = cycles
  }

  async *stream(request: ModelRequest): AsyncGenerator<ModelStreamEvent> {
    const cycle = request.messages.filter((message) => message.role === 'assistant').length
    yield { type: 'messageStart' }
    if (cycle >= this.#cycles) {
      yield { type: 'textDelta', text: 'All records fetched.' }
      yield { type: 'messageStop', stopReason: 'end_turn' }
    } else {
      yield { type: 'textDelta', text: filler(`turn ${cycle}: I need the next record.`) }
      yield { type: 'toolUseStart', toolUseId: `call-${cycle}`, name: 'fetch_record' }
      yield { type: 'toolUseInputDelta', toolUseId: `call-${cycle}`, delta: JSON.stringify({ n: cycle }) }
      yield { type: 'messageStop', stopReason: 'tool_use' }
    }
    yield { type: 'usage', usage: { inputTokens: 10, outputTokens: 10, totalTokens: 20 } }
  }
}

function filler(head: string): string {
  return `${head} ${'lorem ipsum dolor sit amet '.repeat(Math.ceil(TURN_CHARS / 27))}`.slice(0, TURN_CHARS)
}

/** A loop of n tool cycles makes n + 1 model calls: one per cycle and the answer. */
function assertFinished(modelCalls: number, cycles: number, mode: Mode): void {
  if (modelCalls !== cycles + 1) throw new Error(`the ${mode} loop made ${modelCalls} model calls, expected ${cycles + 1}`)
}

/**
 * The database as SqliteStore sees it, with every `BEGIN IMMEDIATE` transaction (every write)
 * counted and timed: the time spent in SQLite writing and syncing, apart from the rest.
 */
function timedDatabase(db: Database.Database, clock: { transactions: number; micros: number }): SqliteDatabase {
  return {
    prepare: (source) => db.prepare(source),
    exec: (source) => db.exec(source),
    pragma: (source, options) => db.pragma(source, options),
    close: () => db.close(),
    transaction: <A extends unknown[], R>(fn: (...args: A) => R) => {
      const transaction = db.transaction(fn)
      return {
        deferred: (...args: A) => transaction.deferred(...args),
        immediate: (...args: A) => {
          const start = process.hrtime.bigint()
          try {
            return transaction.immediate(...args)
          } finally {
            clock.transactions++
            clock.micros += microsSince(start)
          }
        },
      }
    },
  }
}
