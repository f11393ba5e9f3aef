/**
 * CairnSaver against LangGraph's delta channel, in one process, by CPU time as well as wall time:
 * `npx tsx bench/peers/saver-steps.ts [n ...]` (default: 200 500 1000). The peers benchmark's graph
 * (systems/langgraph.ts) is run with no checkpointer, with the delta channel on SqliteSaver, and on
 * CairnSaver over SqliteStore at the same `synchronous` level (read from SqliteSaver's connection);
 * with SAVER_PG=1 also on PostgresSaver with the delta channel and CairnSaver over PostgresStore,
 * both on the same database at the server's `synchronous_commit` (read and shown in their rows).
 * The systems take turns, SAVER_TRIALS times each (default 3), and the fastest trial of each is
 * kept: on a shared machine, others' work slows a run down and never speeds it up. Prints, per n:
 * the run's wall and CPU time, the time added per superstep over the graph without a checkpointer
 * (the delta rows over the graph with the delta channel), and for each saver its calls (put,
 * putWrites) and the time spent in them.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { loadavg, tmpdir } from 'node:os'
import pg from 'pg'
import { join } from 'node:path'
import type { BaseCheckpointSaver } from '@langchain/langgraph'
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite'
import { CairnSaver } from '../../src/langgraph.js'
import { PostgresStore } from '../../src/postgres.js'
import { SqliteStore } from '../../src/sqlite.js'
import { dropSchema, ensureDatabases, pgUrl, PG_DATABASES, postgresProblem } from './pg-admin.js'
import { buildGraph, config, input, sqliteSaverSynchronous } from './systems/langgraph.js'
import { CycleClock, stepsOf } from './workload.js'

const sizes = process.argv.length > 2 ? process.argv.slice(2).map(Number) : [200, 500, 1000]
const trials = Number(process.env.SAVER_TRIALS ?? 3)
const withPostgres = process.env.SAVER_PG === '1'

interface Opened {
  saver: BaseCheckpointSaver | undefined
  close(): Promise<void>
}

interface System {
  id: string
  /** The graph's messages field: the delta channel, or LangGraph's plain messages channel. */
  delta: boolean
  open(location: string, schema: string): Promise<Opened>
}

/** Time spent inside one saver method, and how many calls. */
interface MethodTime {
  calls: number
  ms: number
}

interface Trial {
  wallMs: number
  cpuMs: number
  methods: Record<string, MethodTime>
}

const root = await mkdtemp(join(tmpdir(), 'cairn-saver-steps-'))
const synchronous = await sqliteSaverSynchronous(root)
if (withPostgres) {
  const problem = await postgresProblem()
  if (problem) throw new Error(problem)
  await ensureDatabases()
}
const synchronousCommit = withPostgres ? await postgresSynchronousCommit() : ''

const none: Opened = { saver: undefined, close: async () => {} }
const systems: System[] = [
  { id: 'no checkpointer', delta: false, open: async () => none },
  { id: 'no checkpointer, delta channel', delta: true, open: async () => none },
  {
    id: `SqliteSaver + delta (synchronous = ${synchronous.toUpperCase()})`,
    delta: true,
    open: async (location) => {
      const saver = SqliteSaver.fromConnString(join(location, 'langgraph.db'))
      return { saver, close: async () => void saver.db.close() }
    },
  },
  {
    id: `CairnSaver, SqliteStore (synchronous = ${synchronous.toUpperCase()})`,
    delta: false,
    open: async (location) => {
      const store = new SqliteStore({ path: join(location, 'cairn.db'), synchronous })
      return { saver: new CairnSaver({ store }) as unknown as BaseCheckpointSaver, close: () => store.close() }
    },
  },
]
if (withPostgres) {
  systems.push(
    {
      id: `PostgresSaver + delta (synchronous_commit = ${synchronousCommit})`,
      delta: true,
      open: async (_, schema) => {
        const { PostgresSaver } = await import('@langchain/langgraph-checkpoint-postgres')
        const saver = PostgresSaver.fromConnString(pgUrl(PG_DATABASES.langgraph), { schema })
        await saver.setup()
        return { saver, close: () => saver.end() }
      },
    },
    {
      id: `CairnSaver, PostgresStore (synchronous_commit = ${synchronousCommit})`,
      delta: false,
      open: async (_, schema) => {
        const store = new PostgresStore({ connectionString: pgUrl(PG_DATABASES.langgraph) }, { schema })
        return { saver: new CairnSaver({ store }) as unknown as BaseCheckpointSaver, close: () => store.close() }
      },
    },
  )
}

