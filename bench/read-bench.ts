/**
 * The read paths of a finished run, each in a fresh process, as `bench:peers` takes them: the
 * cold load (open the store, `getLatest`, and the newest checkpoint carrying the runtime snapshot
 * with its whole conversation: what `runner.resume` reads), the full history (`runner.history`:
 * every checkpoint with its decoded state) and then the header listing (`listCheckpoints`, paged
 * by 500, verified), on SQLite and Postgres, for runs of n = 50, 200, 500 and 1000 cycles of the
 * peers' workload.
 *
 *   npm run bench:read                          # every backend and size, 7 fresh processes each
 *   npm run bench:read -- --sizes 50,200 --backends sqlite --trials 5
 *   npm run bench:read -- --profile             # plus the top self-time entries of each section
 *   npm run bench:read -- --profile --top 20    # … the top 20 of them (default 8)
 *
 * Figures are medians over the trials; the runs are written once, before the trials.
 */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { Runner, type CheckpointStore } from '../src/index.js'
import { PostgresStore } from '../src/postgres.js'
import { SqliteStore } from '../src/sqlite.js'
import { summarizeProfile } from './peers/cpu-profile.js'
import { PG_SERVER } from './peers/pg-admin.js'
import { RUN_ID } from './peers/protocol.js'
import { buildAgent, loadLatestState } from './peers/systems/cairn.js'
import { CycleClock, PROMPT } from './peers/workload.js'
import { median } from './stats.js'

type Backend = 'sqlite' | 'postgres'

interface ChildArgs {
  backend: Backend
  n: number
  location: string
  schema: string
  out: string
}

interface ChildFigures {
  loadMs: number
  historyMs: number
  /** CPU time (user + system) of each section: steadier than wall time on a busy machine. */
  loadCpuMs: number
  historyCpuMs: number
  /** On-CPU time of the main thread alone (Linux), without GC helper and loader threads: steadier still. */
  loadMainMs: number
  historyMainMs: number
  entries: number
  sections: Record<'load' | 'history' | 'listing', [number, number]>
}

const DATABASE = 'cairn_bench_read'
const SELF = fileURLToPath(import.meta.url)

if (process.argv[2] === '--child') await child(JSON.parse(process.argv[3]!) as ChildArgs)
else await main()

async function main(): Promise<void> {
  const flag = (name: string) => {
    const at = process.argv.indexOf(`--${name}`)
    return at === -1 ? undefined : process.argv[at + 1]
  }
  const sizes = (flag('sizes') ?? '50,200,500,1000').split(',').map(Number)
  const backends = (flag('backends') ?? 'sqlite,postgres').split(',') as Backend[]
  const trials = Number(flag('trials') ?? 7)
  const profile = process.argv.includes('--profile')
  const top = Number(flag('top') ?? 8)
  if (backends.includes('postgres')) await ensureDatabase()
  const root = await mkdtemp(join(tmpdir(), 'cairn-read-bench-'))
  console.log(`read paths in fresh processes, median of ${trials} (ms; wall time, CPU time of the process, and on-CPU time of its main thread)`)
  console.log(`${'backend'.padEnd(9)} ${'n'.padStart(5)} ${'cold load'.padStart(10)} ${'(cpu)'.padStart(7)} ${'(main)'.padStart(7)} ${'history'.padStart(9)} ${'(cpu)'.padStart(7)} ${'(main)'.padStart(7)} ${'listing'.padStart(8)}  entries`)
  try {
    for (const backend of backends) {
      for (const n of sizes) {
        const args = { backend, n, location: join(root, `${backend}-${n}`), schema: `read_${n}`, out: join(root, 'out.json') }
        await prepare(args)
        const figures: ChildFigures[] = []
        for (let t = 0; t < trials; t++) figures.push(await runChild(args, []))
        const cell = (pick: (f: ChildFigures) => number, width: number) => median(figures.map(pick)).toFixed(1).padStart(width)
        const load = `${cell((f) => f.loadMs, 10)} ${cell((f) => f.loadCpuMs, 7)} ${cell((f) => f.loadMainMs, 7)}`
        const history = `${cell((f) => f.historyMs, 9)} ${cell((f) => f.historyCpuMs, 7)} ${cell((f) => f.historyMainMs, 7)}`
        const listing = cell((f) => (f.sections.listing[1] - f.sections.listing[0]) / 1000, 8)
        console.log(`${backend.padEnd(9)} ${String(n).padStart(5)} ${load} ${history} ${listing}  ${figures[0]!.entries}`)
        if (profile) await printProfile(args, root, top)
      }
    }
  } finally {
    await rm(root, { recursive: true, force: true })
  }
}

