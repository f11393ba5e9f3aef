/**
 * One torture child process: runs the scripted planner as run `--run` on the SQLite file in
 * `--dir` (or resumes it, when the run exists), under `--durability sync|async`, answering
 * pending interrupts with `--responses <json>`. It may die at the kill point named in
 * `CAIRN_TORTURE_KILL`, or be SIGKILLed by the harness at any instant. It reports on stdout, one
 * JSON line each: `ready`, `trace` (with `CAIRN_TORTURE_TRACE=1`), `killed`, and `result` or
 * `error`.
 *
 *   node --import tsx torture/worker.ts --dir /tmp/t1 --run t1 --durability sync
 */
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import type { JsonValue } from '../src/index.js'
import type { Message } from '../src/index.js'
import { Runner } from '../src/index.js'
import { SqliteStore } from '../src/sqlite.js'
import type { CheckpointStore } from '../src/index.js'
import { KillingStore, KillSwitch, report } from './kill-switch.js'
import type { WorkerError, WorkerResult } from './protocol.js'
import { buildPlanner, PROMPT } from './script.js'
import { EffectLog } from './side-effects.js'

const { values } = parseArgs({
  options: {
    dir: { type: 'string' },
    run: { type: 'string' },
    durability: { type: 'string', default: 'sync' },
    responses: { type: 'string' },
  },
})
const { dir, run: runId, durability } = values
if (!dir || !runId || (durability !== 'sync' && durability !== 'async')) {
  throw new TypeError('usage: worker.ts --dir <dir> --run <runId> --durability sync|async [--responses <json>]')
}

const kill = KillSwitch.fromEnv(process.env)
const sqlite = new SqliteStore({ path: join(dir, 'cairn.db') })
const store = new KillingStore(sqlite, kill)
const runner = new Runner({ store, durability })
const agent = buildPlanner({ runner, effects: new EffectLog(join(dir, 'effects.log')), kill })
report({ type: 'ready' })
try {
  // A run with no checkpoint yet (its process died before the first commit) starts again.
  const started = ((await sqlite.getRun(runId))?.lastSeq ?? 0) === 0
  const responses = values.responses === undefined ? undefined : (JSON.parse(values.responses) as Record<string, JsonValue>)
  const result = started
    ? await runner.run(agent, { input: PROMPT, runId })
    : await runner.resume(agent, { runId, ...(responses ? { responses } : {}) })
  report({
    type: 'result',
    state: result.state,
    interrupts: result.interrupts.map((i) => ({ id: i.id, name: i.name, toolUseId: i.toolUseId, idempotencyKey: keyOf(i.reason) })),
    replayed: result.replayedEffectCount,
    fromTerminalCheckpoint: result.fromTerminalCheckpoint,
    started,
    transcripts: result.state === 'completed' ? await transcripts(sqlite, runner, runId) : {},
    live: result.state === 'completed' && !result.fromTerminalCheckpoint ? agent.messages : null,
    statuses: Object.fromEntries((await sqlite.listRuns()).map((r) => [r.runId, r.status])),
  } satisfies WorkerResult)
} catch (err) {
  const e = err as Error & { code?: unknown }
  report({ type: 'error', name: e.name, message: e.message, code: typeof e.code === 'string' ? e.code : null } satisfies WorkerError)
  process.exitCode = 1
} finally {
  await sqlite.close()
}

/** The transcripts of the run and of its child runs, from their newest runtime snapshots. */
async function transcripts(store: CheckpointStore, runner: Runner, runId: string): Promise<Record<string, Message[]>> {
  const runs = (await store.listRuns()).filter((r) => r.runId === runId || r.runId.startsWith(`${runId}:`))
  const out: Record<string, Message[]> = {}
  for (const run of runs) {
    const history = await runner.history(run.runId)
    const newest = history.reverse().find((c) => (c.payload as { runtime?: unknown }).runtime)
    out[run.runId] = newest ? (newest.payload as { runtime: { messages: Message[] } }).runtime.messages : []
  }
  return out
}

function keyOf(reason: unknown): string | null {
  const key = (reason as { idempotencyKey?: unknown } | undefined)?.idempotencyKey
  return typeof key === 'string' ? key : null
}
