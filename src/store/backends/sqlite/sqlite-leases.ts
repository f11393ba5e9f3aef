import type { RunChanged, RunPatch, RunRow, RunSwap } from '../../engine/rows.js'
import { RUN_CHANGED, swapFails } from '../../engine/run-patch.js'
import type { AcquireOutcome, AcquireRequest, CancelOutcome, ClaimedRun, ClaimRequest, EnqueueJob, HeartbeatRequest } from '../../engine/lease-engine.js'
import type { HeartbeatRow, LeaseEngine, LeaseRow, ReleaseRequest, RequeueOutcome, RequeueRequest } from '../../engine/lease-engine.js'
import type { SqliteDatabase, SqliteStatement, SqliteTransaction, SynchronousLevel } from './driver.js'
import { LEASE_SQL, SQL } from './sql.js'
import { candidateScan, cancelStep, fullQueues, leaseRowOf, queueBudgets, requeueRefusal, withinBudgets } from '../../leases/lease-steps.js'

/**
 * The lease protocol on SQLite, for workers in several processes on one machine sharing a
 * database file. Every call is one `BEGIN IMMEDIATE` transaction, which takes the database's
 * write lock before reading: claims never race (two processes never claim the same run at one
 * epoch), and a fenced commit's check and write cannot interleave with a claim. Lease times are
 * Unix milliseconds of this machine's clock. No notifications: idle workers poll.
 *
 * A transaction that changes only who holds a run (an acquire, a claim, a heartbeat, a release
 * with no final status) is committed without waiting for the disk (`synchronous = NORMAL` for
 * that transaction): other processes see it at once, which is all mutual exclusion needs, and
 * only a power loss or an OS crash could undo it, which stops every process that used the file
 * along with it. The first commit a holder makes of state (a checkpoint, an effect intent, a
 * status) syncs the write-ahead log, and with it every lease change written before. A change
 * of state made by the lease protocol (an enqueue, a cancel, a requeue, a release that records a
 * final status) is synced like any commit.
 */
export class SqliteLeases implements LeaseEngine {
  readonly #s: LeaseStatements
  readonly #getRun: SqliteStatement
  readonly #insertRun: SqliteStatement
  readonly #patchRun: (runId: string, patch: RunPatch) => unknown
  readonly #transaction: SqliteTransaction<[fn: () => unknown], unknown>
  /** The connection's `synchronous` level, shared with the engine: lease-only transactions relax it. */
  readonly #level: SynchronousLevel

  constructor(db: SqliteDatabase, patchRun: (runId: string, patch: RunPatch) => unknown, level: SynchronousLevel) {
    this.#s = Object.fromEntries(Object.entries(LEASE_SQL).map(([key, sql]) => [key, db.prepare(sql)])) as LeaseStatements
    this.#getRun = db.prepare(SQL.getRun)
    this.#insertRun = db.prepare(SQL.insertRun)
    this.#patchRun = patchRun
    this.#transaction = db.transaction((fn: () => unknown) => fn())
    this.#level = level
  }

  async enqueue(row: RunRow, job: EnqueueJob): Promise<boolean> {
    return this.#write(() => this.#s.enqueue.run({ ...row, seal: row.seal ?? null, digest: row.digest ?? null, ...job }).changes === 1)
  }

