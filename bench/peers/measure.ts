import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { ChildTimeout, runChild, type ChildOptions } from './child-process.js'
import { dropSchema } from './pg-admin.js'
import type { ChildReport, ResumeFigures, RunFigures } from './protocol.js'
import type { SystemSpec } from './systems.js'

/** Everything measured of one system at one n. */
export interface Measurement {
  system: string
  n: number
  run?: RunFigures
  /** Peak RSS of the process that ran the workload. */
  runRssBytes?: number
  resume?: ResumeFigures
  /** Peak RSS of the fresh process that loaded the run back (null: measured in the writer). */
  resumeRssBytes?: number | null
  /** The machine's 1-minute load average when the measurement started (2 cores: above 2, others were busy too). */
  loadAverage?: number
  /** Why it was not measured, when it was not. */
  skipped?: string
  failed?: string
}

/**
 * Measure `spec` at `n`: the workload in one child process, then (for a persistent system) the
 * cold load and history listing in a fresh one; then delete what it stored.
 */
export async function measure(spec: SystemSpec, n: number, options: { runLimitMs?: number | undefined; fullHistory?: boolean } = {}): Promise<Measurement> {
  const { runLimitMs, fullHistory = true } = options
  const location = await mkdtemp(join(tmpdir(), `cairn-peers-${spec.id}-${n}-`))
  const schema = schemaOf(spec, n)
  const request = { system: spec.id, n, location, schema, fullHistory }
  const loadAverage = loadavg()[0] ?? 0
  try {
    await dropSchemas(spec, schema)
    const limit = runLimitMs === undefined ? {} : { timeoutMs: runLimitMs }
    const run = await bestOf(() => runChild({ ...request, phase: 'run', resultFile: join(location, 'run.json') }, limit), (r) => r.run?.wallMs, async () => {
      await rm(location, { recursive: true, force: true })
      await mkdir(location)
      await dropSchemas(spec, schema)
    })
    const measurement: Measurement = { system: spec.id, n, loadAverage, runRssBytes: run.maxRssBytes, ...(run.run ? { run: run.run } : {}) }
    if (run.resume) return { ...measurement, resume: run.resume, resumeRssBytes: null }
    if (!spec.persistent) return measurement
    const resume = await bestOf(() => runChild({ ...request, phase: 'resume', resultFile: join(location, 'resume.json') }), (r) => r.resume?.loadMs)
    return { ...measurement, ...(resume.resume ? { resume: resume.resume } : {}), resumeRssBytes: resume.maxRssBytes }
  } catch (err) {
    if (err instanceof ChildTimeout && runLimitMs !== undefined) {
      return { system: spec.id, n, loadAverage, skipped: `its run at n = ${n} passed two minutes and was stopped (the process was given ${runLimitMs / 1000} s, warm-up and setup included)` }
    }
    return { system: spec.id, n, loadAverage, failed: (err as Error).message }
  } finally {
    await rm(location, { recursive: true, force: true })
    await dropSchemas(spec, schema).catch(() => {})
  }
}

/**
 * Re-run one phase of `spec` at `n` under extra node flags (a CPU profile): the run phase, or
 * the run and then the resume phase. Returns the report of the last phase.
 */
export async function remeasure(spec: SystemSpec, n: number, phase: 'run' | 'resume', options: ChildOptions): Promise<ChildReport> {
  const location = await mkdtemp(join(tmpdir(), `cairn-peers-profile-${spec.id}-${n}-`))
  const schema = `${schemaOf(spec, n)}_profile`
  const request = { system: spec.id, n, location, schema }
  try {
    await dropSchemas(spec, schema)
    const run = await runChild({ ...request, phase: 'run', resultFile: join(location, 'run.json') }, phase === 'run' ? options : {})
    if (phase === 'run') return run
    return await runChild({ ...request, phase: 'resume', resultFile: join(location, 'resume.json') }, options)
  } finally {
    await rm(location, { recursive: true, force: true })
    await dropSchemas(spec, schema).catch(() => {})
  }
}

/** A child taking less than this is repeated, and the fastest of {@link TRIALS} kept. */
const REPEAT_BELOW_MS = 3000
const TRIALS = 3

/**
 * Run `child` once; when it was quick, run it again up to {@link TRIALS} times and keep the report
 * whose `key` figure is lowest. The machine may be shared: the fastest of a few runs is the one
 * least disturbed by other processes. `reset` clears what the last run stored, so the next starts
 * from nothing (the kept report's figures are of an identical run).
 */
async function bestOf(child: () => Promise<ChildReport>, key: (report: ChildReport) => number | undefined, reset?: () => Promise<void>): Promise<ChildReport> {
  const started = Date.now()
  let best = await child()
  if (Date.now() - started >= REPEAT_BELOW_MS) return best
  for (let trial = 2; trial <= TRIALS; trial++) {
    await reset?.()
    const next = await child()
    if ((key(next) ?? Infinity) < (key(best) ?? Infinity)) best = next
  }
  return best
}

function schemaOf(spec: SystemSpec, n: number): string {
  return `${spec.id.replace(/-/g, '_')}_n${n}`
}

async function dropSchemas(spec: SystemSpec, schema: string): Promise<void> {
  if (spec.backend !== 'postgres') return
  await dropSchema(spec.family, schema)
  await dropSchema(spec.family, `${schema}_warmup`)
}