// SAVER_ONLY=CairnSaver (a prefix of the ids) keeps the baselines and the systems it names: for a CPU profile of one saver.
const only = process.env.SAVER_ONLY
if (only) systems.splice(0, systems.length, ...systems.filter((s) => s.id.startsWith('no checkpointer') || s.id.startsWith(only)))
console.log(`load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}; ${trials} trial(s) per system, fastest kept; SqliteSaver's connections run at synchronous = ${synchronous.toUpperCase()}`)
for (const n of sizes) {
  const best = new Map<string, Trial>()
  for (let trial = 0; trial < trials; trial++) {
    for (const system of systems) {
      const figures = await runOnce(system, n, `${trial}`)
      const kept = best.get(system.id)
      best.set(system.id, {
        wallMs: Math.min(kept?.wallMs ?? Infinity, figures.wallMs),
        cpuMs: Math.min(kept?.cpuMs ?? Infinity, figures.cpuMs),
        methods: kept && kept.cpuMs <= figures.cpuMs ? kept.methods : figures.methods,
      })
    }
  }
  const steps = stepsOf(n)
  console.log(`\nn = ${n} (${steps} supersteps), load average ${loadavg()[0]!.toFixed(2)}`)
  console.log(`${'system'.padEnd(50)} ${'wall ms'.padStart(8)} ${'cpu ms'.padStart(8)} ${'+wall µs/step'.padStart(14)} ${'+cpu µs/step'.padStart(13)}  in the saver (calls, µs per call)`)
  const added: Record<string, { wall: number; cpu: number }> = {}
  for (const system of systems) {
    const figures = best.get(system.id)!
    const base = best.get(system.delta ? 'no checkpointer, delta channel' : 'no checkpointer')!
    const isBase = system.id.startsWith('no checkpointer')
    const wall = ((figures.wallMs - base.wallMs) * 1000) / steps
    const cpu = ((figures.cpuMs - base.cpuMs) * 1000) / steps
    added[system.id] = { wall, cpu }
    const methods = Object.entries(figures.methods)
      .map(([name, m]) => `${name} ${m.calls} × ${((m.ms * 1000) / Math.max(1, m.calls)).toFixed(0)}`)
      .join(', ')
    console.log(
      `${system.id.padEnd(50)} ${figures.wallMs.toFixed(0).padStart(8)} ${figures.cpuMs.toFixed(0).padStart(8)} ${(isBase ? '' : wall.toFixed(0)).padStart(14)} ${(isBase ? '' : cpu.toFixed(0)).padStart(13)}  ${methods}`,
    )
  }
  const pairs = [['SqliteSaver + delta', 'CairnSaver, SqliteStore'], ...(withPostgres ? [['PostgresSaver + delta', 'CairnSaver, PostgresStore']] : [])]
  for (const [peer, cairn] of pairs) {
    const p = Object.entries(added).find(([id]) => id.startsWith(peer!))?.[1]
    const c = Object.entries(added).find(([id]) => id.startsWith(cairn!))?.[1]
    if (!p || !c) continue
    console.log(`${cairn} ÷ ${peer}: wall ${(c.wall / p.wall).toFixed(2)}×, cpu ${(c.cpu / p.cpu).toFixed(2)}×`)
  }
}
await rm(root, { recursive: true, force: true })

/** The `synchronous_commit` both Postgres savers' connections commit at (neither changes it). */
async function postgresSynchronousCommit(): Promise<string> {
  const client = new pg.Client({ connectionString: pgUrl(PG_DATABASES.langgraph) })
  await client.connect()
  try {
    return String((await client.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]?.synchronous_commit).toUpperCase()
  } finally {
    await client.end()
  }
}

async function runOnce(system: System, n: number, trial: string): Promise<Trial> {
  const location = await mkdtemp(join(root, 'run-'))
  const schema = `saver_steps_${process.pid}_${n}_${trial}`
  const opened = await system.open(location, schema)
  const methods: Record<string, MethodTime> = {}
  try {
    if (opened.saver) {
      // Warm the saver and the store up on another thread, then count and time every call of the measured one.
      await buildGraph(20, new CycleClock(), system.delta, opened.saver).invoke(input(), config(20, 'warmup'))
      for (const name of ['put', 'putWrites'] as const) {
        const saver = opened.saver as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>
        const method = saver[name]!.bind(saver)
        const time = (methods[name] = { calls: 0, ms: 0 })
        saver[name] = async (...args: unknown[]) => {
          const started = performance.now()
          try {
            return await method(...args)
          } finally {
            time.calls++
            time.ms += performance.now() - started
          }
        }
      }
    } else {
      await buildGraph(20, new CycleClock(), system.delta, undefined).invoke(input(), config(20, 'warmup'))
    }
    const graph = buildGraph(n, new CycleClock(), system.delta, opened.saver)
    const cpu = process.cpuUsage()
    const started = performance.now()
    const state = await graph.invoke(input(), config(n, 'measured'))
    const wallMs = performance.now() - started
    const used = process.cpuUsage(cpu)
    if ((state.messages as unknown[]).length !== 2 * n + 2) throw new Error(`${system.id}: the run ended with ${(state.messages as unknown[]).length} messages`)
    return { wallMs, cpuMs: (used.user + used.system) / 1000, methods }
  } finally {
    await opened.close()
    await rm(location, { recursive: true, force: true })
    if (system.id.includes('Postgres')) await dropSchema('langgraph', schema)
  }
}
