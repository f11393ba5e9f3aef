import type { RunChanged, RunRow, RunSwap } from '../engine/rows.js'
import { RUN_CHANGED, swapFails } from '../engine/run-patch.js'
import { paramsOf, runRow, RUN_PARAMS } from '../sql/engine-sql.js'
import { sql, type SqlDriver, type SqlQuery, type SqlWork } from '../sql/sql-driver.js'
import type { AcquireOutcome, AcquireRequest, CancelOutcome, ClaimedRun, ClaimRequest, EnqueueJob, HeartbeatRequest } from '../engine/lease-engine.js'
import type { HeartbeatRow, LeaseEngine, LeaseRow, LeaseSubscription, ReleaseRequest, RequeueOutcome, RequeueRequest } from '../engine/lease-engine.js'
import { leaseSql, type LeaseSql } from './lease-sql.js'
import { cancelStep, queueBudgets, requeueRefusal, withinBudgets } from './lease-steps.js'

/** What only a Postgres store has (see {@link SqlLeases}). */
export interface SqlLeaseOptions {
  /** The channel enqueues, releases and requeues `NOTIFY` (a plain identifier). */
  channel?: string
  /** The statement that serializes claims of one limited queue until the transaction ends. */
  lockQueue?: (queue: string) => SqlQuery
  /** See {@link LeaseEngine.subscribe}. */
  subscribe?: (onWake: () => void) => Promise<LeaseSubscription | undefined>
}

/**
 * The lease protocol on a {@link SqlDriver}, written once for SQLite and Postgres (the statements
 * are `lease-sql.ts`). Fences, epochs and expiry live in the lease columns of the runs table, and
 * every decision is one statement or is made in a transaction on rows the statement just read.
 *
 * On SQLite, for workers in several processes on one machine sharing a database file, every call
 * is one `BEGIN IMMEDIATE` transaction, which takes the database's write lock before reading:
 * claims never race (two processes never claim the same run at one epoch), and a fenced commit's
 * check and write cannot interleave with a claim. Lease times are Unix ms of this machine's
 * clock; idle workers poll. A transaction that changes only who holds a run (an acquire, a
 * claim, a heartbeat, a release with no final status) is committed without waiting for the disk
 * (`relaxed`): other processes see it at once, which is all mutual exclusion needs, and only a
 * power loss or an OS crash could undo it, which stops every process that used the file along
 * with it. The first commit a holder makes of state (a checkpoint, an effect intent, a status)
 * syncs the write-ahead log, and with it every lease change written before. A change of state
 * made by the lease protocol (an enqueue, a cancel, a requeue, a release that records a final
 * status) is synced like any commit.
 *
 * On Postgres, for workers on many machines, a call of one statement runs on its own. A claim is
 * one statement (`FOR UPDATE SKIP LOCKED`: no two workers ever take the same row, and a run whose
 * commit is in progress is skipped until it ends); under per-queue limits it runs in a transaction
 * holding a lock per limited queue (`lockQueue`), so the limit holds across workers. Enqueues,
 * releases and requeues of paused runs `NOTIFY` the store's channel; `subscribe` `LISTEN`s on
 * it. Lease times are the server's clock.
 */
export class SqlLeases implements LeaseEngine {
  readonly #db: SqlDriver
  readonly #sql: LeaseSql
  readonly #options: SqlLeaseOptions
  /** SQLite: every call is one transaction, and statements take the time as their last parameter. */
  readonly #local: boolean
  /** That time, read inside the transaction (after waiting for the write lock); none on Postgres. */
  readonly #clock = (): number[] => (this.#local ? [Date.now()] : [])
  readonly subscribe?: (onWake: () => void) => Promise<LeaseSubscription | undefined>

  constructor(db: SqlDriver, options: SqlLeaseOptions = {}) {
    this.#db = db
    this.#sql = leaseSql(db.dialect, options.channel)
    this.#options = options
    this.#local = db.dialect.name === 'sqlite'
    if (options.subscribe) this.subscribe = options.subscribe
  }

