/**
 * The crash-torture harness (`npm run torture`). For each durability it runs the scripted agent
 * once without a crash (the reference, which also lists every kill point the run reaches), then
 * plays crash scenarios in parallel child processes: a SIGKILL at every named kill point, and at
 * random instants, each followed by resumes in fresh processes until the run completes. Every
 * scenario is checked against the reference; the tally is printed at the end.
 *
 *   npx tsx torture/harness.ts                 # full: every kill point occurrence, both durabilities, 1,000 random kills, every ownership race 20 times
 *   npx tsx torture/harness.ts --short         # CI size: every kill point name once, 50 random kills, every ownership race once
 *   npx tsx torture/harness.ts --races 0       # no ownership races (see races.ts)
 *   npx tsx torture/harness.ts --random 200 --lanes 4 --seed 7 --keep-failed --json tally.json
 *   npx tsx torture/harness.ts --short --only tool:charge_card --tsx   # some named points, workers through tsx
 *   npx tsx torture/harness.ts --races 200 --race-cases zombie --race-backends postgres --lanes 2   # only these races, no crash scenarios
 *   npx tsx torture/harness.ts --streams-only --streams 20 --stream-backends sqlite   # only stream kills (see stream-kills.ts)
 *
 * Stream kills (`--streams`, 40 in full, 4 with --short): the writer of a streamed answer is
 * SIGKILLed mid-answer and resumed by another process while three readers follow with cursors.
 *
 * Wake kills (`--wakes`, 40 in full, 4 with --short; `--wakes-only`, `--wake-backends sqlite`): a
 * run enqueued to worker processes sleeps, and a worker is SIGKILLed just before its wake, at the
 * wake's claim, or just after the code after the sleep started or applied its effect; another
 * worker takes over (see wake-kills.ts).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { isDeepStrictEqual, parseArgs } from 'node:util'
import { checkReference, referenceOf, type Reference } from './checks.js'
import { runWorker, TSX_WORKER, type WorkerCommand } from './child.js'
import { compileWorker } from './compile.js'
import type { TraceEntry } from './kill-switch.js'
import { formatRaceTally, runRaces, type RaceTally } from './races.js'
import { playScenario, type Scenario, type ScenarioReport } from './scenario.js'
import { EffectLog } from './side-effects.js'
import { formatStreamKillTally, runStreamKills, type StreamKillTally } from './stream-kills.js'
import { formatWakeKillTally, runWakeKills, type WakeKillTally } from './wake-kills.js'

type Durability = 'sync' | 'async'

/** How big a torture run is. */
export interface TortureOptions {
  durabilities: readonly Durability[]
  /** `every`: every occurrence of every kill point; `each-name`: each point name once per run role. */
  named: 'every' | 'each-name'
  /** Random SIGKILLs to land (kills that hit a process before it finished). */
  randomKills: number
  /** Scenarios played at once. */
  lanes: number
  seed: number
  /** Keep the directory of a failed scenario for inspection. */
  keepFailed?: boolean
  timeoutMs?: number
  /** Run workers through tsx instead of compiling them to JavaScript first (slower). */
  tsx?: boolean
  /** Play only the named scenarios whose id contains this (debugging). */
  only?: string
  /**
   * Play at most this many named scenarios (a bounded sample for the test suite): the kills inside
   * tool calls first (they leave unknown outcomes to answer), then others spread evenly over the run.
   */
  namedLimit?: number
  log?: (line: string) => void
}

/** The outcome of a torture run. */
export interface Tally {
  scenarios: number
  namedScenarios: number
  randomScenarios: number
  namedKills: number
  randomKills: number
  /** Named kill points that a scenario's process did not reach (async write timing can move a batch). */
  missedNamedKills: number
  processes: number
  resumes: number
  replays: number
  unknownSurfaced: number
  retried: number
  skipped: number
  idempotentReruns: number
  /** Kill point names reached by the reference runs and played as scenarios. */
  pointsCovered: string[]
  failures: { scenario: string; problems: string[]; dir: string }[]
  durationMs: number
}

/** Run the torture suite and return its tally. */
export async function runTorture(options: TortureOptions): Promise<Tally> {
  const started = performance.now()
  const compiled = options.tsx ? undefined : await compileWorker()
  try {
    const tally = await torture(options, compiled ? [compiled.script] : TSX_WORKER)
    tally.durationMs = performance.now() - started
    return tally
  } finally {
    await compiled?.dispose()
  }
}

