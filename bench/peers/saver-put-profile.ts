/**
 * Where CairnSaver's time per superstep goes, without the graph around it: the peers benchmark's
 * graph (bench/peers/systems/langgraph.ts, n cycles) is run once on MemorySaver while every
 * `put` and `putWrites` it makes is recorded, then the recorded calls are replayed, in order and
 * one at a time, into fresh savers: CairnSaver over SqliteStore and over MemoryStore, and
 * SqliteSaver on the delta channel's recording. Prints, per system, the CPU time per superstep
 * (the fastest of the rounds: others' work on a shared machine only slows a round down); for
 * CairnSaver over SQLite, the CPU inside its SQL statements and inside its transactions
 * (BEGIN … COMMIT, the statements included) by kind of transaction; and for both SQLite savers
 * the WAL frames each superstep writes, by b-tree (a frame is one page written again), and the
 * wall time of its transactions' BEGIN and COMMIT by percentile: a commit that crosses the
 * auto-checkpoint threshold also syncs the log and copies it into the database, the tail.
 *
 *   npx tsx bench/peers/saver-put-profile.ts [n] [rounds]     (default: 200 5; synchronous = NORMAL on both)
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type BetterSqlite3 from 'better-sqlite3'
import { MemorySaver, type BaseCheckpointSaver } from '@langchain/langgraph'
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite'
import { CairnSaver } from '../../src/langgraph.js'
import { MemoryStore } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { buildGraph, config, input } from './systems/langgraph.js'
import { CycleClock } from './workload.js'

const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3
const n = Number(process.argv[2] ?? 200)
const rounds = Number(process.argv[3] ?? 5)
const supersteps = 2 * n + 1

type Call = { method: 'put' | 'putWrites'; args: unknown[] }
type Opened = { saver: BaseCheckpointSaver; db?: BetterSqlite3.Database; close(): Promise<void> }

/** CairnSaver is typed against the package's copy of LangGraph's checkpoint types; the graph here uses the peers' copy, the same API. */
function asPeerSaver(saver: CairnSaver): BaseCheckpointSaver {
  return saver as unknown as BaseCheckpointSaver
}

/** The saver calls of one run of the graph (on the delta channel or LangGraph's plain messages channel). */
async function record(delta: boolean, threadId: string): Promise<Call[]> {
  const saver = new MemorySaver()
  const calls: Call[] = []
  const methods = saver as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>
  for (const method of ['put', 'putWrites'] as const) {
    const original = methods[method]!.bind(saver)
    methods[method] = (...args: unknown[]) => {
      calls.push({ method, args })
      return original(...args)
    }
  }
  // This directory's LangGraph and the peers' own copy differ only by identity: the graph takes it as its own.
  await buildGraph(n, new CycleClock(), delta, saver as unknown as Parameters<typeof buildGraph>[3]).invoke(input(), config(n, threadId))
  return calls
}

async function replay(saver: BaseCheckpointSaver, calls: readonly Call[], threadId: string): Promise<void> {
  const methods = saver as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>
  for (const { method, args } of calls) {
    const [first, ...rest] = args as [{ configurable: Record<string, unknown> }, ...unknown[]]
    await methods[method]!({ ...first, configurable: { ...first.configurable, thread_id: threadId } }, ...rest)
  }
}

/** CPU µs spent in each statement and each transaction of a connection, while `counting`. */
const cpu = new Map<string, { calls: number; us: number }>()
/** Wall µs of each transaction outside its work (BEGIN and COMMIT, with any checkpoint), while `counting`. */
const commits: number[] = []
let counting = false
function count(key: string, started: NodeJS.CpuUsage): void {
  if (!counting) return
  const used = process.cpuUsage(started)
  const entry = cpu.get(key) ?? { calls: 0, us: 0 }
  entry.calls++
  entry.us += used.user + used.system
  cpu.set(key, entry)
}

/** Time every statement the connection prepares and every transaction it runs (by the statements it ran first). */
function instrument(db: BetterSqlite3.Database): void {
  const prepare = db.prepare.bind(db)
  let current: string[] = []
  db.prepare = ((source: string) => {
    const statement = prepare(source)
    const label = source.replace(/\s+/g, ' ').trim().slice(0, 48)
    for (const method of ['run', 'get', 'all'] as const) {
      const original = statement[method].bind(statement)
      ;(statement as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
        const started = process.cpuUsage()
        try {
          return original(...args)
        } finally {
          current.push(label.split(' ').slice(0, 3).join(' '))
          count(`  statement ${label}`, started)
        }
      }
    }
    return statement
  }) as typeof db.prepare
  const transaction = db.transaction.bind(db)
  db.transaction = ((fn: (...args: unknown[]) => unknown) => {
    let inside = 0
    const timed = (...args: unknown[]) => {
      const from = performance.now()
      try {
        return fn(...args)
      } finally {
        inside = performance.now() - from
      }
    }
    const made = transaction(timed) as unknown as Record<string, (...args: unknown[]) => unknown>
    const wrapped = ((...args: unknown[]) => wrapped.deferred!(...args)) as unknown as Record<string, (...args: unknown[]) => unknown>
    for (const mode of ['deferred', 'immediate'] as const) {
      const original = made[mode]!.bind(made)
      wrapped[mode] = (...args: unknown[]) => {
        const started = process.cpuUsage()
        current = []
        inside = 0
        const from = performance.now()
        try {
          return original(...args)
        } finally {
          if (counting) commits.push((performance.now() - from - inside) * 1000)
          count(`transaction (${current[current.length - 1] ?? 'nothing'} …)`, started)
        }
      }
    }
    return wrapped
  }) as unknown as typeof db.transaction
}

