import type { FloorResult, WorkloadResult } from './store-summary.js'

/** One target: passed, failed, or skipped (`pass: null`) because its backend is missing. */
export interface TargetCheck {
  target: string
  pass: boolean | null
  detail: string
}

/** The bounds the storage benchmark reports against. */
export const TARGETS = {
  /** SQLite's median save over the floor's, at every n. */
  sqliteSaveOverFloor: 1.5,
  /** Bytes on disk over the final message list's JSON size, at the largest n. */
  bytesOverMessages: 2,
  /** Milliseconds to list the whole history, at the largest n. */
  listMs: 50,
} as const

/** Check every target against the measured results. */
export function checkTargets(params: {
  results: readonly WorkloadResult[]
  floors: readonly FloorResult[]
  backends: readonly string[]
  sizes: readonly number[]
}): TargetCheck[] {
  const { results, floors, backends, sizes } = params
  const largest = Math.max(...sizes)
  const find = (backend: string, n: number) => results.find((r) => r.backend === backend && r.n === n)
  const checks: TargetCheck[] = []
  for (const n of sizes) {
    const target = `sqlite save <= ${TARGETS.sqliteSaveOverFloor}x floor at n=${n}`
    const sqlite = find('sqlite', n)
    const floor = floors.find((f) => f.n === n)
    if (!sqlite || !floor) checks.push({ target, pass: null, detail: 'not measured' })
    else {
      const ratio = sqlite.saveMedianUs / floor.saveMedianUs
      const detail = `${ratio.toFixed(2)}x (${sqlite.saveMedianUs.toFixed(0)} us vs ${floor.saveMedianUs.toFixed(0)} us)`
      checks.push({ target, pass: ratio <= TARGETS.sqliteSaveOverFloor, detail })
    }
  }
  for (const backend of backends.filter((name) => name !== 'memory')) {
    const target = `${backend} bytes at n=${largest} <= ${TARGETS.bytesOverMessages}x message list`
    const result = find(backend, largest)
    if (!result || result.bytesOpen === null || result.bytesClosed === null) checks.push({ target, pass: null, detail: 'not measured' })
    else {
      const open = result.bytesOpen / result.messagesBytes
      const closed = result.bytesClosed / result.messagesBytes
      const detail = `${open.toFixed(2)}x with the store open, ${closed.toFixed(2)}x after close`
      checks.push({ target, pass: Math.max(open, closed) <= TARGETS.bytesOverMessages, detail })
    }
  }
  for (const backend of backends) {
    const target = `${backend} lists ${largest} checkpoints in <= ${TARGETS.listMs} ms`
    const result = find(backend, largest)
    if (!result) checks.push({ target, pass: null, detail: 'not measured' })
    else checks.push({ target, pass: result.listMs <= TARGETS.listMs, detail: `${result.listMs.toFixed(2)} ms` })
  }
  return checks
}

/** The targets as printed lines: PASS, FAIL or SKIP, the target, the measured value. */
export function formatTargets(checks: readonly TargetCheck[]): string {
  const width = Math.max(...checks.map((check) => check.target.length))
  return checks
    .map((check) => `${check.pass === null ? 'SKIP' : check.pass ? 'PASS' : 'FAIL'}  ${check.target.padEnd(width)}  ${check.detail}`)
    .join('\n')
}
