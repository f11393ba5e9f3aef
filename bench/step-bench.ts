/**
 * Step benchmark: `npm run bench:step`. The time a durable step adds, in the peers' workload
 * (bench/peers/workload.ts: an agent loop of n cycles, a ~1 KB model step and a ~1 KB tool step
 * each, 2n + 1 steps) without the peers' child processes: the Runner over MemoryStore, FileStore,
 * SqliteStore and PostgresStore, async and sync, beside `agent.invoke` with no persistence, in one process.
 * Added µs per step = (runner wall time − bare wall time of the same trial) ÷ (2n + 1), and the
 * same for the process's CPU time (user + system, which includes the I/O threads', and which
 * neighbours on a shared machine disturb less than wall time); the tables show medians over
 * trials, with the range.
 *
 * Environment: CAIRN_BENCH_TRIALS (default 3), CAIRN_STEP_SIZES (default "200,500,1000"),
 * CAIRN_STEP_SYSTEMS (default "memory-async,memory-sync,file-async,file-sync,sqlite-async,sqlite-sync,postgres-async,postgres-sync";
 * also "sqlitenormal-async", "sqlitenormal-sync": SqliteStore with `synchronous: 'normal'`),
 * CAIRN_STEP_PG (default postgresql://postgres@127.0.0.1:5432/test).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { FileStore, MemoryStore, Runner, type CheckpointStore } from '../src/index.js'
import { PostgresStore } from '../src/postgres.js'
import { SqliteStore } from '../src/sqlite.js'
import { formatNumber, formatTable } from './format-table.js'
import { buildAgent } from './peers/systems/cairn.js'
import { PROMPT, stepsOf } from './peers/workload.js'
import { median, microsSince } from './stats.js'

type Backend = 'memory' | 'file' | 'sqlite' | 'sqlitenormal' | 'postgres'
type Durability = 'async' | 'sync'
interface System {
  id: string
  backend: Backend
  durability: Durability
}

const TRIALS = Number(process.env.CAIRN_BENCH_TRIALS ?? 3)
const SIZES = (process.env.CAIRN_STEP_SIZES ?? '200,500,1000').split(',').map(Number)
const SYSTEMS: System[] = (process.env.CAIRN_STEP_SYSTEMS ?? 'memory-async,memory-sync,file-async,file-sync,sqlite-async,sqlite-sync,postgres-async,postgres-sync')
  .split(',')
  .map((id) => {
    const [backend, durability] = id.split('-') as [Backend, Durability]
    return { id, backend, durability }
  })
const PG_URL = process.env.CAIRN_STEP_PG ?? 'postgresql://postgres@127.0.0.1:5432/test'
const WARMUP_CYCLES = 50

async function main(): Promise<void> {
  progress('warming up')
  await bare(WARMUP_CYCLES)
  for (const system of SYSTEMS) await durable(system, WARMUP_CYCLES, 'warm')

  /** Added wall and CPU µs per step, by system id and size, one value per trial. */
  const added = new Map<string, number[]>()
  const addedCpu = new Map<string, number[]>()
  for (let t = 0; t < TRIALS; t++) {
    for (const n of SIZES) {
      progress(`trial ${t + 1}/${TRIALS}, n=${n}`)
      const base = await bare(n)
      // Rotate the order so that drift spreads over the systems evenly.
      const order = SYSTEMS.map((_, i) => SYSTEMS[(i + t) % SYSTEMS.length]!)
      for (const system of order) {
        const run = await durable(system, n, `t${t}`)
        const key = `${system.id}@${n}`
        added.set(key, [...(added.get(key) ?? []), (run.wall - base.wall) / stepsOf(n)])
        addedCpu.set(key, [...(addedCpu.get(key) ?? []), (run.cpu - base.cpu) / stepsOf(n)])
      }
    }
  }

  console.log(`\nCairn step benchmark: added µs per step over agent.invoke (no persistence), ${TRIALS} trials, medians; load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`)
  console.log('\nwall time')
  console.log(table(added))
  console.log('\nCPU time (user + system)')
  console.log(table(addedCpu))
}

function table(figures: Map<string, number[]>): string {
  const columns = [{ header: 'system', align: 'left' as const }, ...SIZES.map((n) => ({ header: `n=${n} µs/step` })), ...SIZES.map((n) => ({ header: `n=${n} range` }))]
  const rows = SYSTEMS.map((system) => [
    system.id,
    ...SIZES.map((n) => formatNumber(median(figures.get(`${system.id}@${n}`) ?? []), 1)),
    ...SIZES.map((n) => {
      const values = figures.get(`${system.id}@${n}`) ?? []
      return `${formatNumber(Math.min(...values), 0)}–${formatNumber(Math.max(...values), 0)}`
    }),
  ])
  return formatTable(columns, rows)
}

/** Wall and CPU µs of `agent.invoke` with no persistence. */
async function bare(n: number): Promise<Timing> {
  const agent = buildAgent(n)
  const cpu = process.cpuUsage()
  const start = process.hrtime.bigint()
  const result = await agent.invoke(PROMPT)
  const timing = timingSince(start, cpu)
  if (result.stopReason !== 'end_turn' || agent.messages.length !== 2 * n + 2) throw new Error(`the bare loop ended ${result.stopReason}`)
  return timing
}

interface Timing {
  wall: number
  cpu: number
}

function timingSince(start: bigint, cpu: NodeJS.CpuUsage): Timing {
  const wall = microsSince(start)
  const used = process.cpuUsage(cpu)
  return { wall, cpu: used.user + used.system }
}

/** Wall and CPU µs of `runner.run` on a fresh store of the system's backend, the store opened beforehand. */
async function durable(system: System, n: number, tag: string): Promise<Timing> {
  const location = await mkdtemp(join(tmpdir(), 'cairn-bench-step-'))
  const schema = `cairn_step_${system.backend}_${system.durability}_${n}_${tag}`
  const store = openStore(system.backend, location, schema)
  try {
    await store.getRun('not-a-run') // open and migrate outside the timed run
    const runner = new Runner({ store, durability: system.durability })
    const agent = buildAgent(n)
    const cpu = process.cpuUsage()
    const start = process.hrtime.bigint()
    const result = await runner.run(agent, { input: PROMPT, runId: 'step-run' })
    const timing = timingSince(start, cpu)
    if (result.state !== 'completed' || result.toolCalls !== n) throw new Error(`${system.id} ended ${result.state} after ${result.toolCalls} tool calls`)
    return timing
  } finally {
    await store.close()
    await rm(location, { recursive: true, force: true })
    if (system.backend === 'postgres') await dropSchema(schema)
  }
}

function openStore(backend: Backend, location: string, schema: string): CheckpointStore {
  switch (backend) {
    case 'memory':
      return new MemoryStore()
    case 'file':
      return new FileStore({ directory: join(location, 'store') })
    case 'sqlite':
      return new SqliteStore({ path: join(location, 'cairn.db') })
    case 'sqlitenormal':
      return new SqliteStore({ path: join(location, 'cairn.db'), synchronous: 'normal' })
    case 'postgres':
      return new PostgresStore({ connectionString: PG_URL, schema })
  }
}

async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  } finally {
    await client.end()
  }
}

function progress(line: string): void {
  process.stderr.write(`${line}\n`)
}

await main()
