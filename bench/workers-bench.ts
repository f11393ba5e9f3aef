/**
 * Workers benchmark: `npm run bench:workers`. With 1, 2 and 4 worker processes (4 runs each at
 * once) on the local Postgres server (`DATABASE_URL` when set), it measures:
 *
 * - throughput: runs and checkpoints per second for a 5-cycle scripted agent (a no-op tool per
 *   cycle), 400 runs enqueued at once;
 * - enqueue-to-start latency: 60 runs enqueued 30 ms apart onto idle workers, from the enqueue
 *   call to the worker's claim (woken by `NOTIFY`), p50 and p99;
 * - takeover: one worker is SIGKILLed while it holds 4 runs (a replacement starts at once); the
 *   time from the kill to each of those runs being claimed again. Its floor is the lease
 *   (`leaseMs`), which must lapse before anyone may take a run over.
 *
 * The table goes to stdout and `bench/results/workers.json`; progress to stderr.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { arch, cpus, platform, release, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { CairnClient } from '../src/index.js'
import { PostgresStore } from '../src/postgres.js'
import { formatNumber, formatTable } from './format-table.js'
import { percentile } from './stats.js'
import type { BenchWorkerConfig } from './workers-process.js'

const DATABASE_URL = process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/test'
const WORKER_COUNTS = [1, 2, 4] as const
const SETTINGS = { concurrency: 4, leaseMs: 2000, heartbeatMs: 500, pollMs: 250, cycles: 5 }
const THROUGHPUT_RUNS = 400
const LATENCY_RUNS = 60
const LATENCY_SPACING_MS = 30
const SLOW_STEP_MS = 400
const RESULTS_FILE = new URL('./results/workers.json', import.meta.url)
const WORKER_SCRIPT = fileURLToPath(new URL('./workers-process.ts', import.meta.url))

interface LogEntry {
  type: string
  worker: string
  at: number
  runId?: string
  epoch?: number
}

interface Result {
  workers: number
  runsPerSecond: number
  checkpointsPerSecond: number
  checkpointsPerRun: number
  enqueueToStartMs: { p50: number; p99: number }
  killToResumeMs: { p50: number; max: number; runs: number }
}

async function measure(workers: number): Promise<Result> {
  const schema = `cairn_bench_workers_${randomBytes(4).toString('hex')}`
  const dir = await mkdtemp(join(tmpdir(), 'cairn-bench-workers-'))
  const store = new PostgresStore({ connectionString: DATABASE_URL, schema, onWarning: () => {} })
  await store.ready()
  const client = new CairnClient({ store })
  const fleet = new BenchFleet({ ...SETTINGS, connectionString: DATABASE_URL, schema, logFile: join(dir, 'events.log') })
  try {
    progress(`${workers} worker(s): starting`)
    for (let slot = 0; slot < workers; slot++) fleet.start(slot)
    await until(() => fleet.log().filter((e) => e.type === 'started').length === workers, 'the workers to start')

    progress(`${workers} worker(s): enqueue-to-start latency`)
    const enqueuedAt = new Map<string, number>()
    for (let i = 0; i < LATENCY_RUNS; i++) {
      const runId = `latency-${i}`
      enqueuedAt.set(runId, Date.now())
      await client.enqueue('bench', { input: 'go', runId })
      await new Promise((resolve) => setTimeout(resolve, LATENCY_SPACING_MS))
    }
    await untilCompleted(store, LATENCY_RUNS)
    const claims = new Map(fleet.log().flatMap((e) => (e.type === 'claimed' && e.epoch === 1 ? [[e.runId!, e.at] as const] : [])))
    const latencies = [...enqueuedAt].map(([runId, at]) => claims.get(runId)! - at)

    progress(`${workers} worker(s): throughput, ${THROUGHPUT_RUNS} runs`)
    const runIds = Array.from({ length: THROUGHPUT_RUNS }, (_, i) => `run-${i}`)
    const started = Date.now()
    for (let i = 0; i < runIds.length; i += 25) await Promise.all(runIds.slice(i, i + 25).map((runId) => client.enqueue('bench', { input: 'go', runId })))
    await untilCompleted(store, LATENCY_RUNS + THROUGHPUT_RUNS)
    const finished = Math.max(...fleet.log().flatMap((e) => (e.type === 'released' && e.runId?.startsWith('run-') ? [e.at] : [])))
    const checkpoints = await countCheckpoints(schema, 'run-%')
    const seconds = (finished - started) / 1000

    progress(`${workers} worker(s): SIGKILL a worker holding ${SETTINGS.concurrency} runs`)
    const slow = Array.from({ length: workers * SETTINGS.concurrency }, (_, i) => `slow-${i}`)
    for (const runId of slow) await client.enqueue('bench', { input: JSON.stringify({ delayMs: SLOW_STEP_MS }), runId })
    const victim = fleet.members.get(0)!.id
    const heldBy = () => fleet.log().filter((e) => e.type === 'claimed' && e.worker === victim && e.runId?.startsWith('slow-'))
    await until(() => heldBy().length === SETTINGS.concurrency, 'the first worker to hold its runs')
    await new Promise((resolve) => setTimeout(resolve, SLOW_STEP_MS))
    const killedAt = Date.now()
    await fleet.kill(0)
    fleet.start(0)
    const held = heldBy().map((e) => e.runId!)
    await untilCompleted(store, LATENCY_RUNS + THROUGHPUT_RUNS + slow.length)
    const resumes = held.map((runId) => {
      const next = fleet.log().find((e) => e.type === 'claimed' && e.runId === runId && e.worker !== victim && e.at >= killedAt)
      return next ? next.at - killedAt : Number.NaN
    })
    return {
      workers,
      runsPerSecond: THROUGHPUT_RUNS / seconds,
      checkpointsPerSecond: checkpoints / seconds,
      checkpointsPerRun: checkpoints / THROUGHPUT_RUNS,
      enqueueToStartMs: { p50: percentile(latencies, 50), p99: percentile(latencies, 99) },
      killToResumeMs: { p50: percentile(resumes, 50), max: Math.max(...resumes), runs: resumes.length },
    }
  } finally {
    await fleet.stopAll()
    await store.close()
    await dropSchema(schema)
    await rm(dir, { recursive: true, force: true })
  }
}

/** Benchmark worker processes sharing a log file. */
class BenchFleet {
  readonly members = new Map<number, { id: string; child: ChildProcess; exited: Promise<void> }>()
  readonly #base: Omit<BenchWorkerConfig, 'id'>
  #started = 0

