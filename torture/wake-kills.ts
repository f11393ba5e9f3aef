/**
 * Wake kills, a part of the crash torture: a run enqueued to worker processes sleeps (its tool
 * calls `ctx.sleep`), and a worker is SIGKILLed around the wake — just before it (the run is
 * stored sleeping; the harness kills the worker that ran it, sometimes every worker, and starts a
 * fresh one), at the claim of the wake, right after the code after the sleep started, or right
 * after its effect. Another worker takes over. Each scenario checks that the run completes, that
 * its effect was applied once (a second execution finds its idempotency key in the effect log),
 * that the code after the sleep ran once (twice only when the kill cut it off), and that no
 * worker ran the tool again before its wake time.
 *
 * The worker processes are torture/wake-worker.ts, on SQLite (several processes on one file) and
 * Postgres (when a server answers).
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { dropSchema, POSTGRES_URL, postgresAnswers } from './postgres.js'
import { CairnClient } from '../src/index.js'
import type { EngineStore } from '../src/engine.js'
import { PostgresStore } from '../src/postgres.js'
import { SqliteStore } from '../src/sqlite.js'
import { EffectLog } from './side-effects.js'
import type { WakeKill } from './wake-worker.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const WORKER = join(ROOT, 'torture/wake-worker.ts')
const RUN_ID = 'napping'
/** How long a scenario's run may take to complete before the scenario fails. */
const RUN_TIMEOUT_MS = 90_000

/** Where a scenario kills: `before` from outside, just before the wake; the others inside a worker (see wake-worker.ts). */
export type WakeKillPoint = 'before' | Exclude<WakeKill, 'none'>

/** How many wake kill scenarios to play, and where. */
export interface WakeKillOptions {
  scenarios: number
  /** `sqlite`, `postgres`; default both (Postgres when a server answers). */
  backends?: readonly string[]
  lanes: number
  seed: number
  log?: (line: string) => void
}

/** What the wake kills found. */
export interface WakeKillTally {
  scenarios: number
  /** Kills landed, by point (a `before` kill that landed after the wake counts as `before (late)`). */
  kills: Record<string, number>
  workers: number
  /** Effects applied in all (one per scenario when all is well), and second executions the effect log deduplicated. */
  effectsApplied: number
  effectsDeduplicated: number
  /** Executions of the code after the sleep, in all. */
  afterSleep: number
  /** Claims between the sleep and the wake (a lapsed lease taken over), handed back with nothing run. */
  earlyClaims: number
  backends: string[]
  failures: { scenario: string; problems: string[] }[]
  durationMs: number
}

interface WakeScenario {
  id: string
  backend: string
  point: WakeKillPoint
  sleepMs: number
  /** `before`: how long before the wake the harness kills. */
  earlyMs: number
  /** `before`: kill every worker, not only the one that ran the run. */
  killAll: boolean
}

const POINTS: readonly WakeKillPoint[] = ['before', 'claim', 'after-wake', 'after-effect']

/** Play the wake kill scenarios and tally them. */
export async function runWakeKills(options: WakeKillOptions): Promise<WakeKillTally> {
  const started = performance.now()
  const backends = options.backends ?? ['sqlite', 'postgres']
  const available = backends.includes('postgres') && !(await postgresAnswers()) ? backends.filter((name) => name !== 'postgres') : [...backends]
  if (available.length < backends.length) options.log?.(`wake kills: no Postgres server answers at ${POSTGRES_URL}; SQLite only`)
  const tally: WakeKillTally = { scenarios: 0, kills: {}, workers: 0, effectsApplied: 0, effectsDeduplicated: 0, afterSleep: 0, earlyClaims: 0, backends: available, failures: [], durationMs: 0 }
  const rng = mulberry32(options.seed)
  const scenarios: WakeScenario[] = Array.from({ length: options.scenarios }, (_, i) => {
    const point = POINTS[i % POINTS.length]!
    // Every point on every backend: the backends alternate, shifted by one each round of points.
    const backend = available[(i + Math.floor(i / POINTS.length)) % available.length]!
    return { id: `wake-${backend}-${point}-${i}`, backend, point, sleepMs: 1500 + Math.floor(rng() * 1000), earlyMs: Math.floor(rng() * 300), killAll: rng() < 0.5 }
  })
  let next = 0
  const lane = async () => {
    for (let scenario = scenarios[next++]; scenario !== undefined; scenario = scenarios[next++]) {
      const report = await playWakeKill(scenario)
      tally.scenarios++
      if (report.kill !== undefined) tally.kills[report.kill] = (tally.kills[report.kill] ?? 0) + 1
      tally.workers += report.workers
      tally.effectsApplied += report.applied
      tally.effectsDeduplicated += report.deduplicated
      tally.afterSleep += report.afterSleep
      tally.earlyClaims += report.earlyClaims
      if (report.problems.length > 0) {
        tally.failures.push({ scenario: scenario.id, problems: report.problems })
        options.log?.(`FAIL ${scenario.id}: ${report.problems.join('; ')}`)
      }
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, options.lanes) }, lane))
  tally.durationMs = performance.now() - started
  return tally
}

