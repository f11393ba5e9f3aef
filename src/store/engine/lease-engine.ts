import type { Fence, RunStatus } from '../store-types.js'
import type { RunChanged, RunPatch, RunRow, RunSwap } from './rows.js'

export type { Fence } from '../store-types.js'

/**
 * The lease protocol of the worker layer, an optional capability of a {@link StorageEngine}
 * (its `leases` field). Runs are enqueued into named queues; workers claim claimable runs (queued,
 * or `running` with no live lease), each claim raising the run's `lease_epoch`; they extend their
 * leases with heartbeats and give runs back with `release`. Every method that takes a fence
 * changes nothing when the fence is stale.
 *
 * Lease times are the backend's clock (the database server's for Postgres), so workers on
 * machines with skewed clocks agree on when a lease expired.
 */
export interface LeaseEngine {
  /** Insert `row` (status `queued`) as a claimable run of `job.queue`; false when the id is taken. */
  enqueue(row: RunRow, job: EnqueueJob): Promise<boolean>
  /**
   * Claim up to `limit` claimable runs for `owner`, most urgent first (highest priority, then
   * oldest): set the owner, raise the epoch, start a lease of `leaseMs`. A run claimed while
   * another owner's lease had lapsed counts one more recovery. No two claims ever return the same
   * run with the same epoch.
   */
  claim(request: ClaimRequest): Promise<ClaimedRun[]>
  /** Extend the leases `owner` still holds at the given epochs; returns those (the others were lost). */
  heartbeat(request: HeartbeatRequest): Promise<HeartbeatRow[]>
  /**
   * Give a run back: clear its owner and lease and apply `patch`; false when the fence is stale,
   * `{ outcome: 'changed' }` (nothing written) when the patch's swap expects another digest.
   */
  release(request: ReleaseRequest): Promise<boolean | RunChanged>
  /**
   * Cancel a run: one nobody holds live becomes `cancelled` at once (with the digest of `swap`; a
   * lapsed holder is fenced out); a held one gets a cancel request its holder sees at its next
   * fenced write or heartbeat. With a `swap`, nothing changes unless the stored digest is the one
   * it expects (else `{ outcome: 'changed' }`). Undefined for an unknown run.
   */
  cancel(runId: string, swap?: RunSwap): Promise<CancelOutcome | RunChanged | undefined>
  /**
   * Queue a `paused` run again, in one atomic step: only while it is still `paused`, was enqueued,
   * no live lease holds it and its digest is the one `request.swap` expects, set it `queued` with
   * `request.metadata` and the swap's digest, fence out a lapsed holder and wake idle workers as
   * `enqueue` does. Otherwise change nothing and say why. Undefined for an unknown run.
   */
  requeuePaused(request: RequeueRequest): Promise<RequeueOutcome | RunChanged | undefined>
  /**
   * `requeuePaused` for several runs in one transaction, each decided as on its own (a run named
   * twice is decided once); the outcomes in the order of `requests`. Optional.
   */
  requeuePausedMany?(requests: readonly RequeueRequest[]): Promise<(RequeueOutcome | RunChanged | undefined)[]>
  /**
   * Take the lease of one named run for `owner`, in one atomic step (how a `Runner` owns a run it
   * executes, enqueued or not): when no live lease holds it, or exactly `takeFrom` (a holder known
   * to be dead) does, set the owner, raise the epoch and start a lease of `leaseMs`; a lapsed or
   * dead holder counts one more recovery. Else `held`. With `create`, an unknown run is inserted
   * first; without it, it is `not_found`. The status is not changed.
   */
  acquire(request: AcquireRequest): Promise<AcquireOutcome>
  /** The lease columns of a run; undefined for an unknown run. */
  getLease(runId: string): Promise<LeaseRow | undefined>
  /**
   * Call `onWake` when runs may have become claimable (an enqueue, a release), from any process
   * when the backend can tell (Postgres `LISTEN/NOTIFY`). Undefined when it cannot: poll instead.
   */
  subscribe?(onWake: () => void): Promise<LeaseSubscription | undefined>
}

/** Where an enqueued run waits. */
export interface EnqueueJob {
  queue: string
  /** Higher runs first. */
  priority: number
}

