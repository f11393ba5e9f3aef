/**
 * `npm run bench:rows`: stored checkpoint rows per step, counted in the real SQLite file.
 *
 * - the runner: n tool cycles (a model call asking for one lookup, then the lookup; a closing
 *   model call: 2n + 1 steps), under async and sync durability, with an idempotent lookup (its
 *   intents ride with the next background commit) and with one that is not (a write-ahead commit
 *   before every tool batch);
 * - a workflow: n super steps of one executor sending itself a message (one step each).
 *
 * Each line prints the rows in the `checkpoints` table of the run, the steps, the rows per step,
 * and the phases `runner.history()` shows (every phase, the light ones read from phase logs).
 * Usage: `npm run bench:rows [-- 200 500]`.
 */
import Database from 'better-sqlite3'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { z } from 'zod'
import { Agent, Executor, Runner, tool, WorkflowBuilder, type WorkflowContext } from '../src/index.js'
import { SqliteStore } from '../src/sqlite.js'
import { ScriptedModel } from '../src/testing.js'
import { formatTable } from './format-table.js'

const sizes = process.argv.slice(2).map(Number).filter((n) => Number.isInteger(n) && n > 0)
const SIZES = sizes.length > 0 ? sizes : [200, 500]

interface Line {
  what: string
  n: number
  rows: number
  steps: number
  phases: number | string
}

/** Counts down one per super step, sending itself the rest; yields at zero. */
class Countdown extends Executor<number> {
  async handle(left: number, ctx: WorkflowContext<number, number>): Promise<void> {
    if (left === 0) await ctx.yieldOutput(0)
    else await ctx.sendMessage(left - 1)
  }
}

await main()

async function main(): Promise<void> {
const lines: Line[] = []
for (const n of SIZES) {
  for (const durability of ['async', 'sync'] as const) {
    for (const idempotent of [true, false]) lines.push(await runnerRows({ n, durability, idempotent }))
  }
  lines.push(await workflowRows(n))
}
console.log(
  formatTable(
    [{ header: 'what' }, ...['n', 'steps', 'rows stored', 'rows per step', 'phases in history'].map((header) => ({ header, align: 'right' as const }))],
    lines.map((l) => [l.what, String(l.n), String(l.steps), String(l.rows), (l.rows / l.steps).toFixed(3), String(l.phases)]),
  ),
)
}

async function runnerRows(params: { n: number; durability: 'async' | 'sync'; idempotent: boolean }): Promise<Line> {
  const { n, durability, idempotent } = params
  return withFile(async (path) => {
    const store = new SqliteStore({ path })
    const lookup = tool({ name: 'lookup', description: 'look up', inputSchema: z.object({ i: z.number() }), idempotent, callback: ({ i }) => `fact ${i} `.padEnd(1000, '.') })
    const turn = (request: { messages: { content: object[] }[] }) => {
      const done = request.messages.flatMap((m) => m.content.filter((b) => 'toolResult' in b)).length
      return done < n ? [{ text: `step ${done} `.padEnd(1000, '.') }, { toolUse: { toolUseId: `t${done}`, name: 'lookup', input: { i: done } } }] : [{ text: 'done' }]
    }
    const agent = new Agent({ model: new ScriptedModel(Array.from({ length: n + 1 }, () => turn)), tools: [lookup] })
    const runner = new Runner({ store, durability })
    const run = await runner.run(agent, { input: 'go', runId: 'rows' })
    if (run.state !== 'completed') throw new Error(`the run ended ${run.state}: ${run.error?.message ?? ''}`)
    const phases = (await runner.history('rows')).length
    await store.close()
    return { what: `runner ${durability}, ${idempotent ? 'idempotent' : 'non-idempotent'} tool`, n, rows: countRows(path, 'rows'), steps: 2 * n + 1, phases }
  })
}

async function workflowRows(n: number): Promise<Line> {
  return withFile(async (path) => {
    const store = new SqliteStore({ path })
    const start = new Countdown('start')
    const workflow = new WorkflowBuilder<number, number>({ name: 'countdown', startExecutor: start, store, maxSupersteps: n + 10 }).addEdge(start, start).build()
    const result = await workflow.run({ message: n - 1 })
    const checkpoints = await store.listCheckpoints({ runId: result.runId, limit: 100_000 })
    await store.close()
    const phases = [...new Set(checkpoints.map((c) => c.phase))].join(', ')
    return { what: 'workflow (one executor, a self-loop)', n, rows: countRows(path, result.runId), steps: n, phases: `${checkpoints.length} (${phases})` }
  })
}

function countRows(path: string, runId: string): number {
  const db = new Database(path, { readonly: true })
  try {
    return db.prepare('SELECT count(*) FROM checkpoints WHERE run_id = ?').pluck().get(runId) as number
  } finally {
    db.close()
  }
}

async function withFile<T>(body: (path: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-rows-'))
  try {
    return await body(join(dir, 'cairn.db'))
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}