/** The tally as the lines the harness prints. */
export function formatWakeKillTally(tally: WakeKillTally): string {
  const kills = Object.entries(tally.kills)
    .map(([point, count]) => `${count} ${point}`)
    .join(', ')
  return [
    `wake scenarios       ${tally.scenarios} on ${tally.backends.join(', ')}`,
    `kills around a wake  ${Object.values(tally.kills).reduce((a, b) => a + b, 0)} (${kills || 'none'})`,
    `worker processes     ${tally.workers}`,
    `effects              ${tally.effectsApplied} applied, ${tally.effectsDeduplicated} second executions deduplicated by key`,
    `code after the sleep ${tally.afterSleep} executions (none before its wake)`,
    `claims before a wake ${tally.earlyClaims} (lapsed leases taken over; nothing ran)`,
    `failures             ${tally.failures.length}`,
    `time                 ${(tally.durationMs / 1000).toFixed(1)} s`,
    ...tally.failures.slice(0, 20).map((failure) => `  FAIL ${failure.scenario}: ${failure.problems.join('; ')}`),
  ].join('\n')
}

interface WakeReport {
  kill: string | undefined
  workers: number
  applied: number
  deduplicated: number
  afterSleep: number
  earlyClaims: number
  problems: string[]
}

async function playWakeKill(scenario: WakeScenario): Promise<WakeReport> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-torture-wake-'))
  const { target, store, dispose } = await open(scenario.backend, dir)
  const problems: string[] = []
  const report: WakeReport = { kill: undefined, workers: 0, applied: 0, deduplicated: 0, afterSleep: 0, earlyClaims: 0, problems }
  const workers = new Map<string, Started>()
  const startWorker = (kill: WakeKill) => {
    const id = `w${workers.size + 1}`
    workers.set(id, start([target, dir, id, String(scenario.sleepMs), kill]))
    report.workers++
  }
  try {
    const inside: WakeKill = scenario.point === 'before' ? 'none' : scenario.point
    startWorker(inside)
    startWorker(inside)
    await new CairnClient({ store }).enqueue('napper', { input: 'rest, then act', runId: RUN_ID })
    const first = await waitForLine(dir, 'before')
    let lateKill = false
    if (scenario.point === 'before') {
      await sleep(first.at + scenario.sleepMs - scenario.earlyMs - Date.now())
      lateKill = lines(dir).some((line) => line.kind === 'after')
      const victims = scenario.killAll ? [...workers.keys()] : [first.worker]
      for (const id of victims) workers.get(id)?.kill('SIGKILL')
      startWorker('none')
      report.kill = lateKill ? 'before (late)' : scenario.killAll ? 'before (all workers)' : 'before'
    }
    const deadline = Date.now() + RUN_TIMEOUT_MS
    while ((await store.getRun(RUN_ID))?.status !== 'completed') {
      const status = (await store.getRun(RUN_ID))?.status
      if (status === 'failed' || status === 'paused' || status === 'cancelled') throw new Error(`the run ended ${status}`)
      if (Date.now() > deadline) throw new Error(`the run is still ${status} after ${RUN_TIMEOUT_MS} ms`)
      await sleep(50)
    }
    if (scenario.point !== 'before') {
      if (existsSync(join(dir, 'killed'))) report.kill = scenario.point
      else problems.push(`no worker reached the kill point ${scenario.point}`)
    }
    problems.push(...check(scenario, dir, first.at, lateKill, report))
  } catch (err) {
    problems.push(`the scenario broke: ${(err as Error).message}`)
  } finally {
    for (const worker of workers.values()) worker.kill('SIGTERM')
    const exits = await Promise.all([...workers.values()].map((worker) => worker.exited))
    const crashed = exits.filter((exit) => exit.signal !== 'SIGKILL' && exit.code !== 0 && exit.code !== null)
    for (const exit of crashed) problems.push(`a worker exited ${exit.code}: ${exit.stderr.slice(0, 300)}`)
    await store.close()
    await dispose()
    if (problems.length === 0) await rm(dir, { recursive: true, force: true })
    else problems.push(`kept ${dir}`)
  }
  return report
}