/** What `claim` takes. */
export interface ClaimRequest {
  owner: string
  /** At most this many runs (at least 1). */
  limit: number
  leaseMs: number
  /** Only runs of these queues; every queue when absent. */
  queues?: readonly string[]
  /** The most runs of a queue that may be held at once, by all workers together. */
  queueLimits?: Readonly<Record<string, number>>
}

/** The lease columns of a run. */
export interface LeaseRow {
  runId: string
  /** Null for a run that was never enqueued (it is never claimed). */
  queue: string | null
  priority: number
  owner: string | null
  epoch: number
  /** Unix milliseconds on the backend's clock; null when nobody holds the run. */
  leaseExpiresAt: number | null
  /** Claims that found the previous holder's lease lapsed, plus executions released as failed. */
  recoveries: number
  cancelRequested: boolean
}

/** A run a claim handed out, with its lease as it is now. */
export interface ClaimedRun {
  run: RunRow
  lease: LeaseRow
}

/** What `acquire` takes. */
export interface AcquireRequest {
  runId: string
  owner: string
  leaseMs: number
  /** Insert this run (with the lease) when no run has the id. */
  create?: RunRow
  /** Take the lease even while it is live if exactly this owner holds it at this epoch (its process is known dead). */
  takeFrom?: { owner: string; epoch: number }
}

/** What `acquire` did: the lease is the caller's now, or a live owner holds it, or the run does not exist. */
export type AcquireOutcome =
  | { outcome: 'acquired'; run: RunRow; lease: LeaseRow; created: boolean }
  | { outcome: 'held'; lease: LeaseRow }
  | { outcome: 'not_found' }

/** What `heartbeat` takes: the runs `owner` believes it holds, at the epochs it claimed them. */
export interface HeartbeatRequest {
  owner: string
  leaseMs: number
  runs: readonly { runId: string; epoch: number }[]
}

/** A lease a heartbeat extended. */
export interface HeartbeatRow {
  runId: string
  cancelRequested: boolean
}

/** What `release` takes. */
export interface ReleaseRequest {
  fence: Fence
  /** Applied with the release (a final status, metadata). */
  patch?: RunPatch
  /** The execution ended without finishing the run: count one more recovery. */
  failed?: boolean
}

/** What `cancel` did: `cancelled` now, or `requested` from the holder; `unchanged` for a finished run. */
export interface CancelOutcome {
  outcome: 'cancelled' | 'requested' | 'unchanged'
  status: RunStatus
}

/** What `requeuePaused` takes. */
export interface RequeueRequest {
  runId: string
  /** The run's new metadata (encoded), computed from the row as read: written only under `swap`. */
  metadata: string
  /** Unix ms: the run's `updatedAt` becomes at least this. */
  now: number
  /** The digest the row must still have, and the requeued row's new one. */
  swap: RunSwap
  /**
   * An item to append to the run's list `listId` with the change, only when the run is queued (the
   * run log's record of it); an engine that does says so (`appended`), else the caller appends it.
   */
  append?: { listId: string; item: string }
}

/**
 * What `requeuePaused` did: `queued`; or nothing, because the run is not `paused`, a live lease
 * still holds it (for about `leaseLeftMs` more unless renewed), or it was never enqueued (a run of
 * a `Runner` of its own, which no worker would claim).
 */
export type RequeueOutcome =
  /** `appended`: the request's `append` was written with it (an engine that ignores `append` leaves it out). */
  | { outcome: 'queued'; appended?: boolean }
  | { outcome: 'not_paused'; status: RunStatus }
  | { outcome: 'held'; owner: string; leaseLeftMs: number }
  | { outcome: 'not_enqueued' }

/** A live `subscribe`. */
export interface LeaseSubscription {
  close(): Promise<void>
}

/** The statuses a claim picks runs from. */
export const CLAIMABLE_STATUSES: readonly RunStatus[] = ['queued', 'running']

/** The requeues of `requests`, in one call when the engine has `requeuePausedMany`, else one after the other. */
export async function requeueAll(engine: LeaseEngine, requests: readonly RequeueRequest[]): Promise<(RequeueOutcome | RunChanged | undefined)[]> {
  if (engine.requeuePausedMany) return engine.requeuePausedMany(requests)
  const outcomes: (RequeueOutcome | RunChanged | undefined)[] = []
  for (const request of requests) outcomes.push(await engine.requeuePaused(request))
  return outcomes
}