  async enqueue(row: RunRow, job: EnqueueJob): Promise<boolean> {
    const query = sql(this.#sql.enqueue, ...paramsOf(row, RUN_PARAMS), job.queue, job.priority)
    return this.#run(function* () {
      return (yield query).rows.length === 1
    })
  }

  async claim(request: ClaimRequest): Promise<ClaimedRun[]> {
    const { dialect: d } = this.#db
    const s = this.#sql
    const queues = request.queues === undefined ? null : d.list(request.queues)
    const limited = [...queueBudgets(request, []).keys()]
    if (limited.length === 0 && s.claim !== undefined) return claimedRows((await this.#db.query(s.claim, [request.owner, request.limit, queues, null, request.leaseMs])).rows)
    const lockQueue = this.#options.lockQueue
    const clock = this.#clock
    return this.#run(
      function* () {
        const now = clock()
        // Locks in a fixed order, so two workers with overlapping limits never deadlock.
        if (lockQueue) for (const queue of [...limited].sort()) yield lockQueue(queue)
        const budgets = queueBudgets(request, limited.length === 0 ? [] : (yield sql(s.liveCounts, d.list(limited), ...now)).rows)
        // Under limits, more candidates than it takes: some fall past a budget.
        const scan = budgets.size === 0 ? request.limit : request.limit * 4 + 16
        const full = fullQueues(budgets)
        const candidates = (yield sql(s.candidates, scan, queues, full && d.list(full), ...now)).rows
        const picked = withinBudgets(candidates, budgets, request.limit)
        return picked.length === 0 ? [] : claimedRows((yield sql(s.claimRuns, request.owner, d.list(picked), request.leaseMs, ...now)).rows)
      },
      { atomic: limited.length > 0, relaxed: true },
    )
  }

  async acquire(request: AcquireRequest): Promise<AcquireOutcome> {
    const s = this.#sql
    const insert = request.create && sql(s.insertRun, ...paramsOf(request.create, RUN_PARAMS))
    const take = [request.runId, request.owner, request.leaseMs, request.takeFrom?.owner ?? null, request.takeFrom?.epoch ?? null]
    const clock = this.#clock
    // A run row created here holds no state yet: a run whose process stopped before its first
    // commit may be started again, so on SQLite the row needs no sync of its own either.
    return this.#run(
      function* (): SqlWork<AcquireOutcome> {
        const created = insert !== undefined && (yield insert).changes === 1
        const [row] = (yield sql(s.acquire, ...take, ...clock())).rows
        if (row) return { outcome: 'acquired', run: runRow(row), lease: leaseRowOf(row), created }
        const [current] = (yield sql(s.getLease, request.runId)).rows
        return current ? { outcome: 'held', lease: leaseRowOf(current) } : { outcome: 'not_found' }
      },
      { relaxed: true },
    )
  }

  async heartbeat(request: HeartbeatRequest): Promise<HeartbeatRow[]> {
    if (request.runs.length === 0) return []
    const held = JSON.stringify(request.runs.map((run) => [run.runId, run.epoch]))
    const { heartbeat } = this.#sql
    const clock = this.#clock
    const rows = await this.#run(function* () {
      return (yield sql(heartbeat, request.owner, request.leaseMs, held, ...clock())).rows
    }, { relaxed: true })
    return rows.map((row) => ({ runId: row.runId as string, cancelRequested: isTrue(row.cancelRequested) }))
  }

  async release({ fence, patch, failed = false }: ReleaseRequest): Promise<boolean | RunChanged> {
    const s = this.#sql
    const release = s.release(patch, [fence.runId, fence.owner, fence.epoch, failed ? 1 : 0])
    return this.#run(
      function* () {
        if ((yield release).rows.length === 1) return true
        // Nothing released: the fence is stale, or the digest is not the one the patch's swap expects.
        const row = patch?.swap && (yield sql(s.getRun, fence.runId)).rows[0]
        return row && swapFails(row, patch.swap) ? RUN_CHANGED : false
      },
      { relaxed: patch === undefined },
    )
  }

  async cancel(runId: string, swap?: RunSwap): Promise<CancelOutcome | RunChanged | undefined> {
    const s = this.#sql
    const clock = this.#clock
    return this.#run(
      function* () {
        const run = (yield sql(s.lockForCancel, runId, ...clock())).rows[0] as (Record<string, unknown> & Pick<RunRow, 'status' | 'digest'>) | undefined
        if (!run) return undefined
        const step = cancelStep(run, isTrue(run.live), swap)
        if (step !== 'cancel') {
          if (step.outcome === 'requested') yield sql(s.requestCancel, runId)
          return step
        }
        yield sql(s.cancelNow, runId, Date.now(), swap?.digest ?? null)
        return { outcome: 'cancelled', status: 'cancelled' } as const
      },
      { atomic: true },
    )
  }

  async requeuePaused(request: RequeueRequest): Promise<RequeueOutcome | RunChanged | undefined> {
    return (await this.requeuePausedMany([request]))[0]
  }

  /**
   * One transaction of a few statements, whatever the number of runs: the runs are locked in run
   * id order, decided, queued, given their digests and log entries, and the workers woken.
   */
  async requeuePausedMany(requests: readonly RequeueRequest[]): Promise<(RequeueOutcome | RunChanged | undefined)[]> {
    if (requests.length === 0) return []
    const { dialect: d } = this.#db
    const s = this.#sql
    const runIds = d.list([...new Set(requests.map((request) => request.runId))])
    const clock = this.#clock
    return this.#run(
      function* () {
        const locked = new Map((yield sql(s.lockForRequeue, runIds, ...clock())).rows.map((row) => [row.runId as string, row]))
        const queued = new Map<string, RequeueRequest>()
        const outcomes = requests.map((request): RequeueOutcome | RunChanged | undefined => {
          const row = locked.get(request.runId)
          // A run named twice is decided once: its later requests find it queued.
          const refused = queued.has(request.runId) ? { outcome: 'not_paused' as const, status: 'queued' as const } : row && requeueRefusal(runRow(row), heldLease(row), request.swap)
          if (!row || refused) return refused
          queued.set(request.runId, request)
          return request.append ? { outcome: 'queued', appended: true } : { outcome: 'queued' }
        })
        if (queued.size === 0) return outcomes
        const decided = [...queued.values()]
        const now = Math.max(...decided.map((request) => request.now))
        yield sql(s.requeue, JSON.stringify(decided.map((request) => [request.runId, request.metadata, request.swap.digest])), now)
        const appends = decided.flatMap((request) => (request.append ? [[request.runId, request.append.listId, request.append.item]] : []))
        if (appends.length > 0) yield sql(s.appendItems, JSON.stringify(appends))
        return outcomes
      },
      { atomic: true },
    )
  }

  async getLease(runId: string): Promise<LeaseRow | undefined> {
    const [row] = (await this.#db.query(this.#sql.getLease, [runId])).rows
    return row && leaseRowOf(row)
  }

  /**
   * `work` as one call: in one transaction when `atomic`, and on SQLite always; `relaxed` for
   * work that changes only lease columns (see the class).
   */
  #run<T>(work: () => SqlWork<T>, options: { atomic?: boolean; relaxed?: boolean } = {}): Promise<T> {
    return this.#db.run(work, { atomic: options.atomic === true || this.#local, relaxed: options.relaxed === true })
  }
}

