/**
 * Cairn against its peers, side by side: `npm run bench:peers`. Runs the same agent loop on
 * Cairn, LangGraph.js and DBOS Transact at every n, each system in its own processes; prints the
 * tables, writes `bench/results/peers.json`, `docs/benchmarks.md` and its storage plot. Progress
 * goes to stderr. PEERS_SIZES (e.g. `50,200`) and PEERS_SYSTEMS (ids) narrow a run for a check;
 * with PEERS_MERGE=1 the systems measured now replace theirs in the last results file and
 * everything else is kept from it (its machine description too), so one row can be re-measured.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { benchmarksDoc, type Explanation } from './benchmarks-doc.js'
import { summarizeProfile } from './cpu-profile.js'
import { describeEnvironment } from './environment.js'
import { measure, remeasure, type Measurement } from './measure.js'
import { ensureDatabases, postgresProblem } from './pg-admin.js'
import { HISTORY_BUDGET_MS } from './protocol.js'
import { asText, ratioTable, resultTable } from './report.js'
import { storagePlot } from './storage-plot.js'
import { ratiosOf, rowsOf } from './summarize.js'
import { SYSTEMS, specOf, type SystemSpec } from './systems.js'
import { checkTargets, type TargetCheck } from './targets.js'
import { SIZES } from './workload.js'

/** A run at the largest n projected to take longer than this is not started. */
const RUN_LIMIT_MS = 120_000
const RUN_MARGIN_MS = 15_000
const ROOT = new URL('../..', import.meta.url)
const RESULTS_FILE = new URL('bench/results/peers.json', ROOT)
const DOC_FILE = new URL('docs/benchmarks.md', ROOT)
const PLOT_NAME = 'benchmarks-storage.svg'
const PLOT_FILE = new URL(`docs/${PLOT_NAME}`, ROOT)

const started = Date.now()
const sizes = process.env.PEERS_SIZES ? process.env.PEERS_SIZES.split(',').map(Number) : [...SIZES]
const only = process.env.PEERS_SYSTEMS?.split(',')
const systems = only ? SYSTEMS.filter((s) => only.includes(s.id) || (s.backend === 'none' && only.some((id) => specOf(id).baseline === s.id))) : SYSTEMS
const notes: string[] = []

progress('reading the machine and the installed versions')
const previous = process.env.PEERS_MERGE === '1' ? (JSON.parse(await readFile(RESULTS_FILE, 'utf8')) as PreviousResults) : undefined
// A merge keeps the machine description of the run it merges into, with the versions installed now.
const environment = previous ? { ...previous.environment, versions: (await describeEnvironment()).versions } : await describeEnvironment()
const pgProblem = await postgresProblem()
if (pgProblem) notes.push(`${pgProblem}; every Postgres-backed row (Cairn PostgresStore, LangGraph PostgresSaver, DBOS) is missing.`)
else await ensureDatabases()

const measurements: Measurement[] = []
for (const n of sizes) {
  for (const spec of systems) {
    const skip = whySkip(spec, n)
    if (skip) {
      measurements.push({ system: spec.id, n, skipped: skip })
      progress(`n=${n} ${spec.id}: not measured: ${skip}`)
      continue
    }
    // At the largest n a run over two minutes is stopped; its process also warms up and opens the store.
    const runLimitMs = n === Math.max(...sizes) && spec.backend !== 'none' ? RUN_LIMIT_MS + RUN_MARGIN_MS : undefined
    const m = await measure(spec, n, { runLimitMs, fullHistory: !historyPassedBox(spec, n) })
    measurements.push(m)
    progress(`n=${n} ${spec.id}: ${describe(m)}`)
  }
}

