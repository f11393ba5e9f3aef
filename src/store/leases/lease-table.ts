import type { RunStatus } from '../checkpoint-store.js'
import {
  CLAIMABLE_STATUSES,
  type AcquireRequest,
  type ClaimRequest,
  type Fence,
  type HeartbeatRequest,
  type HeartbeatRow,
  type LeaseRow,
  type RequeueOutcome,
} from '../engine/lease-engine.js'

/** One run's lease state, as the in-process engines keep it; `queue` is null for a run never enqueued. */
export interface LeaseEntry {
  queue: string | null
  priority: number
  createdAt: number
  owner: string | null
  epoch: number
  expiresAt: number | null
  recoveries: number
  cancelRequested: boolean
}

/**
 * The lease protocol over a map in process memory, for the engines whose rows live in this
 * process (memory, file). Every method is synchronous, so a check and the write after it can
 * never be interleaved with a claim. The engine supplies run statuses (`statusOf`) and applies
 * status changes itself.
 */
export class LeaseTable {
  readonly #entries = new Map<string, LeaseEntry>()
  readonly #listeners = new Set<() => void>()

  constructor(entries: Iterable<[string, LeaseEntry]> = []) {
    for (const [runId, entry] of entries) this.#entries.set(runId, { ...entry })
  }

  /** Whether a write under `fence` may go ahead, and whether a cancel is pending. */
  check(fence: Fence): { held: boolean; cancelRequested: boolean } {
    const entry = this.#entries.get(fence.runId)
    const held = entry !== undefined && entry.owner === fence.owner && entry.epoch === fence.epoch
    return { held, cancelRequested: held && entry.cancelRequested }
  }

  add(runId: string, job: { queue: string; priority: number; createdAt: number }): void {
    this.#entries.set(runId, { ...job, owner: null, epoch: 0, expiresAt: null, recoveries: 0, cancelRequested: false })
    this.wake()
  }

  /** The runs to claim now, already marked claimed. */
  claim(request: ClaimRequest, statusOf: (runId: string) => RunStatus | undefined, now = Date.now()): { runId: string; row: LeaseRow }[] {
    const claimable = (status: RunStatus | undefined) => status !== undefined && CLAIMABLE_STATUSES.includes(status)
    const live = new Map<string, number>()
    const candidates: [string, LeaseEntry][] = []
    for (const [runId, entry] of this.#entries) {
      if (entry.queue === null || !claimable(statusOf(runId))) continue
      if (entry.owner !== null && entry.expiresAt !== null && entry.expiresAt >= now) {
        live.set(entry.queue, (live.get(entry.queue) ?? 0) + 1)
      } else if (request.queues === undefined || request.queues.includes(entry.queue)) {
        candidates.push([runId, entry])
      }
    }
    candidates.sort(([aId, a], [bId, b]) => b.priority - a.priority || a.createdAt - b.createdAt || (aId < bId ? -1 : aId > bId ? 1 : 0))
    const claimed: { runId: string; row: LeaseRow }[] = []
    for (const [runId, entry] of candidates) {
      if (claimed.length >= request.limit) break
      const queue = entry.queue!
      const cap = request.queueLimits?.[queue]
      if (cap !== undefined && (live.get(queue) ?? 0) >= cap) continue
      live.set(queue, (live.get(queue) ?? 0) + 1)
      if (entry.owner !== null) entry.recoveries++
      entry.owner = request.owner
      entry.epoch++
      entry.expiresAt = now + request.leaseMs
      claimed.push({ runId, row: leaseRow(runId, entry) })
    }
    return claimed
  }

  /**
   * Take the lease of `runId` (which exists) for `request.owner` unless a live lease holds it
   * (see `LeaseEngine.acquire`); a run never leased gets an entry of no queue.
   */
  acquire(runId: string, request: AcquireRequest, now = Date.now()): { acquired: boolean; row: LeaseRow } {
    let entry = this.#entries.get(runId)
    if (!entry) {
      entry = { queue: null, priority: 0, createdAt: now, owner: null, epoch: 0, expiresAt: null, recoveries: 0, cancelRequested: false }
      this.#entries.set(runId, entry)
    }
    const live = entry.owner !== null && entry.expiresAt !== null && entry.expiresAt >= now
    const dead = request.takeFrom !== undefined && entry.owner === request.takeFrom.owner && entry.epoch === request.takeFrom.epoch
    if (live && !dead) return { acquired: false, row: leaseRow(runId, entry) }
    if (entry.owner !== null) entry.recoveries++
    entry.owner = request.owner
    entry.epoch++
    entry.expiresAt = now + request.leaseMs
    return { acquired: true, row: leaseRow(runId, entry) }
  }