/** A lease as selected: Postgres `bigint`s arrive as strings, SQLite booleans as 0/1. */
function leaseRowOf(row: Record<string, unknown>): LeaseRow {
  return {
    runId: row.runId as string,
    queue: row.queue as string | null,
    priority: Number(row.priority ?? 0),
    owner: row.owner as string | null,
    epoch: Number(row.epoch),
    leaseExpiresAt: row.leaseExpiresAt === null ? null : Number(row.leaseExpiresAt),
    recoveries: Number(row.recoveries),
    cancelRequested: isTrue(row.cancelRequested),
  }
}

/** The queues whose limit is reached (a claim's candidates leave them out). */
function fullQueues(budgets: Map<string, number>): string[] | null {
  const full = [...budgets].filter(([, left]) => left <= 0).map(([queue]) => queue)
  return full.length === 0 ? null : full
}

/** Claimed runs in claim order: highest priority, then oldest. */
function claimedRows(rows: Record<string, unknown>[]): ClaimedRun[] {
  return rows
    .map((row) => ({ run: runRow(row), lease: leaseRowOf(row) }))
    .sort((a, b) => b.lease.priority - a.lease.priority || a.run.createdAt - b.run.createdAt || (a.run.runId < b.run.runId ? -1 : 1))
}

/** A locked row's lease as a requeue reads it (`live` and `leaseLeftMs` on the backend's clock). */
function heldLease(row: Record<string, unknown>) {
  return { queue: row.queue as string | null, owner: row.owner as string | null, leaseLeftMs: isTrue(row.live) ? Number(row.leaseLeftMs) : null }
}

/** A condition as selected: a boolean on Postgres, 0 or 1 on SQLite. */
function isTrue(value: unknown): boolean {
  return value === true || value === 1
}
