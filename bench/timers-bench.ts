/**
 * Durable timers benchmark: `npm run bench:timers`. How many sleeping runs a store holds and how
 * late their wake-ups fire, on SQLite and Postgres.
 *
 * Workload: CAIRN_SLEEPERS enqueued runs (default 10,000) are claimed and handed back `sleeping`,
 * each with a timer (what a worker leaves after `ctx.sleep`), wake times spread evenly over
 * CAIRN_WAKE_SPREAD_MS (default 10 s) starting 2 s after setup. CAIRN_SWEEPERS sweepers (default
 * 3, as three workers would; each its own store handle) then run the workers' sweep every
 * CAIRN_SWEEP_MS (default 100 ms, the worker's `sweepMs`) until every run is queued again.
 * The sweepers start before the timers are set, and run between two timers set (the setter yields
 * to the event loop after each); a timer whose planned time has passed by the time it is set
 * (setting fell behind) gets a wake time half a second after it is set instead.
 * Lateness = the time a run was queued again − its wake time (never negative: nothing wakes early),
 * p50/p99/max over all runs. Setup = the time to put the sleepers in the store. Twice woken = runs
 * queued again by more than one sweep (must be 0). The claim that follows (one round trip of
 * the queue, measured by bench:workers) is not included.
 *
 * Environment: CAIRN_TIMERS_PG (default postgresql://postgres@127.0.0.1:5432/test; "off" skips Postgres).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { EngineStore } from '../src/engine.js'
import { PostgresStore } from '../src/postgres.js'
import { SqliteStore } from '../src/sqlite.js'
import { sweep } from '../src/worker/time-sweep.js'
import { formatNumber, formatTable } from './format-table.js'
import { percentile } from './stats.js'

const SLEEPERS = Number(process.env.CAIRN_SLEEPERS ?? 10_000)
const SPREAD_MS = Number(process.env.CAIRN_WAKE_SPREAD_MS ?? 10_000)
const SWEEPERS = Number(process.env.CAIRN_SWEEPERS ?? 3)
const SWEEP_MS = Number(process.env.CAIRN_SWEEP_MS ?? 100)
const PG = process.env.CAIRN_TIMERS_PG ?? 'postgresql://postgres@127.0.0.1:5432/test'

interface Figures {
  backend: string
  setupMs: number
  lateness: number[]
  twice: number
  sweeps: number
  /** From the last wake time to the last run queued again. */
  drainedMs: number
  /** From the first wake time to the last (longer than the spread when setting the timers fell behind). */
  spanMs: number
}

async function bench(backend: string, open: () => EngineStore): Promise<Figures> {
  const store = open()
  const leases = store.leases!
  const waits = store.waits!
  const started = Date.now()
  for (let i = 0; i < SLEEPERS; i += 500) {
    const ids = Array.from({ length: Math.min(500, SLEEPERS - i) }, (_, k) => `sleeper-${i + k}`)
    for (const runId of ids) await leases.enqueue({ runId, name: 'sleeper', metadata: { cairn: { name: 'sleeper', input: 'go' } } })
    const claimed = await leases.claim({ owner: 'setup', limit: ids.length, leaseMs: 60_000 })
    for (const lease of claimed) await leases.release(lease.fence, { status: 'sleeping' })
  }
  const setupMs = Date.now() - started
  // Sweepers run from now on, while the timers are set: a timer's wake time is its planned one, or
  // half a second after it is set when setting has fallen behind (so it is always in the future when set).
  const first = Date.now() + 2000
  const wakeAt = new Map<string, number>()
  const woken = new Map<string, number>()
  let twice = 0
  let sweeps = 0
  let setting = true
  const handles = Array.from({ length: SWEEPERS }, () => open())
  const sweepers = handles.map(async (handle, n) => {
    await new Promise((resolve) => setTimeout(resolve, (n * SWEEP_MS) / SWEEPERS))
    while (setting || woken.size < SLEEPERS) {
      const report = await sweep({ waits: handle.waits!, leases: handle.leases!, now: () => Date.now() })
      sweeps++
      const at = Date.now()
      for (const runId of report.woken) {
        if (woken.has(runId)) twice++
        else woken.set(runId, at)
      }
      await new Promise((resolve) => setTimeout(resolve, SWEEP_MS))
    }
  })
  for (let i = 0; i < SLEEPERS; i++) {
    const at = Math.max(first + Math.floor((i * SPREAD_MS) / SLEEPERS), Date.now() + 500)
    wakeAt.set(`sleeper-${i}`, at)
    await waits.setTimer(`sleeper-${i}`, at)
    // SQLite's driver is synchronous: without a turn of the event loop here the sweepers (other
    // workers, in a real deployment) would not run until every timer is set.
    await new Promise((resolve) => setImmediate(resolve))
  }
  const lastWake = Math.max(...wakeAt.values())
  setting = false
  await Promise.all(sweepers)
  const drainedMs = Math.max(...woken.values()) - lastWake
  for (const handle of handles) await handle.close()
  const queued = await store.listRuns({ status: 'queued', limit: SLEEPERS + 1 })
  if (queued.length !== SLEEPERS) throw new Error(`${backend}: ${queued.length} of ${SLEEPERS} runs queued again`)
  await store.close()
  return { backend, setupMs, lateness: [...woken].map(([runId, at]) => at - wakeAt.get(runId)!), twice, sweeps, drainedMs, spanMs: lastWake - first }
}

const results: Figures[] = []
const dir = await mkdtemp(join(tmpdir(), 'cairn-timers-bench-'))
try {
  const path = join(dir, 'timers.db')
  results.push(await bench('SQLite', () => new SqliteStore({ path })))
} finally {
  await rm(dir, { recursive: true, force: true })
}
if (PG !== 'off') {
  const schema = `timers_bench_${process.pid}`
  try {
    results.push(await bench('Postgres', () => new PostgresStore({ connectionString: PG, schema })))
  } finally {
    const { default: pg } = await import('pg')
    const client = new pg.Client({ connectionString: PG })
    await client.connect()
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    await client.end()
  }
}

console.log(`${SLEEPERS} sleeping runs, wake times over ${SPREAD_MS} ms, ${SWEEPERS} sweepers every ${SWEEP_MS} ms`)
console.log(
  formatTable(
    [
      { header: 'store' },
      { header: 'setup (s)', align: 'right' },
      { header: 'late p50 (ms)', align: 'right' },
      { header: 'late p99 (ms)', align: 'right' },
      { header: 'late max (ms)', align: 'right' },
      { header: 'early', align: 'right' },
      { header: 'twice woken', align: 'right' },
      { header: 'sweeps', align: 'right' },
      { header: 'wakes over (s)', align: 'right' },
      { header: 'wakes/s', align: 'right' },
    ],
    results.map((r) => [
      r.backend,
      formatNumber(r.setupMs / 1000, 1),
      formatNumber(percentile(r.lateness, 50)),
      formatNumber(percentile(r.lateness, 99)),
      formatNumber(Math.max(...r.lateness)),
      String(r.lateness.filter((ms) => ms < 0).length),
      String(r.twice),
      String(r.sweeps),
      formatNumber(r.spanMs / 1000, 1),
      formatNumber(SLEEPERS / ((r.spanMs + r.drainedMs) / 1000)),
    ]),
  ),
)