  async claim(request: ClaimRequest): Promise<ClaimedRun[]> {
    return this.#leaseOnly(() => {
      const now = Date.now()
      const limited = Object.keys(request.queueLimits ?? {})
      const live = limited.length === 0 ? [] : (this.#s.liveCounts.all({ now, queues: JSON.stringify(limited) }) as Record<string, unknown>[])
      const budgets = queueBudgets(request, live)
      const full = fullQueues(budgets)
      const candidates = this.#s.candidates.all({
        now,
        queues: request.queues === undefined ? null : JSON.stringify(request.queues),
        full: full && JSON.stringify(full),
        scan: budgets.size === 0 ? request.limit : candidateScan(request.limit),
      }) as Record<string, unknown>[]
      return withinBudgets(candidates, budgets, request.limit).map((runId) => {
        const lease = this.#s.claimRun.get({ runId, owner: request.owner, expires: now + request.leaseMs }) as Record<string, unknown>
        return { run: this.#getRun.get(runId) as RunRow, lease: leaseRowOf(lease) }
      })
    })
  }

  async acquire(request: AcquireRequest): Promise<AcquireOutcome> {
    // A run row created here holds no state yet: a run whose process stopped before its first
    // commit may be started again, so the row needs no sync of its own either.
    return this.#leaseOnly(() => {
      const now = Date.now()
      const created = request.create !== undefined && this.#insertRun.run({ ...request.create, seal: request.create.seal ?? null, digest: request.create.digest ?? null }).changes === 1
      const lease = this.#s.acquireRun.get({
        runId: request.runId,
        owner: request.owner,
        expires: now + request.leaseMs,
        now,
        takeOwner: request.takeFrom?.owner ?? null,
        takeEpoch: request.takeFrom?.epoch ?? null,
      }) as Record<string, unknown> | undefined
      if (lease) return { outcome: 'acquired', run: this.#getRun.get(request.runId) as RunRow, lease: leaseRowOf(lease), created }
      const current = this.#s.getLease.get(request.runId) as Record<string, unknown> | undefined
      return current ? { outcome: 'held', lease: leaseRowOf(current) } : { outcome: 'not_found' }
    })
  }

  async heartbeat(request: HeartbeatRequest): Promise<HeartbeatRow[]> {
    if (request.runs.length === 0) return []
    return this.#leaseOnly(() => {
      const expires = Date.now() + request.leaseMs
      const held: HeartbeatRow[] = []
      for (const { runId, epoch } of request.runs) {
        const row = this.#s.heartbeat.get({ runId, epoch, owner: request.owner, expires }) as { runId: string; cancelRequested: number } | undefined
        if (row) held.push({ runId: row.runId, cancelRequested: row.cancelRequested === 1 })
      }
      return held
    })
  }

  async release({ fence, patch, failed = false }: ReleaseRequest): Promise<boolean | RunChanged> {
    const release = () => {
      if (patch && swapFails((this.#getRun.get(fence.runId) as RunRow | undefined) ?? {}, patch.swap)) return RUN_CHANGED
      const released = this.#s.release.run({ runId: fence.runId, owner: fence.owner, epoch: fence.epoch, failed: failed ? 1 : 0 }).changes === 1
      if (released && patch) this.#patchRun(fence.runId, patch)
      return released
    }
    return patch ? this.#write(release) : this.#leaseOnly(release)
  }

  async cancel(runId: string, swap?: RunSwap): Promise<CancelOutcome | RunChanged | undefined> {
    return this.#write(() => {
      const now = Date.now()
      const lease = this.#s.getLease.get(runId) as (Record<string, unknown> & Pick<RunRow, 'status' | 'digest'>) | undefined
      if (!lease) return undefined
      const step = cancelStep(lease, lease.owner !== null && lease.leaseExpiresAt !== null && (lease.leaseExpiresAt as number) >= now, swap)
      if (step !== 'cancel') {
        if (step.outcome === 'requested') this.#s.requestCancel.run({ runId })
        return step
      }
      this.#s.cancelNow.run({ runId, now, digest: swap?.digest ?? null })
      return { outcome: 'cancelled', status: 'cancelled' }
    })
  }

  async requeuePaused(request: RequeueRequest): Promise<RequeueOutcome | RunChanged | undefined> {
    return this.#write(() => this.#requeue(request))
  }

  async requeuePausedMany(requests: readonly RequeueRequest[]): Promise<(RequeueOutcome | RunChanged | undefined)[]> {
    return this.#write(() => requests.map((request) => this.#requeue(request)))
  }

  /** Inside a write transaction: one run's `requeuePaused`. */
  #requeue({ runId, metadata, now, swap, append }: RequeueRequest): RequeueOutcome | RunChanged | undefined {
    const run = this.#getRun.get(runId) as RunRow | undefined
    const lease = this.#s.getLease.get(runId) as LeaseRow | undefined
    if (!run || !lease) return undefined
    const live = lease.owner !== null && lease.leaseExpiresAt !== null && lease.leaseExpiresAt >= now
    const refused = requeueRefusal(run, { ...lease, leaseLeftMs: live ? lease.leaseExpiresAt! - now : null }, swap)
    if (refused) return refused
    this.#s.requeuePaused.run({ runId, metadata, now, digest: swap.digest })
    if (!append) return { outcome: 'queued' }
    this.#s.appendItem.run({ runId, listId: append.listId, item: append.item })
    return { outcome: 'queued', appended: true }
  }

  async getLease(runId: string): Promise<LeaseRow | undefined> {
    const lease = this.#s.getLease.get(runId) as Record<string, unknown> | undefined
    return lease && leaseRowOf(lease)
  }

  #write<T>(fn: () => T): T {
    this.#level.use()
    return this.#transaction.immediate(fn) as T
  }

  /** {@link #write} for a transaction that changes only lease columns: committed without a sync (see the class). */
  #leaseOnly<T>(fn: () => T): T {
    this.#level.use('normal')
    return this.#transaction.immediate(fn) as T
  }
}

type LeaseStatements = { [K in keyof typeof LEASE_SQL]: SqliteStatement }