  constructor(base: Omit<BenchWorkerConfig, 'id'>) {
    this.#base = base
  }

  start(slot: number): void {
    const id = `w${slot}.${++this.#started}`
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER_SCRIPT, JSON.stringify({ ...this.#base, id })], { stdio: ['ignore', 'ignore', 'inherit'] })
    const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()))
    this.members.set(slot, { id, child, exited })
  }

  async kill(slot: number): Promise<void> {
    const member = this.members.get(slot)
    member?.child.kill('SIGKILL')
    await member?.exited
    this.members.delete(slot)
  }

  async stopAll(): Promise<void> {
    const members = [...this.members.values()]
    for (const member of members) member.child.kill('SIGTERM')
    await Promise.all(members.map((member) => member.exited))
    this.members.clear()
  }

  log(): LogEntry[] {
    if (!existsSync(this.#base.logFile)) return []
    return readFileSync(this.#base.logFile, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as LogEntry)
  }
}

async function untilCompleted(store: PostgresStore, count: number): Promise<void> {
  await until(async () => (await store.listRuns({ status: 'completed', limit: 100_000 })).length >= count, `${count} completed runs`, 100)
}

async function until(condition: () => boolean | Promise<boolean>, what: string, pollMs = 20): Promise<void> {
  const deadline = Date.now() + 120_000
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, pollMs))
  }
}

async function countCheckpoints(schema: string, pattern: string): Promise<number> {
  const client = new pg.Client({ connectionString: DATABASE_URL })
  await client.connect()
  try {
    const { rows } = await client.query(`SELECT count(*)::int AS n FROM "${schema}".checkpoints WHERE run_id LIKE $1`, [pattern])
    return (rows[0] as { n: number }).n
  } finally {
    await client.end()
  }
}

async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: DATABASE_URL })
  await client.connect()
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => client.end())
}

function progress(message: string): void {
  process.stderr.write(`[bench:workers] ${message}\n`)
}

async function main(): Promise<void> {
  const results: Result[] = []
  for (const workers of WORKER_COUNTS) results.push(await measure(workers))

  const table = formatTable(
    [
      { header: 'workers' },
      { header: 'runs/s' },
      { header: 'checkpoints/s' },
      { header: 'enqueue→start p50' },
      { header: 'p99' },
      { header: 'SIGKILL→resumed p50' },
      { header: 'max' },
    ],
    results.map((r) => [
      String(r.workers),
      formatNumber(r.runsPerSecond, 1),
      formatNumber(r.checkpointsPerSecond, 0),
      `${formatNumber(r.enqueueToStartMs.p50, 1)} ms`,
      `${formatNumber(r.enqueueToStartMs.p99, 1)} ms`,
      `${formatNumber(r.killToResumeMs.p50, 0)} ms`,
      `${formatNumber(r.killToResumeMs.max, 0)} ms`,
    ]),
  )
  console.log(`\nCairn workers benchmark: worker processes on ${DATABASE_URL.replace(/:[^:@/]*@/, ':***@')}, ${SETTINGS.concurrency} runs at once per worker\n`)
  console.log(table)
  console.log(`\nthroughput: ${THROUGHPUT_RUNS} runs of a ${SETTINGS.cycles}-cycle scripted agent (a model turn and a no-op tool call per cycle, async durability), enqueued at once`)
  console.log(`latency: ${LATENCY_RUNS} runs enqueued ${LATENCY_SPACING_MS} ms apart onto idle workers, from enqueue() to the claim`)
  console.log(`takeover: leaseMs ${SETTINGS.leaseMs}, heartbeatMs ${SETTINGS.heartbeatMs}, pollMs ${SETTINGS.pollMs}; a lease must lapse before its run is taken over`)
  await mkdir(new URL('./results', import.meta.url), { recursive: true })
  const environment = { node: process.version, os: `${platform()} ${release()} ${arch()}`, cpu: cpus()[0]?.model ?? 'unknown', cpus: cpus().length, date: new Date().toISOString() }
  const config = { ...SETTINGS, throughputRuns: THROUGHPUT_RUNS, latencyRuns: LATENCY_RUNS, latencySpacingMs: LATENCY_SPACING_MS, slowStepMs: SLOW_STEP_MS }
  await writeFile(RESULTS_FILE, `${JSON.stringify({ environment, config, results }, null, 2)}\n`)
  progress(`wrote ${fileURLToPath(RESULTS_FILE)}`)
}

await main()