if (previous) {
  const measuredNow = new Set(measurements.map((m) => `${m.system}@${m.n}`))
  const kept = previous.measurements.filter((m) => !measuredNow.has(`${m.system}@${m.n}`))
  notes.push(
    `The rows of ${[...new Set(measurements.map((m) => `“${specOf(m.system).label}”`))].join(', ')} were measured in a second pass on ${new Date().toISOString()} and merged into the run of ${previous.environment.date}.`,
  )
  measurements.unshift(...kept)
  sizes.splice(0, sizes.length, ...previous.config.sizes)
}
const rows = rowsOf(measurements, sizes)
const ratios = ratiosOf(rows)
const targets = checkTargets(rows, ratios, sizes)
const explanations = await explainMisses(targets, previous?.explanations ?? [])
for (const m of measurements.filter((m) => m.failed)) notes.push(`${specOf(m.system).label} at n = ${m.n} failed: ${m.failed}`)
for (const m of measurements.filter((m) => m.skipped)) notes.push(`${specOf(m.system).label} at n = ${m.n} was not measured: ${m.skipped}`)
notes.push(
  `LangGraph's getStateHistory is stopped after ${HISTORY_BUDGET_MS / 1000} s (PEERS_HISTORY_BUDGET_MS); a stopped listing shows as "> t" with how many states it had listed, and its ratios are lower bounds. Cairn's runner.history is a single call that cannot be stopped in between (it reads without yielding to the event loop), so it is not run ("not run") at an n where its time at a smaller n, grown quadratically, would pass that.`,
  'Cairn\'s tool is declared idempotent (a lookup), so the runner journals its outcome with the batch checkpoint instead of marking it started and completed in two extra commits; a non-idempotent tool would add those writes.',
  'Figures are from a single run per system and n; the machine is shared, so small differences (a few percent, or a few µs per step) are within noise.',
  loadNote(measurements),
)

for (const n of sizes) {
  console.log(`\nn = ${n} (${2 * n + 1} steps)\n${asText(resultTable(rows, n))}`)
  const table = ratioTable(ratios, n)
  if (table.rows.length > 0) console.log(`\nCairn against its peers at n = ${n} (peer ÷ Cairn; above 1× Cairn wins)\n${asText(table)}`)
}
console.log('\nTargets')
for (const t of targets) console.log(`${t.pass === true ? 'MET   ' : t.pass === false ? 'MISSED' : 'N/A   '} ${t.target}\n${t.evidence.map((e) => `         ${e}`).join('\n')}`)
for (const note of notes) console.log(`note: ${note}`)

const elapsedMs = (previous?.elapsedMs ?? 0) + Date.now() - started
await mkdir(new URL('bench/results/', ROOT), { recursive: true })
await writeFile(RESULTS_FILE, `${JSON.stringify({ environment, config: { sizes, systems: systems.map((s) => s.id), historyBudgetMs: HISTORY_BUDGET_MS, runLimitMs: RUN_LIMIT_MS }, elapsedMs, rows, ratios, targets, explanations, measurements, notes }, null, 2)}\n`)
await mkdir(new URL('docs/', ROOT), { recursive: true })
await writeFile(PLOT_FILE, storagePlot(rows, sizes))
await writeFile(DOC_FILE, benchmarksDoc({ environment, sizes, rows, ratios, targets, explanations, elapsedMs, plotFile: PLOT_NAME, notes }))
console.log(`\nwrote ${RESULTS_FILE.pathname}, ${DOC_FILE.pathname} and ${PLOT_FILE.pathname} in ${(elapsedMs / 60000).toFixed(1)} min`)

/** What a merge keeps of the last results file. */
interface PreviousResults {
  environment: Awaited<ReturnType<typeof describeEnvironment>>
  config: { sizes: number[] }
  elapsedMs: number
  measurements: Measurement[]
  explanations: Explanation[]
}

/** Why `spec` is not run at `n`: Postgres is down, or its run at the largest n is projected past the limit. */
function whySkip(spec: SystemSpec, n: number): string | undefined {
  if (spec.backend === 'postgres' && pgProblem) return pgProblem
  const i = sizes.indexOf(n)
  if (spec.backend === 'none' || i < 2 || n !== Math.max(...sizes)) return undefined
  const wall = (k: number) => measurements.find((m) => m.system === spec.id && m.n === sizes[k])?.run?.wallMs
  const [a, b] = [wall(i - 2), wall(i - 1)]
  const [na, nb] = [sizes[i - 2] ?? 1, sizes[i - 1] ?? 1]
  if (a === undefined || b === undefined) return undefined
  const exponent = Math.min(3, Math.max(1, Math.log(b / a) / Math.log(nb / na)))
  const projected = b * (n / nb) ** exponent
  if (projected <= RUN_LIMIT_MS) return undefined
  return `stopped at n = ${nb}: its run at n = ${n} is projected at ${(projected / 1000).toFixed(0)} s (from ${(a / 1000).toFixed(1)} s at ${na} and ${(b / 1000).toFixed(1)} s at ${nb}), over two minutes`
}