  heartbeat(request: HeartbeatRequest, now = Date.now()): HeartbeatRow[] {
    const held: HeartbeatRow[] = []
    for (const { runId, epoch } of request.runs) {
      const entry = this.#entries.get(runId)
      if (!entry || entry.owner !== request.owner || entry.epoch !== epoch) continue
      entry.expiresAt = now + request.leaseMs
      held.push({ runId, cancelRequested: entry.cancelRequested })
    }
    return held
  }

  /** Clear the holder; false when the fence is stale. `claimableAfter`: wake waiting workers. */
  release(fence: Fence, options: { failed: boolean; claimableAfter: boolean }): boolean {
    if (!this.check(fence).held) return false
    const entry = this.#entries.get(fence.runId)!
    entry.owner = null
    entry.expiresAt = null
    if (options.failed) entry.recoveries++
    if (options.claimableAfter) this.wake()
    return true
  }

  /**
   * A cancel of a run whose status is `status`: `cancelled` when nobody holds it (a lapsed holder
   * is fenced out by a raised epoch; the engine sets the status), `requested` when its holder is live.
   */
  cancel(runId: string, status: RunStatus, now = Date.now()): 'cancelled' | 'requested' | 'unchanged' {
    if (status === 'completed' || status === 'failed' || status === 'cancelled') return 'unchanged'
    const entry = this.#entries.get(runId)
    if (entry && entry.owner !== null && entry.expiresAt !== null && entry.expiresAt >= now) {
      entry.cancelRequested = true
      return 'requested'
    }
    if (entry) {
      if (entry.owner !== null) entry.epoch++
      entry.owner = null
      entry.expiresAt = null
      entry.cancelRequested = true
    }
    return 'cancelled'
  }

  /**
   * Why a paused run cannot be queued again now (see `LeaseEngine.requeuePaused`): it was never
   * enqueued, or a live lease holds it. Undefined when it can.
   */
  blocksRequeue(runId: string, now = Date.now()): Exclude<RequeueOutcome, { outcome: 'queued' | 'not_paused' }> | undefined {
    const entry = this.#entries.get(runId)
    if (!entry || entry.queue === null) return { outcome: 'not_enqueued' }
    if (entry.owner !== null && entry.expiresAt !== null && entry.expiresAt >= now) {
      return { outcome: 'held', owner: entry.owner, leaseLeftMs: entry.expiresAt - now }
    }
    return undefined
  }

  /**
   * Clear the holder of a paused run being queued again (a lapsed one is fenced out by a raised
   * epoch); the engine sets the status, then calls `wake`.
   */
  requeue(runId: string): void {
    const entry = this.#entries.get(runId)
    if (!entry) return
    if (entry.owner !== null) entry.epoch++
    entry.owner = null
    entry.expiresAt = null
  }

  get(runId: string): LeaseRow | undefined {
    const entry = this.#entries.get(runId)
    return entry && leaseRow(runId, entry)
  }

  delete(runId: string): void {
    this.#entries.delete(runId)
  }

  /** Every entry, for persisting. */
  entries(): [string, LeaseEntry][] {
    return [...this.#entries].map(([runId, entry]) => [runId, { ...entry }])
  }

  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  wake(): void {
    for (const listener of this.#listeners) queueMicrotask(listener)
  }
}

function leaseRow(runId: string, entry: LeaseEntry): LeaseRow {
  return {
    runId,
    queue: entry.queue,
    priority: entry.priority,
    owner: entry.owner,
    epoch: entry.epoch,
    leaseExpiresAt: entry.expiresAt,
    recoveries: entry.recoveries,
    cancelRequested: entry.cancelRequested,
  }
}

/** The lease row of a run that was never enqueued. */
export function unleased(runId: string): LeaseRow {
  return { runId, queue: null, priority: 0, owner: null, epoch: 0, leaseExpiresAt: null, recoveries: 0, cancelRequested: false }
}
