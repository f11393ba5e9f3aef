import { CairnError } from '../src/index.js'

/**
 * What one mutated input led to:
 * - `accepted`: read without error, and either nothing checkable changed or the surface has no
 *   integrity to check (a caller's own checkpoint, a codec text);
 * - `typed`: refused with a `CairnError`;
 * - `changed`: a store read returned data that differs from what was written, without error —
 *   a silently accepted change (stores without keys have no digest on some records);
 * - `untyped`: any other error (`TypeError`, `RangeError`, …);
 * - `hang`: no answer within the time limit;
 * - `polluted`: a prototype of the process was modified.
 */
export type Outcome = 'accepted' | 'typed' | 'changed' | 'untyped' | 'hang' | 'polluted'

export const OUTCOMES: readonly Outcome[] = ['accepted', 'typed', 'changed', 'untyped', 'hang', 'polluted']

/** The counts of one surface, and an example of each bad outcome. */
export interface SurfaceReport {
  surface: string
  inputs: number
  counts: Record<Outcome, number>
  examples: Partial<Record<Outcome, string>>
  /** Where the `changed` outcomes were edited (a table column or a store file), with counts. */
  changedAt: Record<string, number>
  ms: number
}

export function emptyReport(surface: string): SurfaceReport {
  return { surface, inputs: 0, counts: { accepted: 0, typed: 0, changed: 0, untyped: 0, hang: 0, polluted: 0 }, examples: {}, changedAt: {}, ms: 0 }
}

const PROTOTYPES: readonly object[] = [Object.prototype, Array.prototype, Function.prototype, String.prototype]
const pristine = PROTOTYPES.map((p) => Reflect.ownKeys(p).length)

/** True when a prototype gained or lost a key since this module loaded. */
export function prototypesPolluted(): boolean {
  return PROTOTYPES.some((p, i) => Reflect.ownKeys(p).length !== pristine[i]) || ({} as Record<string, unknown>).polluted !== undefined
}

/** The outcome of an error thrown by a surface. */
export function outcomeOfError(err: unknown): Outcome {
  return err instanceof CairnError ? 'typed' : 'untyped'
}

export function describeError(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message.slice(0, 160)}` : String(err).slice(0, 160)
}

/** Settle `work` within `ms`, or report a hang. */
export async function withTimeout<T>(work: Promise<T>, ms: number): Promise<{ value: T } | { error: unknown } | 'hang'> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<'hang'>((resolve) => {
    timer = setTimeout(() => resolve('hang'), ms)
  })
  try {
    return await Promise.race([work.then((value) => ({ value }), (error: unknown) => ({ error })), timeout])
  } finally {
    clearTimeout(timer)
  }
}

/** The outcomes table, one row per surface. */
export function formatTable(reports: readonly SurfaceReport[]): string {
  const header = ['surface', 'inputs', ...OUTCOMES, 'seconds']
  const rows = reports.map((r) => [r.surface, String(r.inputs), ...OUTCOMES.map((o) => String(r.counts[o])), (r.ms / 1000).toFixed(1)])
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)))
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n')
}