async function torture(options: TortureOptions, command: WorkerCommand): Promise<Tally> {
  const log = options.log ?? (() => {})
  const timeoutMs = options.timeoutMs ?? 60_000
  const tally = emptyTally()
  const references = new Map<Durability, { reference: Reference; trace: TraceEntry[]; runMs: number }>()
  for (const durability of options.durabilities) {
    const made = await referenceRun(command, durability, timeoutMs)
    references.set(durability, made)
    log(`reference ${durability}: ${made.trace.length} kill point instants, run ${made.runMs.toFixed(0)} ms`)
  }
  const [first, ...others] = [...references.values()]
  for (const other of others) {
    if (!isDeepStrictEqual(first?.reference.transcripts, other.reference.transcripts)) throw new Error('the reference transcripts differ between durabilities')
  }

  const all = [...references]
    .flatMap(([durability, { trace }]) => namedScenarios(durability, trace, options.named, tally))
    .filter((scenario) => options.only === undefined || scenario.id.includes(options.only))
  const named = options.namedLimit === undefined ? all : sampleNamed(all, options.namedLimit)
  const record = (report: ScenarioReport) => {
    addToTally(tally, report)
    if (report.failures.length > 0 && tally.failures.length <= 20) log(`FAIL ${report.scenario.id}: ${report.failures.join('; ')}`)
    if (tally.scenarios % 50 === 0) log(`${tally.scenarios} scenarios, ${tally.namedKills + tally.randomKills} kills, ${tally.failures.length} failures`)
  }
  const play = (scenario: Scenario) => playScenario(scenario, references.get(scenario.durability)!.reference, { command, timeoutMs, keepFailed: options.keepFailed === true })
  let queue = named[Symbol.iterator]()
  await pool(options.lanes, () => queue.next().value, play, record)

  const random = randomScenarios(options, references, () => tally.randomKills)
  queue = random[Symbol.iterator]()
  await pool(options.lanes, () => queue.next().value, play, record)
  return tally
}

/** The tally as the lines `npm run torture` prints. */
export function formatTally(tally: Tally): string {
  const lines = [
    `scenarios            ${tally.scenarios} (${tally.namedScenarios} at named kill points, ${tally.randomScenarios} with random kills)`,
    `kills                ${tally.namedKills + tally.randomKills} (${tally.namedKills} named, ${tally.randomKills} random; ${tally.missedNamedKills} named points not reached)`,
    `worker processes     ${tally.processes} (${tally.resumes} resumes)`,
    `replayed tool calls  ${tally.replays}`,
    `unknown outcomes     ${tally.unknownSurfaced} surfaced (${tally.retried} answered retry, ${tally.skipped} skip)`,
    `idempotent re-runs   ${tally.idempotentReruns} (same key, deduplicated by the effect log)`,
    `kill point names     ${tally.pointsCovered.length}: ${[...tally.pointsCovered].sort().join(', ')}`,
    `failures             ${tally.failures.length}`,
    `time                 ${(tally.durationMs / 1000).toFixed(1)} s`,
  ]
  lines.push(...failureKinds(tally).map((kind) => `  ${kind}`))
  for (const failure of tally.failures.slice(0, 40)) lines.push(`  FAIL ${failure.scenario}: ${failure.problems.join('; ')}${failure.dir ? ` [${failure.dir}]` : ''}`)
  if (tally.failures.length > 40) lines.push(`  … and ${tally.failures.length - 40} more`)
  return lines.join('\n')
}

/** The failures' problems counted by kind, most frequent first: `12 × <kind>`. */
export function failureKinds(tally: Tally): string[] {
  const kinds = new Map<string, number>()
  for (const problem of tally.failures.flatMap((f) => f.problems)) kinds.set(kindOf(problem), (kinds.get(kindOf(problem)) ?? 0) + 1)
  return [...kinds].sort((a, b) => b[1] - a[1]).map(([kind, count]) => `${String(count).padStart(4)} × ${kind}`)
}

