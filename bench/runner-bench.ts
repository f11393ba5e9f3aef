/**
 * Runner benchmark: `npm run bench:runner`. One agent loop of 200 tool cycles (each: a scripted
 * model turn asking for one tool with a ~1 KB result; the conversation grows ~2 KB a cycle),
 * run three ways — bare (`agent.invoke`, no persistence), under a Runner with `async`
 * durability and with `sync` durability on SQLite — and, in the same run, the commit floor (a
 * bare better-sqlite3 small-row insert-and-commit). Trials interleave the modes; the table shows
 * medians over trials. Results go to stdout and `bench/results/runner.json`; progress to stderr.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { arch, cpus, platform, release } from 'node:os'
import { formatBytes, formatNumber, formatTable } from './format-table.js'
import { measureCommitFloor } from './runner-floor.js'
import { runLoop, TURN_CHARS, type LoopTrial, type Mode } from './runner-workload.js'
import { median } from './stats.js'

const CYCLES = 200
const TRIALS = Number(process.env.CAIRN_BENCH_TRIALS ?? 7)
const FLOOR_COMMITS = 200
const WARMUP_CYCLES = 40
const TARGETS = { asyncMicrosPerCheckpoint: 50, syncOverFloor: 2.5, syncCommitOverSameSizeFloor: 1.5 }
const RESULTS_FILE = new URL('./results/runner.json', import.meta.url)
const MODES: readonly Mode[] = ['none', 'async', 'sync']

interface Trial {
  loops: Record<Mode, LoopTrial>
  floorMicros: number
  /** The floor of a commit of one turn's text (TURN_CHARS): what each sync durability point stores at least. */
  turnFloorMicros: number
}

progress(`warming up (${WARMUP_CYCLES} cycles per mode)`)
for (const mode of MODES) await runLoop(mode, WARMUP_CYCLES)
await measureCommitFloor(50)

const trials: Trial[] = []
for (let t = 0; t < TRIALS; t++) {
  progress(`trial ${t + 1}/${TRIALS}`)
  // Rotate the order of the modes so that drift (page cache, CPU boost, neighbours) spreads evenly.
  const order = MODES.map((_, i) => MODES[(i + t) % MODES.length]!)
  const loops = {} as Record<Mode, LoopTrial>
  for (const mode of order) loops[mode] = await runLoop(mode, CYCLES)
  trials.push({ loops, floorMicros: await measureCommitFloor(FLOOR_COMMITS), turnFloorMicros: await measureCommitFloor(FLOOR_COMMITS, TURN_CHARS) })
}

const summary = summarize(trials)
const targets = [
  {
    name: `async adds ≤ ${TARGETS.asyncMicrosPerCheckpoint} µs per checkpoint`,
    value: summary.async.overheadPerCheckpoint,
    limit: TARGETS.asyncMicrosPerCheckpoint,
    shown: `${formatNumber(summary.async.overheadPerCheckpoint, 1)} µs per checkpoint (${formatNumber(summary.async.checkpointsPerCycle, 2)} checkpoints a cycle)`,
  },
  {
    name: `sync costs ≤ ${TARGETS.syncOverFloor}× the floor per cycle`,
    value: summary.syncOverFloor,
    limit: TARGETS.syncOverFloor,
    shown: `${formatNumber(summary.syncOverFloor, 2)}× (${formatNumber(summary.sync.overheadPerCycle)} µs a cycle ÷ floor ${formatNumber(summary.floorMicros)} µs)`,
  },
  {
    name: `each sync commit costs ≤ ${TARGETS.syncCommitOverSameSizeFloor}× the floor of a commit of one turn`,
    value: summary.syncCommitOverTurnFloor,
    limit: TARGETS.syncCommitOverSameSizeFloor,
    shown: `${formatNumber(summary.syncCommitOverTurnFloor, 2)}× (${formatNumber(summary.sync.overheadPerCycle)} µs a cycle ÷ ${formatNumber(summary.sync.commitsPerCycle, 2)} commits ÷ floor ${formatNumber(summary.turnFloorMicros)} µs)`,
  },
].map((target) => ({ ...target, pass: target.value <= target.limit }))

const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, ${platform()} ${release()} ${arch()}, node ${process.version}`
console.log(`\nCairn runner benchmark: ${CYCLES} tool cycles on SQLite (WAL, synchronous=FULL), ${TRIALS} trials, medians`)
console.log(`machine: ${machine} (a shared 2-core VM: expect noise; the range column shows it)\n`)
console.log(modeTable(summary))
console.log(`\nfloor: one small-row INSERT + COMMIT on bare better-sqlite3 (WAL, synchronous=FULL): ${formatNumber(summary.floorMicros)} µs (median of ${FLOOR_COMMITS} × ${TRIALS})`)
console.log(`turn floor: the same with a row of one turn's ${TURN_CHARS} characters: ${formatNumber(summary.turnFloorMicros)} µs`)
console.log('overhead: the mode\'s time minus the no-persistence loop\'s in the same trial; checkpoints: runner.history(runId).length;')
console.log('commits: RunResult.commits (the checkpoint writer\'s durable commits); SQLite txns and µs: write transactions timed inside')
console.log('SQLite (fsync included), on the loop\'s thread; other: the overhead the loop spent outside SQLite (snapshots, encoding, the')
console.log('writer), i.e. minus SQLite\'s time')
const last = trials[trials.length - 1]!.loops
console.log(
  `storage: list items stored for a ${formatBytes(last.none.conversationBytes)} conversation: ${formatBytes(last.async.listItemBytes)} (async), ` +
    `${formatBytes(last.sync.listItemBytes)} (sync); linear storage keeps each message about once`,
)
console.log(`\nTargets`)
for (const target of targets) console.log(`  ${target.pass ? 'PASS' : 'FAIL'}  ${target.name}: ${target.shown}`)