/** Write the run of `n` cycles once, with the runner the peers' bench uses. */
async function prepare(args: ChildArgs): Promise<void> {
  if (args.backend === 'postgres') await dropSchema(args.schema)
  else await mkdir(args.location, { recursive: true })
  const store = openStore(args)
  try {
    const result = await new Runner({ store }).run(buildAgent(args.n, new CycleClock()), { input: PROMPT, runId: RUN_ID })
    if (result.state !== 'completed') throw new Error(`the run of ${args.n} cycles ended ${result.state}`)
  } finally {
    await store.close()
  }
}

async function printProfile(args: ChildArgs, root: string, top: number): Promise<void> {
  const directory = join(root, `profile-${args.backend}-${args.n}`)
  const figures = await runChild(args, ['--cpu-prof', '--cpu-prof-interval', '100', '--cpu-prof-dir', directory])
  for (const section of ['load', 'history', 'listing'] as const) {
    const summary = await summarizeProfile(directory, figures.sections[section], top)
    console.log(`  ${section} (${summary.sectionMs.toFixed(1)} ms, sampled ${summary.sampledMs.toFixed(1)}): top self time`)
    for (const entry of summary.byFunction) console.log(`    ${entry.ms.toFixed(2).padStart(7)} ms ${(entry.share * 100).toFixed(0).padStart(3)}%  ${entry.name}`)
  }
  await rm(directory, { recursive: true, force: true })
}

function runChild(args: ChildArgs, nodeFlags: readonly string[]): Promise<ChildFigures> {
  const child = spawn(process.execPath, [...process.execArgv, ...nodeFlags, SELF, '--child', JSON.stringify(args)], { stdio: ['ignore', 'inherit', 'inherit'] })
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`the ${args.backend} n=${args.n} child exited with code ${code}`))
      readFile(args.out, 'utf8').then((text) => resolve(JSON.parse(text) as ChildFigures), reject)
    })
  })
}

/** One fresh process: the cold load, then the full history, each timed. */
async function child(args: ChildArgs): Promise<void> {
  const now = () => Number(process.hrtime.bigint() / 1000n)
  const cpuMs = (since: NodeJS.CpuUsage) => {
    const used = process.cpuUsage(since)
    return (used.user + used.system) / 1000
  }
  const loadStart = now()
  const loadCpu = process.cpuUsage()
  const loadMain = mainThreadMs()
  const store = openStore(args)
  await loadLatestState(store, args.n)
  const loadEnd = now()
  const loadCpuMs = cpuMs(loadCpu)
  const historyMain = mainThreadMs()
  const historyCpu = process.cpuUsage()
  const history = await new Runner({ store }).history(RUN_ID)
  const historyEnd = now()
  const historyCpuMs = cpuMs(historyCpu)
  const historyMainEnd = mainThreadMs()
  // The header listing, paged as a client pages it.
  for (let before: string | undefined; ; ) {
    const page = await store.listCheckpoints({ runId: RUN_ID, limit: 500, ...(before === undefined ? {} : { before }) })
    if (page.length < 500) break
    before = page.at(-1)!.id
  }
  const listingEnd = now()
  await store.close()
  const figures: ChildFigures = {
    loadMs: (loadEnd - loadStart) / 1000,
    historyMs: (historyEnd - loadEnd) / 1000,
    loadCpuMs,
    historyCpuMs,
    loadMainMs: historyMain - loadMain,
    historyMainMs: historyMainEnd - historyMain,
    entries: history.length,
    sections: { load: [loadStart, loadEnd], history: [loadEnd, historyEnd], listing: [historyEnd, listingEnd] },
  }
  await writeFile(args.out, JSON.stringify(figures))
}

/** Milliseconds the main thread has spent on a CPU (Linux scheduler statistics; NaN elsewhere). */
function mainThreadMs(): number {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6
  } catch {
    return Number.NaN
  }
}

function openStore(args: ChildArgs): CheckpointStore {
  if (args.backend === 'sqlite') return new SqliteStore({ path: join(args.location, 'cairn.db') })
  return new PostgresStore({ connectionString: `${PG_SERVER}/${DATABASE}`, schema: args.schema })
}

async function ensureDatabase(): Promise<void> {
  await withClient('postgres', async (client) => {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE])
    if (found.rowCount === 0) await client.query(`CREATE DATABASE ${DATABASE}`)
  })
}

async function dropSchema(schema: string): Promise<void> {
  await withClient(DATABASE, (client) => client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`))
}

async function withClient<T>(database: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: `${PG_SERVER}/${database}` })
  await client.connect()
  try {
    return await fn(client)
  } finally {
    await client.end()
  }
}