/** A problem with its run ids, checkpoint ids and message details taken out, to count problems by kind. */
function kindOf(problem: string): string {
  return problem
    .replace(/\bt-[A-Za-z0-9_.-]+/g, '<run>')
    .replace(/checkpoint [0-9a-f-]{20,}/g, 'checkpoint <id>')
    .replace(/: message \d+: .*/, '')
    .replace(/: \[.*/, '')
}

async function referenceRun(command: WorkerCommand, durability: Durability, timeoutMs: number) {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-torture-ref-'))
  try {
    const runId = `ref-${durability}`
    const out = await runWorker({ command, dir, runId, durability, trace: true, timeoutMs })
    if (out.result?.state !== 'completed') throw new Error(`the ${durability} reference run did not complete: ${JSON.stringify(out.error ?? out.result?.state)} ${out.stderr}`)
    const effects = new EffectLog(join(dir, 'effects.log')).read()
    const reference = referenceOf(runId, out.result, effects)
    const problems = checkReference(reference, effects)
    if (problems.length > 0) throw new Error(`the ${durability} reference run is unusable: ${problems.join('; ')}`)
    return { reference, trace: out.trace, runMs: out.runMs ?? 50 }
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

/** One scenario per trace instant (`every`), or per instant that reaches a point name not yet covered (`each-name`). */
function namedScenarios(durability: Durability, trace: readonly TraceEntry[], mode: TortureOptions['named'], tally: Tally): Scenario[] {
  const covered = new Set<string>()
  const scenarios: Scenario[] = []
  for (const [index, entry] of trace.entries()) {
    const names = entry.points.map((point) => point.slice(0, point.lastIndexOf(':')))
    for (const name of names) if (!tally.pointsCovered.includes(name)) tally.pointsCovered.push(name)
    const fresh = names.filter((name) => !covered.has(`${entry.role}/${name}`))
    if (mode === 'each-name' && fresh.length === 0) continue
    for (const name of names) covered.add(`${entry.role}/${name}`)
    scenarios.push({ id: `${durability}-${index}-${entry.points[0]}`, durability, named: { killAt: entry.points[0]!, covers: entry.points, role: entry.role }, seed: index })
  }
  return scenarios
}

/**
 * At most `limit` scenarios: two killed right after a tool's outcome was journaled on its own (the
 * resume replays it), those killed inside a tool call (they leave unknown outcomes), then the rest
 * spread evenly.
 */
function sampleNamed(scenarios: readonly Scenario[], limit: number): Scenario[] {
  const inTool = scenarios.filter((scenario) => scenario.named?.killAt.startsWith('tool:'))
  const afterOutcome = scenarios.filter((scenario) => !inTool.includes(scenario) && scenario.named?.covers.some((point) => point.startsWith('after-complete-effect:')))
  // One kill after an outcome per durability and role at most, so the tool kills still fit.
  const first = [...afterOutcome.slice(0, 2), ...inTool, ...afterOutcome.slice(2)]
  const others = scenarios.filter((scenario) => !first.includes(scenario))
  const picked = first.slice(0, limit)
  const room = Math.min(limit - picked.length, others.length)
  for (let i = 0; i < room; i++) picked.push(others[Math.floor((i * others.length) / room)]!)
  return picked
}

/**
 * Random scenarios, made on demand until `randomKills` kills have landed (one to three planned per
 * scenario; a delay past the end of a run lands none). Scenarios still in flight may add a few.
 */
function* randomScenarios(
  options: TortureOptions,
  references: ReadonlyMap<Durability, { runMs: number }>,
  landed: () => number,
): Generator<Scenario> {
  const rng = mulberry32(options.seed)
  const durabilities = [...references.keys()]
  for (let i = 0; landed() < options.randomKills; i++) {
    const durability = durabilities[i % durabilities.length]!
    const span = (references.get(durability)?.runMs ?? 50) * 1.1
    const kills = 1 + (rng() < 0.3 ? 1 : 0) + (rng() < 0.1 ? 1 : 0)
    const randomDelays = Array.from({ length: kills }, () => Math.round(rng() * span * 10) / 10)
    yield { id: `${durability}-random-${i}`, durability, randomDelays, seed: Math.floor(rng() * 2 ** 31) }
  }
}

async function pool<T, R>(lanes: number, next: () => T | undefined, work: (item: T) => Promise<R>, done: (result: R) => void): Promise<void> {
  const lane = async () => {
    for (let item = next(); item !== undefined; item = next()) done(await work(item))
  }
  await Promise.all(Array.from({ length: Math.max(1, lanes) }, lane))
}

function emptyTally(): Tally {
  return {
    scenarios: 0,
    namedScenarios: 0,
    randomScenarios: 0,
    namedKills: 0,
    randomKills: 0,
    missedNamedKills: 0,
    processes: 0,
    resumes: 0,
    replays: 0,
    unknownSurfaced: 0,
    retried: 0,
    skipped: 0,
    idempotentReruns: 0,
    pointsCovered: [],
    failures: [],
    durationMs: 0,
  }
}

function addToTally(tally: Tally, report: ScenarioReport): void {
  tally.scenarios++
  if (report.scenario.named) tally.namedScenarios++
  else tally.randomScenarios++
  tally.namedKills += report.namedKills
  tally.randomKills += report.randomKills
  if (report.missedNamedKill) tally.missedNamedKills++
  tally.processes += report.processes
  tally.resumes += report.resumes
  tally.replays += report.replays
  tally.unknownSurfaced += report.surfacedRetried + report.surfacedSkipped
  tally.retried += report.surfacedRetried
  tally.skipped += report.surfacedSkipped
  tally.idempotentReruns += report.idempotentReruns
  if (report.failures.length > 0) tally.failures.push({ scenario: report.scenario.id, problems: report.failures, dir: report.dir })
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

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      short: { type: 'boolean', default: false },
      random: { type: 'string' },
      lanes: { type: 'string' },
      seed: { type: 'string' },
      'keep-failed': { type: 'boolean', default: false },
      only: { type: 'string' },
      tsx: { type: 'boolean', default: false },
      json: { type: 'string' },
      races: { type: 'string' },
      'race-backends': { type: 'string' },
      'race-cases': { type: 'string' },
      streams: { type: 'string' },
      'streams-only': { type: 'boolean', default: false },
      'stream-backends': { type: 'string' },
      wakes: { type: 'string' },
      'wakes-only': { type: 'boolean', default: false },
      'wake-backends': { type: 'string' },
    },
  })
  const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed)
  const options: TortureOptions = {
    durabilities: ['sync', 'async'],
    named: values.short ? 'each-name' : 'every',
    randomKills: values.random === undefined ? (values.short ? 50 : 1000) : Number(values.random),
    lanes: values.lanes === undefined ? availableParallelism() + 1 : Number(values.lanes),
    seed,
    keepFailed: values['keep-failed'],
    tsx: values.tsx,
    ...(values.only === undefined ? {} : { only: values.only }),
    log: (line) => console.log(line),
  }
  const raceBackends = values['race-backends']?.split(',')
  const raceCases = values['race-cases']?.split(',')
  // Asking for some races only plays those races: no crash scenarios.
  const racesOnly = raceBackends !== undefined || raceCases !== undefined
  const streamsOnly = values['streams-only'] === true
  const wakesOnly = values['wakes-only'] === true
  const oneKind = racesOnly || streamsOnly || wakesOnly
  if (!oneKind) console.log(`cairn crash torture: ${options.named === 'every' ? 'every kill point occurrence' : 'each kill point name'}, ${options.randomKills} random kills, ${options.lanes} lanes, seed ${seed}`)
  const tally = oneKind ? undefined : await runTorture(options)
  if (tally) console.log(formatTally(tally))
  const streamScenarios = values.streams === undefined ? (values.short ? 4 : 40) : Number(values.streams)
  let streams: StreamKillTally | undefined
  if (!racesOnly && !wakesOnly && streamScenarios > 0 && values.only === undefined) {
    console.log(`\nstream kills: ${streamScenarios} scenarios, ${options.lanes} lanes, seed ${seed}`)
    streams = await runStreamKills({
      scenarios: streamScenarios,
      lanes: options.lanes,
      seed,
      log: (line) => console.log(line),
      ...(values['stream-backends'] === undefined ? {} : { backends: values['stream-backends'].split(',') }),
    })
    console.log(formatStreamKillTally(streams))
  }
  const wakeScenarios = values.wakes === undefined ? (values.short ? 4 : 40) : Number(values.wakes)
  let wakes: WakeKillTally | undefined
  if (!racesOnly && !streamsOnly && wakeScenarios > 0 && values.only === undefined) {
    console.log(`\nwake kills: ${wakeScenarios} scenarios, ${options.lanes} lanes, seed ${seed}`)
    wakes = await runWakeKills({
      scenarios: wakeScenarios,
      lanes: options.lanes,
      seed,
      log: (line) => console.log(line),
      ...(values['wake-backends'] === undefined ? {} : { backends: values['wake-backends'].split(',') }),
    })
    console.log(formatWakeKillTally(wakes))
  }
  const raceRepeats = values.races === undefined ? (values.short ? 1 : 20) : Number(values.races)
  let races: RaceTally | undefined
  if (raceRepeats > 0 && values.only === undefined && !streamsOnly && !wakesOnly) {
    const which = `${raceCases === undefined ? 'every case' : `the ${raceCases.join(', ')} cases`} ${raceRepeats} time(s) on ${raceBackends === undefined ? 'every backend available' : raceBackends.join(', ')}`
    console.log(`\nownership races: ${which}, ${options.lanes} lanes`)
    races = await runRaces({
      repeats: raceRepeats,
      lanes: options.lanes,
      log: (line) => console.log(line),
      ...(raceBackends === undefined ? {} : { backends: raceBackends }),
      ...(raceCases === undefined ? {} : { cases: raceCases }),
    })
    console.log(formatRaceTally(races))
  }
  if (values.json !== undefined) await writeFile(values.json, `${JSON.stringify({ ...tally, streams, wakes, races }, null, 2)}\n`)
  const raceProblems = races ? races.failures.length + races.duplicateExecutions + races.duplicateTerminals + races.doubleOwners + races.zombieWrites : 0
  process.exitCode = (tally?.failures.length ?? 0) === 0 && (streams?.failures.length ?? 0) === 0 && (wakes?.failures.length ?? 0) === 0 && raceProblems === 0 ? 0 : 1
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main()