await mkdir(new URL('./', RESULTS_FILE), { recursive: true })
const report = {
  environment: { node: process.version, os: `${platform()} ${release()} ${arch()}`, cpu: cpus()[0]?.model ?? 'unknown', cpus: cpus().length, date: new Date().toISOString() },
  config: { cycles: CYCLES, trials: TRIALS, turnChars: TURN_CHARS, floorCommits: FLOOR_COMMITS, warmupCycles: WARMUP_CYCLES, targets: TARGETS },
  summary,
  targets,
  trials,
}
await writeFile(RESULTS_FILE, `${JSON.stringify(report, null, 2)}\n`)
console.log(`\nwrote ${RESULTS_FILE.pathname}`)

interface ModeSummary {
  totalMs: number
  perCycle: number
  overheadPerCycle: number
  overheadRange: [number, number]
  checkpointsPerCycle: number
  overheadPerCheckpoint: number
  commitsPerCycle: number
  sqliteTransactionsPerCycle: number
  sqlitePerCycle: number
  otherPerCycle: number
}

/** Medians over trials; overheads are paired with the no-persistence loop of the same trial. */
function summarize(all: readonly Trial[]): Record<Mode, ModeSummary> & { floorMicros: number; syncOverFloor: number; turnFloorMicros: number; syncCommitOverTurnFloor: number } {
  const of = (mode: Mode): ModeSummary => {
    const per = (f: (trial: Trial, loop: LoopTrial) => number) => all.map((trial) => f(trial, trial.loops[mode]))
    const overheads = per((trial, loop) => (loop.micros - trial.loops.none.micros) / CYCLES)
    return {
      totalMs: median(per((_, loop) => loop.micros / 1000)),
      perCycle: median(per((_, loop) => loop.micros / CYCLES)),
      overheadPerCycle: median(overheads),
      overheadRange: [Math.min(...overheads), Math.max(...overheads)],
      checkpointsPerCycle: median(per((_, loop) => loop.checkpoints / CYCLES)),
      overheadPerCheckpoint: mode === 'none' ? 0 : median(per((trial, loop) => (loop.micros - trial.loops.none.micros) / loop.checkpoints)),
      commitsPerCycle: median(per((_, loop) => loop.commits / CYCLES)),
      sqliteTransactionsPerCycle: median(per((_, loop) => loop.sqliteTransactions / CYCLES)),
      sqlitePerCycle: median(per((_, loop) => loop.sqliteMicros / CYCLES)),
      // What the loop spent outside SQLite: the transactions run on the loop's thread.
      otherPerCycle: median(per((trial, loop) => (loop.micros - trial.loops.none.micros - loop.sqliteMicros) / CYCLES)),
    }
  }
  return {
    none: of('none'),
    async: of('async'),
    sync: of('sync'),
    floorMicros: median(all.map((trial) => trial.floorMicros)),
    syncOverFloor: median(all.map((trial) => (trial.loops.sync.micros - trial.loops.none.micros) / CYCLES / trial.floorMicros)),
    turnFloorMicros: median(all.map((trial) => trial.turnFloorMicros)),
    syncCommitOverTurnFloor: median(all.map((trial) => (trial.loops.sync.micros - trial.loops.none.micros) / trial.loops.sync.commits / trial.turnFloorMicros)),
  }
}

function modeTable(summary: Record<Mode, ModeSummary>): string {
  const columns = [
    { header: 'mode', align: 'left' as const },
    { header: 'total ms' },
    { header: 'µs/cycle' },
    { header: 'overhead µs/cycle' },
    { header: 'range' },
    { header: 'checkpoints/cycle' },
    { header: 'overhead µs/checkpoint' },
    { header: 'commits/cycle' },
    { header: 'SQLite txns/cycle' },
    { header: 'SQLite µs/cycle' },
    { header: 'other µs/cycle' },
  ]
  const names: Record<Mode, string> = {
    none: 'no persistence',
    async: 'runner async',
    sync: 'runner sync',
  }
  const rows = MODES.map((mode) => {
    const s = summary[mode]
    if (mode === 'none') return [names[mode], formatNumber(s.totalMs, 1), formatNumber(s.perCycle), '–', '–', '0', '–', '0', '0', '0', '–']
    return [
      names[mode],
      formatNumber(s.totalMs, 1),
      formatNumber(s.perCycle),
      formatNumber(s.overheadPerCycle),
      `${formatNumber(s.overheadRange[0])}–${formatNumber(s.overheadRange[1])}`,
      formatNumber(s.checkpointsPerCycle, 2),
      formatNumber(s.overheadPerCheckpoint, 1),
      formatNumber(s.commitsPerCycle, 2),
      formatNumber(s.sqliteTransactionsPerCycle, 2),
      formatNumber(s.sqlitePerCycle),
      formatNumber(s.otherPerCycle),
    ]
  })
  return formatTable(columns, rows)
}

function progress(message: string): void {
  process.stderr.write(`[bench:runner] ${message}\n`)
}