/** The scenario's checks: one effect, the code after the sleep once (twice when cut off), nothing before the wake. */
function check(scenario: WakeScenario, dir: string, sleptAt: number, lateKill: boolean, report: WakeReport): string[] {
  const problems: string[] = []
  const effects = new EffectLog(join(dir, 'effects.log')).read()
  report.applied = effects.filter((effect) => effect.applied).length
  report.deduplicated = effects.length - report.applied
  if (report.applied !== 1) problems.push(`the effect was applied ${report.applied} times`)
  if (new Set(effects.map((effect) => effect.key)).size > 1) problems.push(`the effect ran under several keys: ${[...new Set(effects.map((e) => e.key))].join(', ')}`)
  const log = lines(dir)
  const after = log.filter((line) => line.kind === 'after')
  report.afterSleep = after.length
  const cutOff = scenario.point === 'after-wake' || scenario.point === 'after-effect' || lateKill
  if (after.length !== 1 && !(cutOff && after.length === 2)) problems.push(`the code after the sleep ran ${after.length} times`)
  if (scenario.point === 'after-effect' && report.deduplicated !== 1) problems.push(`the execution after the kill did not meet its key in the effect log (${report.deduplicated} deduplicated)`)
  // The tool runs again from its start at the wake: no execution of it, before or after its sleep
  // call, may start before the wake time. (A claim may: a lease that lapsed on a loaded machine is
  // taken over, and the runner hands a run that is not due back without running anything.)
  const wakeAt = sleptAt + scenario.sleepMs
  for (const line of log.filter((line) => line.at > sleptAt && (line.kind === 'before' || line.kind === 'after'))) {
    if (line.at < wakeAt) problems.push(`${line.worker} ran the tool ('${line.kind}') ${wakeAt - line.at} ms before its wake`)
  }
  report.earlyClaims = log.filter((line) => line.kind === 'claimed' && line.at > sleptAt && line.at < wakeAt).length
  return problems
}

interface LogLine {
  kind: string
  at: number
  worker: string
}

function lines(dir: string): LogLine[] {
  const path = join(dir, 'log')
  if (!existsSync(path)) return []
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      const [kind = '', at = '0', worker = ''] = line.split(' ')
      return { kind, at: Number(at), worker }
    })
}

async function waitForLine(dir: string, kind: string): Promise<LogLine> {
  const deadline = Date.now() + RUN_TIMEOUT_MS
  for (;;) {
    const found = lines(dir).find((line) => line.kind === kind)
    if (found) return found
    if (Date.now() > deadline) throw new Error(`no "${kind}" line in the log after ${RUN_TIMEOUT_MS} ms`)
    await sleep(10)
  }
}

interface Started {
  kill(signal: NodeJS.Signals): void
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>
}

function start(args: string[]): Started {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER, ...args], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS * 2)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) => {
    child.on('error', (err) => resolve({ code: null, signal: null, stderr: `${stderr}${err.message}` }))
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stderr })
    })
  })
  return {
    kill: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
    },
    exited,
  }
}

async function open(backend: string, dir: string): Promise<{ target: string; store: EngineStore; dispose: () => Promise<void> }> {
  if (backend === 'sqlite') {
    const path = join(dir, 'cairn.db')
    return { target: `sqlite:${path}`, store: new SqliteStore({ path }), dispose: async () => {} }
  }
  const schema = `cairn_wake_${process.pid}_${randomBytes(4).toString('hex')}`
  return {
    target: `postgres:${schema}`,
    store: new PostgresStore({ connectionString: POSTGRES_URL, schema }),
    dispose: () => dropSchema(schema),
  }
}


function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)))
}

function mulberry32(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
