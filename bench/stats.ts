/** Small statistics helpers for the benchmarks. */

/** The median of `values` (mean of the middle two for an even count); NaN for none. */
export function median(values: readonly number[]): number {
  return percentile(values, 50)
}

/** The p-th percentile of `values` by linear interpolation between closest ranks; NaN for none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const rank = (p / 100) * (sorted.length - 1)
  const low = Math.floor(rank)
  const high = Math.ceil(rank)
  const a = sorted[low] ?? Number.NaN
  const b = sorted[high] ?? Number.NaN
  return a + (b - a) * (rank - low)
}

/** Microseconds elapsed since `start`, a `process.hrtime.bigint()` reading. */
export function microsSince(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1000
}

/** Run `fn` and return how many microseconds it took, with its result. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ micros: number; value: T }> {
  const start = process.hrtime.bigint()
  const value = await fn()
  return { micros: microsSince(start), value }
}
