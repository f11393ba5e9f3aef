/**
 * A focused comparison of `CairnSaver` with LangGraph's `SqliteSaver` on the peers benchmark's
 * workload (an agent of n cycles, each a ~1 KB model message asking for a tool call and a ~1 KB
 * tool result; 2n + 1 supersteps): bytes stored, time added per superstep over the same graph
 * without a checkpointer, `getState` on a freshly opened saver, and the full `getStateHistory`.
 *
 *   npx tsx bench/langgraph-saver-bench.ts [n ...]      (default: 100 500)
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { AIMessage, HumanMessage, type BaseMessage } from '@langchain/core/messages'
import { tool } from '@langchain/core/tools'
import { END, MessagesAnnotation, START, StateGraph, type BaseCheckpointSaver } from '@langchain/langgraph'
import { ToolNode } from '@langchain/langgraph/prebuilt'
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite'
import pg from 'pg'
import { z } from 'zod'
import { CairnSaver } from '../src/langgraph.js'
import { PostgresStore } from '../src/postgres.js'
import { SqliteStore } from '../src/sqlite.js'
import { sqliteBytes } from './disk-usage.js'
import { assistantText, cycleOf, cycleOfInput, FINAL_TEXT, PROMPT, TOOL_DESCRIPTION, TOOL_NAME, toolInput, toolResultText } from './peers/workload.js'

const PG_URL = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/test'
const THREAD = 'bench'

interface Opened {
  saver: BaseCheckpointSaver
  close(): Promise<void>
}

interface System {
  name: string
  open(): Promise<Opened>
  bytes(): Promise<number>
  drop(): Promise<void>
}

function sqliteSaver(dir: string): System {
  const path = join(dir, 'langgraph.db')
  return {
    name: 'SqliteSaver',
    open: async () => {
      const saver = SqliteSaver.fromConnString(path)
      return { saver, close: async () => void saver.db.close() }
    },
    bytes: () => sqliteBytes(path),
    drop: async () => {},
  }
}

function cairnSqlite(dir: string, synchronous: 'full' | 'normal'): System {
  const path = join(dir, `cairn-${synchronous}.db`)
  return {
    name: `CairnSaver (SqliteStore ${synchronous})`,
    open: async () => {
      const store = new SqliteStore({ path, synchronous })
      return { saver: new CairnSaver({ store }), close: () => store.close() }
    },
    bytes: () => sqliteBytes(path),
    drop: async () => {},
  }
}

function cairnPostgres(n: number): System {
  const schema = `cairn_saver_bench_${n}_${process.pid}`
  const admin = () => new pg.Client({ connectionString: PG_URL })
  const sql = async (text: string) => {
    const client = admin()
    await client.connect()
    try {
      return (await client.query(text)).rows as Record<string, unknown>[]
    } finally {
      await client.end()
    }
  }
  return {
    name: 'CairnSaver (PostgresStore)',
    open: async () => {
      const store = new PostgresStore({ connectionString: PG_URL }, { schema })
      return { saver: new CairnSaver({ store }), close: () => store.close() }
    },
    bytes: async () => {
      const rows = await sql(`SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) AS bytes FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = '${schema}' AND c.relkind = 'r'`)
      return Number(rows[0]?.bytes)
    },
    drop: async () => void (await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)),
  }
}

function buildGraph(n: number, checkpointer: BaseCheckpointSaver | undefined) {
  const lookup = tool(async ({ query }: { query: string }) => toolResultText(cycleOfInput({ query })), {
    name: TOOL_NAME,
    description: TOOL_DESCRIPTION,
    schema: z.object({ query: z.string() }),
  })
  const reply = (messages: BaseMessage[]) => {
    const cycle = cycleOf(messages.length)
    if (cycle >= n) return new AIMessage(FINAL_TEXT)
    return new AIMessage({ content: assistantText(cycle), tool_calls: [{ id: `call-${cycle}`, name: TOOL_NAME, args: toolInput(cycle), type: 'tool_call' }] })
  }
  return new StateGraph(MessagesAnnotation)
    .addNode('model', (state) => ({ messages: [reply(state.messages)] }))
    .addNode('tools', new ToolNode([lookup]))
    .addEdge(START, 'model')
    .addConditionalEdges('model', (state) => ((state.messages.at(-1) as AIMessage).tool_calls?.length ? 'tools' : END), ['tools', END])
    .addEdge('tools', 'model')
    .compile(checkpointer ? { checkpointer } : {})
}

const config = (n: number) => ({ configurable: { thread_id: THREAD }, recursionLimit: 2 * n + 10 })

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const start = performance.now()
  const value = await fn()
  return { ms: performance.now() - start, value }
}

async function run(n: number, checkpointer: BaseCheckpointSaver | undefined): Promise<number> {
  const { ms, value } = await timed(() => buildGraph(n, checkpointer).invoke({ messages: [new HumanMessage(PROMPT)] }, config(n)))
  if (value.messages.length !== 2 * n + 2) throw new Error(`expected ${2 * n + 2} messages, got ${value.messages.length}`)
  return ms
}

async function measure(n: number, system: System, baselineMs: number) {
  const warm = await system.open()
  await warm.saver.getTuple({ configurable: { thread_id: 'not-a-thread' } })
  const wallMs = await run(n, warm.saver)
  await warm.close()
  const bytes = await system.bytes()
  const cold = await system.open()
  const graph = buildGraph(n, cold.saver)
  const state = await timed(() => graph.getState({ configurable: { thread_id: THREAD } }))
  if ((state.value.values as { messages: unknown[] }).messages.length !== 2 * n + 2) throw new Error('getState returned the wrong state')
  const history = await timed(async () => {
    let entries = 0
    for await (const snapshot of graph.getStateHistory({ configurable: { thread_id: THREAD } })) if (snapshot.values) entries++
    return entries
  })
  await cold.close()
  await system.drop()
  return {
    system: system.name,
    n,
    bytes,
    addedMsPerStep: (wallMs - baselineMs) / (2 * n + 1),
    getStateColdMs: state.ms,
    historyMs: history.ms,
    historyEntries: history.value,
  }
}

const sizes = process.argv.slice(2).map(Number)
for (const n of sizes.length > 0 ? sizes : [100, 500]) {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-saver-bench-'))
  try {
    await run(20, undefined)
    const baselineMs = Math.min(await run(n, undefined), await run(n, undefined))
    const only = process.env.SYSTEMS?.split(',')
    const systems = [sqliteSaver(dir), cairnSqlite(dir, 'full'), cairnSqlite(dir, 'normal'), cairnPostgres(n)]
    for (const system of systems.filter((s) => only === undefined || only.some((name) => s.name.includes(name)))) {
      const row = await measure(n, system, baselineMs)
      console.log(
        `n=${n}  ${row.system.padEnd(34)} bytes ${(row.bytes / 1e6).toFixed(2).padStart(8)} MB   added/step ${row.addedMsPerStep.toFixed(2).padStart(6)} ms   getState cold ${row.getStateColdMs.toFixed(0).padStart(6)} ms   history ${row.historyMs.toFixed(0).padStart(6)} ms (${row.historyEntries} states)`,
      )
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
