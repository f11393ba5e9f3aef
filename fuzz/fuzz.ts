import fc from 'fast-check'
import { mutations } from './mutate.js'
import { describeError, emptyReport, outcomeOfError, prototypesPolluted, withTimeout, type Outcome, type SurfaceReport } from './outcomes.js'
import { checkpointIds, classifyReads, readAll, type StoreSurface } from './store-surfaces.js'
import type { Surface } from './surface.js'

/** How long one input may take before it counts as a hang. */
const HANG_MS = 20_000
/** Inputs generated at a time (a mutation may hold a string of millions of characters). */
const BATCH = 50

export interface FuzzOptions {
  runs: number
  seed: number
  /** Called after each surface. */
  onReport?: (report: SurfaceReport) => void
}

/** Feed `runs` mutated copies of a value surface's seed to it and count the outcomes. */
export async function fuzzValueSurface(surface: Surface, options: FuzzOptions): Promise<SurfaceReport> {
  const report = emptyReport(surface.name)
  const started = Date.now()
  const arbitrary = mutations(surface.seed)
  for (let batch = 0; report.inputs < options.runs; batch++) {
    const inputs = fc.sample(arbitrary, { numRuns: Math.min(BATCH, options.runs - report.inputs), seed: options.seed + batch })
    for (const input of inputs) {
      const result = await withTimeout(surface.attempt(input.text), HANG_MS)
      record(report, result === 'hang' ? 'hang' : 'error' in result ? outcomeOfError(result.error) : result.value, () => `${input.kind}: ${result === 'hang' ? 'no answer' : 'error' in result ? describeError(result.error) : result.value}`)
    }
  }
  report.ms = Date.now() - started
  await surface.close?.()
  return report
}

/** Apply `runs` edits to a store's rows or files, read the run back each time, and count the outcomes. */
export async function fuzzStoreSurface(surface: StoreSurface, options: FuzzOptions): Promise<SurfaceReport> {
  const report = emptyReport(surface.name)
  const started = Date.now()
  const first = await surface.open()
  const ids = await checkpointIds(first)
  const pristine = await readAll(first, ids)
  await first.close()
  for (let batch = 0; report.inputs < options.runs; batch++) {
    const edits = fc.sample(surface.edits, { numRuns: BATCH, seed: options.seed + batch })
    for (const edit of edits) {
      if (report.inputs >= options.runs) break
      if (!(await edit.apply())) continue
      const store = await surface.open()
      try {
        const result = await withTimeout(readAll(store, ids), HANG_MS)
        const outcome = result === 'hang' ? 'hang' : 'error' in result ? outcomeOfError(result.error) : classifyReads(result.value, pristine)
        const label = typeof outcome === 'string' ? outcome : outcomeOfError(outcome.error)
        record(report, label, () => `${edit.where}: ${typeof outcome === 'object' ? describeError(outcome.error) : outcome}`)
        if (label === 'changed') report.changedAt[edit.where] = (report.changedAt[edit.where] ?? 0) + 1
      } finally {
        await store.close().catch(() => undefined)
        await edit.restore()
      }
    }
  }
  report.ms = Date.now() - started
  await surface.close()
  return report
}

function record(report: SurfaceReport, outcome: Outcome, example: () => string): void {
  report.inputs++
  const final: Outcome = prototypesPolluted() ? 'polluted' : outcome
  report.counts[final]++
  if (final !== 'accepted' && final !== 'typed') report.examples[final] ??= example()
}