/**
 * Whether `spec`'s full-record history listing would pass the time box at `n`: it did at a smaller
 * n, or its time there grown quadratically (every record holds the conversation so far) would.
 */
function historyPassedBox(spec: SystemSpec, n: number): boolean {
  return measurements.some((m) => {
    if (m.system !== spec.id || m.n >= n || !m.resume) return false
    if (m.resume.historySkipped === true || !m.resume.historyComplete) return true
    return (m.resume.historyMs ?? 0) * (n / m.n) ** 2 > HISTORY_BUDGET_MS
  })
}

/**
 * For each missed time target, a CPU profile of the Cairn run that missed it, cut to the measured
 * section; one the last results file already has (a merge) is kept.
 */
async function explainMisses(checks: readonly TargetCheck[], known: readonly Explanation[]): Promise<Explanation[]> {
  const out: Explanation[] = []
  for (const check of checks) {
    const job = check.profile
    if (check.pass !== false || !job) continue
    const n = sizes.includes(job.n) ? job.n : Math.max(...sizes)
    const have = known.find((e) => e.target === check.id && e.system === job.system && e.n === n && !e.error)
    if (have) {
      out.push(have)
      continue
    }
    progress(`profiling ${job.system} at n=${n} (${job.section}) for the missed target "${check.target}"`)
    const directory = await mkdtemp(join(tmpdir(), 'cairn-peers-cpuprofile-'))
    try {
      const flags = ['--cpu-prof', '--cpu-prof-dir', directory, '--cpu-prof-interval', '250']
      const report = await remeasure(specOf(job.system), n, job.section === 'run' ? 'run' : 'resume', { nodeFlags: flags })
      const window = report.sections[job.section]
      const profile = window ? await summarizeProfile(directory, window) : null
      out.push({ target: check.id, system: job.system, n, section: job.section, profile, wallMs: job.section === 'run' ? (report.run?.wallMs ?? null) : null, cpuMs: job.section === 'run' ? (report.run?.cpuMs ?? null) : null, storeCalls: job.section === 'run' ? (report.run?.storeCalls ?? null) : null })
    } catch (err) {
      out.push({ target: check.id, system: job.system, n, section: job.section, profile: null, wallMs: null, cpuMs: null, storeCalls: null, error: (err as Error).message })
    } finally {
      await rm(directory, { recursive: true, force: true })
    }
  }
  return out
}

/** The range of the machine's load average over the run: other work on a 2-core machine skews times. */
function loadNote(all: readonly Measurement[]): string {
  const loads = all.flatMap((m) => (m.loadAverage === undefined ? [] : [m.loadAverage]))
  if (loads.length === 0) return 'The load average was not recorded.'
  const [low, high] = [Math.min(...loads), Math.max(...loads)]
  return `The machine's 1-minute load average ranged from ${low.toFixed(1)} to ${high.toFixed(1)} during the measurements (2 cores; above about 1, other processes shared the CPU with the one measured), so wall times carry that noise; storage, checkpoint counts and their ratios do not.`
}

function describe(m: Measurement): string {
  if (m.failed) return `FAILED: ${m.failed.split('\n')[0] ?? ''}`
  const parts = [`run ${seconds(m.run?.wallMs)}`]
  if (m.run?.bytesOpen !== null && m.run?.bytesOpen !== undefined) parts.push(`stored ${(m.run.bytesOpen / 1024 / 1024).toFixed(2)} MiB`)
  if (m.resume) parts.push(`load ${m.resume.loadMs.toFixed(1)} ms`, `history ${m.resume.historySkipped ? 'not run (passed the time box at a smaller n)' : `${seconds(m.resume.historyMs ?? undefined)}${m.resume.historyComplete ? '' : ' (stopped)'}`}`)
  return `${parts.join(', ')} [${((Date.now() - started) / 60000).toFixed(1)} min elapsed]`
}

function seconds(ms: number | undefined): string {
  return ms === undefined ? 'n/a' : ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${ms.toFixed(0)} ms`
}

function progress(message: string): void {
  process.stderr.write(`[bench:peers] ${message}\n`)
}
