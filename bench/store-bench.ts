/**
 * Storage benchmark: `npm run bench:store`. For each backend and run length it saves a growing
 * conversation one checkpoint per step and reports save latency against a bare-SQLite floor,
 * bytes on disk, a cold `getLatest` and a history listing; then where save time goes. Results go
 * to stdout and to `bench/results/store.json`; progress goes to stderr.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { arch, cpus, platform, release } from 'node:os'
import { BACKENDS } from './backends.js'
import { MESSAGE_CHARS } from './messages.js'
import { measureSaveBreakdown, summarizeBreakdown, type BreakdownTrial } from './save-breakdown.js'
import { runSqliteFloor, type FloorTrial } from './sqlite-floor.js'
import { breakdownTable, resultTable } from './store-report.js'
import { saveOverFloor, summarizeFloor, summarizeWorkload } from './store-summary.js'
import { checkTargets, formatTargets, TARGETS } from './store-targets.js'
import { COLD_READS, LIST_REPEATS, runStoreWorkload, warmUpStore, type WorkloadTrial } from './store-workload.js'

const SIZES = [50, 200, 1000] as const
/** Each n is measured this many times, floor and backends interleaved, and the samples pooled. */
const TRIALS = 3
const WARMUP_SAVES = 200
const RESULTS_FILE = new URL('./results/store.json', import.meta.url)

const floorTrials: FloorTrial[] = []
const trials: WorkloadTrial[] = []
const breakdownTrials: BreakdownTrial[] = []
const failures: { backend: string; n: number; error: string }[] = []

progress(`warming up (${WARMUP_SAVES} throwaway saves per backend)`)
await runSqliteFloor(WARMUP_SAVES)
for (const backend of BACKENDS) await warmUpStore(backend, WARMUP_SAVES)

for (const n of SIZES) {
  for (let trial = 1; trial <= TRIALS; trial++) {
    progress(`n=${n}, trial ${trial}/${TRIALS}: floor, ${BACKENDS.map((b) => b.name).join(', ')}`)
    floorTrials.push(await runSqliteFloor(n))
    for (const backend of BACKENDS) {
      if (failures.some((f) => f.backend === backend.name && f.n === n)) continue
      try {
        trials.push(await runStoreWorkload(backend, n))
        breakdownTrials.push(await measureSaveBreakdown(backend, n))
      } catch (err) {
        failures.push({ backend: backend.name, n, error: (err as Error).stack ?? String(err) })
        progress(`n=${n}: ${backend.name} FAILED: ${(err as Error).message}`)
      }
    }
  }
}

const floors = SIZES.map((n) => summarizeFloor(floorTrials.filter((t) => t.n === n)))
const results = groups(trials).map(summarizeWorkload)
const breakdowns = groups(breakdownTrials).map(summarizeBreakdown)
const targets = checkTargets({ results, floors, backends: BACKENDS.map((b) => b.name), sizes: SIZES })

console.log(`\nCairn storage benchmark: one run of n checkpoints, one ${MESSAGE_CHARS}-char message added per step, ${TRIALS} trials pooled\n`)
console.log(resultTable(results, floors))
console.log('\nfloor: bare better-sqlite3 (WAL, synchronous=FULL, 8 KiB pages, default WAL checkpointing), one INSERT of')
console.log('       JSON.stringify({ messages }) per committed transaction; timed: stringify + insert + commit')
console.log('disk open: bytes with the writer open (SQLite: db + -wal + -shm); disk closed: after close()')
for (const failure of failures) console.log(`FAILED ${failure.backend} n=${failure.n}: ${failure.error}`)
console.log(`\nWhere save time goes (EngineStore over the same engine with its commit timed; separate runs, same trials)\n${breakdownTable(breakdowns)}`)
console.log(`\nTargets\n${formatTargets(targets)}`)

await mkdir(new URL('./', RESULTS_FILE), { recursive: true })
const report = {
  environment: { node: process.version, os: `${platform()} ${release()} ${arch()}`, cpu: cpus()[0]?.model ?? 'unknown', cpus: cpus().length, date: new Date().toISOString() },
  config: { sizes: SIZES, trials: TRIALS, messageChars: MESSAGE_CHARS, warmupSaves: WARMUP_SAVES, coldReads: COLD_READS, listRepeats: LIST_REPEATS, targets: TARGETS },
  results: results.map((r) => ({ ...r, saveOverFloor: saveOverFloor(r, floors) })),
  floor: floors,
  saveBreakdown: breakdowns,
  targets,
  failures,
}
await writeFile(RESULTS_FILE, `${JSON.stringify(report, null, 2)}\n`)
console.log(`\nwrote ${RESULTS_FILE.pathname}`)

/** Trials grouped by backend (in table order) and n, leaving out empty groups. */
function groups<T extends { backend: string; n: number }>(all: readonly T[]): T[][] {
  return BACKENDS.flatMap((backend) => SIZES.map((n) => all.filter((t) => t.backend === backend.name && t.n === n))).filter((g) => g.length > 0)
}

function progress(message: string): void {
  process.stderr.write(`[bench:store] ${message}\n`)
}