const dir = mkdtempSync(join(tmpdir(), 'cairn-saver-profile-'))
const systems: Record<string, { delta: boolean; open(file: string, timed: boolean): Opened }> = {
  'CairnSaver, SqliteStore': {
    delta: false,
    open: (file, timed) => {
      const db = new Database(file)
      if (timed) instrument(db)
      const store = new SqliteStore({ database: db, synchronous: 'normal' })
      return { saver: asPeerSaver(new CairnSaver({ store })), db, close: () => store.close() }
    },
  },
  'CairnSaver, MemoryStore': {
    delta: false,
    open: () => {
      const store = new MemoryStore()
      return { saver: asPeerSaver(new CairnSaver({ store })), close: () => store.close() }
    },
  },
  'SqliteSaver + delta': {
    delta: true,
    open: (file) => {
      // better-sqlite3's default for a WAL database is synchronous = NORMAL, as the store above is given.
      const saver = SqliteSaver.fromConnString(file)
      return { saver, db: saver.db, close: async () => void saver.db.close() }
    },
  },
}

const recorded = { plain: await record(false, 'recorded'), delta: await record(true, 'recorded') }
const warmup = { plain: await record(false, 'warmup'), delta: await record(true, 'warmup') }
const best = new Map<string, number>()
let file = 0
for (let round = 0; round <= rounds; round++) {
  for (const [id, system] of Object.entries(systems)) {
    // One more round times the SQLite store's statements; the others run untouched.
    const timed = round === rounds && id === 'CairnSaver, SqliteStore'
    const opened = system.open(join(dir, `${file++}.db`), timed)
    const calls = system.delta ? recorded.delta : recorded.plain
    await replay(opened.saver, system.delta ? warmup.delta : warmup.plain, 'warmup')
    const started = process.cpuUsage()
    counting = timed
    await replay(opened.saver, calls, 'measured')
    counting = false
    const used = process.cpuUsage(started)
    if (!timed) best.set(id, Math.min(best.get(id) ?? Infinity, (used.user + used.system) / supersteps))
    await opened.close()
  }
}

console.log(`n = ${n} (${supersteps} supersteps), ${rounds} rounds, the recorded calls replayed one at a time`)
for (const [id, us] of best) console.log(`${id.padEnd(26)} ${us.toFixed(0).padStart(6)} µs CPU per superstep`)
console.log(`CairnSaver over SQLite, one more round, CPU per superstep:`)
for (const [key, { calls, us }] of [...cpu].sort((a, b) => b[1].us - a[1].us)) {
  console.log(`${(us / supersteps).toFixed(1).padStart(8)} µs  ${String(calls).padStart(6)} × ${(us / calls).toFixed(1).padStart(6)} µs  ${key}`)
}

commits.sort((a, b) => a - b)
const at = (q: number) => commits[Math.min(commits.length - 1, Math.floor(q * commits.length))]!.toFixed(0)
const mean = commits.reduce((sum, us) => sum + us, 0) / commits.length
console.log(`BEGIN + COMMIT wall µs of ${commits.length} transactions: mean ${mean.toFixed(0)}, p50 ${at(0.5)}, p90 ${at(0.9)}, p99 ${at(0.99)}, max ${at(1)}`)

// WAL frames: replay once more with checkpoints of the WAL turned off, then read the frames back.
for (const [id, system] of Object.entries(systems)) {
  const path = join(dir, `wal-${file++}.db`)
  const opened = system.open(path, false)
  if (!opened.db) continue
  await opened.saver.getTuple({ configurable: { thread_id: 'open' } })
  opened.db.pragma('wal_autocheckpoint = 0')
  opened.db.pragma('wal_checkpoint(TRUNCATE)')
  await replay(opened.saver, system.delta ? recorded.delta : recorded.plain, 'measured')
  const pageSize = opened.db.pragma('page_size', { simple: true }) as number
  const names = new Map<number, string>()
  for (const row of opened.db.prepare('SELECT name, pageno FROM dbstat').all() as { name: string; pageno: number }[]) names.set(row.pageno, row.name)
  const wal = readFileSync(`${path}-wal`)
  const byTree = new Map<string, number>()
  let frames = 0
  let commits = 0
  for (let offset = 32; offset + 24 + pageSize <= wal.length; offset += 24 + pageSize) {
    const name = names.get(wal.readUInt32BE(offset)) ?? 'freed page'
    byTree.set(name, (byTree.get(name) ?? 0) + 1)
    frames++
    if (wal.readUInt32BE(offset + 4) !== 0) commits++
  }
  await opened.close()
  const trees = [...byTree].sort((a, b) => b[1] - a[1]).map(([name, k]) => `${name} ${(k / supersteps).toFixed(2)}`)
  console.log(`${id}: page size ${pageSize}, ${(commits / supersteps).toFixed(2)} commits and ${(frames / supersteps).toFixed(2)} WAL frames (${((frames * (pageSize + 24)) / supersteps / 1024).toFixed(1)} KiB) per superstep: ${trees.join(', ')}`)
}
rmSync(dir, { recursive: true, force: true })
