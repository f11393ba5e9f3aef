import type { FloorTrial } from './sqlite-floor.js'
import { median, percentile } from './stats.js'
import type { WorkloadTrial } from './store-workload.js'

/** One backend at one `n`, over all trials (samples pooled). */
export interface WorkloadResult {
  backend: string
  n: number
  trials: number
  saveMedianUs: number
  saveP95Us: number
  /** Bytes on disk with the writer open and after `close()` (the largest over trials); null for memory. */
  bytesOpen: number | null
  bytesClosed: number | null
  /** Median first `getLatest` of a fresh instance, decode included. */
  coldLatestUs: number
  /** Median time to list the whole history. */
  listMs: number
  messagesBytes: number
}

/** The floor at one `n`, over all trials (samples pooled). */
export interface FloorResult {
  n: number
  trials: number
  saveMedianUs: number
  saveP95Us: number
  bytesOpen: number
  bytesClosed: number
  messagesBytes: number
}

/** Pool the trials of one backend at one `n` (all of the same backend and `n`, at least one). */
export function summarizeWorkload(trials: readonly WorkloadTrial[]): WorkloadResult {
  const first = trials[0]
  if (!first) throw new Error('summarizeWorkload needs at least one trial')
  const saves = trials.flatMap((t) => t.saves)
  return {
    backend: first.backend,
    n: first.n,
    trials: trials.length,
    saveMedianUs: median(saves),
    saveP95Us: percentile(saves, 95),
    bytesOpen: first.bytesOpen === null ? null : Math.max(...trials.map((t) => t.bytesOpen ?? 0)),
    bytesClosed: first.bytesClosed === null ? null : Math.max(...trials.map((t) => t.bytesClosed ?? 0)),
    coldLatestUs: median(trials.flatMap((t) => t.coldReads)),
    listMs: median(trials.flatMap((t) => t.lists)),
    messagesBytes: first.messagesBytes,
  }
}

/** Pool the floor's trials at one `n` (at least one). */
export function summarizeFloor(trials: readonly FloorTrial[]): FloorResult {
  const first = trials[0]
  if (!first) throw new Error('summarizeFloor needs at least one trial')
  const saves = trials.flatMap((t) => t.saves)
  return {
    n: first.n,
    trials: trials.length,
    saveMedianUs: median(saves),
    saveP95Us: percentile(saves, 95),
    bytesOpen: Math.max(...trials.map((t) => t.bytesOpen)),
    bytesClosed: Math.max(...trials.map((t) => t.bytesClosed)),
    messagesBytes: first.messagesBytes,
  }
}

/** A backend's median save over the floor's at the same `n`; null without a floor. */
export function saveOverFloor(result: WorkloadResult, floors: readonly FloorResult[]): number | null {
  const floor = floors.find((f) => f.n === result.n)
  return floor ? result.saveMedianUs / floor.saveMedianUs : null
}
