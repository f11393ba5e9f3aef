import { sha256 } from '../../../core/hash.js'
import type { RunChanged, RunRow, RunSwap } from '../../engine/rows.js'
import { RUN_CHANGED, swapFails } from '../../engine/run-patch.js'
import { runRow as runRowOf } from '../../sql/engine-sql.js'
import type { AcquireOutcome, AcquireRequest, CancelOutcome, ClaimedRun, ClaimRequest, EnqueueJob, HeartbeatRequest } from '../../engine/lease-engine.js'
import type { HeartbeatRow, LeaseEngine, LeaseRow, LeaseSubscription, ReleaseRequest, RequeueOutcome, RequeueRequest } from '../../engine/lease-engine.js'
import type { PostgresPool, PostgresQueryable, PostgresQueryResult } from './driver.js'
import { PostgresListener } from './postgres-listener.js'
import { RUN_PARAMS, postgresStatements } from './sql.js'
import { leaseStatements, releaseSql, type LeaseStatements } from './lease-sql.js'
import { candidateScan, cancelStep, fullQueues, leaseRowOf, queueBudgets, requeueRefusal, withinBudgets, type HeldLease } from '../../leases/lease-steps.js'

/** What the leases need of their engine. */
export interface PostgresLeaseAccess {
  schema: string
  pool: PostgresPool
  /** One statement, once the schema is migrated. */
  query(text: string, values: unknown[]): Promise<PostgresQueryResult>
  /** `fn` in one transaction, once the schema is migrated. */
  transaction<T>(fn: (db: PostgresQueryable) => Promise<T>): Promise<T>
  warn(message: string): void
}

/**
 * The lease protocol on PostgreSQL, for workers on many machines. A claim is one statement
 * (`FOR UPDATE SKIP LOCKED`: no two workers ever take the same row, and a run whose commit is in
 * progress is skipped until it ends); under per-queue limits it runs in a transaction holding an
 * advisory lock per limited queue, so the limit holds across workers. Enqueues, releases and
 * requeues of paused runs `NOTIFY` a channel of the schema; `subscribe` `LISTEN`s on it. Lease
 * times are the server's clock.
 */
export class PostgresLeases implements LeaseEngine {
  readonly #db: PostgresLeaseAccess
  readonly #sql: LeaseStatements
  readonly #insertRun: string
  readonly #getRun: string
  readonly #channel: string

  constructor(access: PostgresLeaseAccess) {
    this.#db = access
    this.#sql = leaseStatements(access.schema)
    const statements = postgresStatements(access.schema)
    this.#insertRun = statements.insertRun
    this.#getRun = statements.getRun
    this.#channel = wakeChannel(access.schema)
  }

  async enqueue(row: RunRow, job: EnqueueJob): Promise<boolean> {
    const result = await this.#db.query(this.#sql.enqueue, [...RUN_PARAMS.map((key) => row[key] ?? null), job.queue, job.priority, this.#channel])
    return result.rows.length === 1
  }

  async claim(request: ClaimRequest): Promise<ClaimedRun[]> {
    const queues = request.queues === undefined ? null : [...request.queues]
    const limited = Object.keys(request.queueLimits ?? {}).filter((queue) => queues === null || queues.includes(queue))
    if (limited.length === 0) return claimedRows((await this.#db.query(this.#sql.claim, [request.owner, request.limit, queues, null, request.leaseMs])).rows)
    return this.#db.transaction(async (db) => {
      // Locks in a fixed order, so two workers with overlapping limits never deadlock.
      for (const queue of limited.sort()) await db.query(this.#sql.lockQueue, [`cairn.queue:${this.#db.schema}:${queue}`])
      const budgets = queueBudgets(request, (await db.query(this.#sql.liveCounts, [limited])).rows)
      const { rows: candidates } = await db.query(this.#sql.candidates, [candidateScan(request.limit), queues, fullQueues(budgets)])
      const picked = withinBudgets(candidates, budgets, request.limit)
      return picked.length === 0 ? [] : claimedRows((await db.query(this.#sql.claimRuns, [request.owner, picked, request.leaseMs])).rows)
    })
  }

  async acquire(request: AcquireRequest): Promise<AcquireOutcome> {
    let created = false
    if (request.create) {
      const row = request.create
      created = (await this.#db.query(this.#insertRun, RUN_PARAMS.map((key) => row[key] ?? null))).rowCount === 1
    }
    const values = [request.runId, request.owner, request.leaseMs, request.takeFrom?.owner ?? null, request.takeFrom?.epoch ?? null]
    const { rows } = await this.#db.query(this.#sql.acquire, values)
    if (rows[0]) return { outcome: 'acquired', run: runRowOf(rows[0]), lease: leaseRowOf(rows[0]), created }
    const current = await this.getLease(request.runId)
    return current ? { outcome: 'held', lease: current } : { outcome: 'not_found' }
  }

  async heartbeat(request: HeartbeatRequest): Promise<HeartbeatRow[]> {
    if (request.runs.length === 0) return []
    const { rows } = await this.#db.query(this.#sql.heartbeat, [
      request.owner,
      request.leaseMs,
      request.runs.map((run) => run.runId),
      request.runs.map((run) => run.epoch),
    ])
    return rows.map((row) => ({ runId: row.runId as string, cancelRequested: row.cancelRequested === true }))
  }

  async release({ fence, patch, failed = false }: ReleaseRequest): Promise<boolean | RunChanged> {
    const { text, values } = releaseSql(this.#db.schema, { ...fence, failed, channel: this.#channel, patch })
    if ((await this.#db.query(text, values)).rows.length === 1) return true
    // Nothing released: the fence is stale, or the digest is not the one the patch's swap expects.
    const row = patch?.swap && (await this.#db.query(this.#getRun, [fence.runId])).rows[0]
    return row && swapFails(row, patch.swap) ? RUN_CHANGED : false
  }

  async cancel(runId: string, swap?: RunSwap): Promise<CancelOutcome | RunChanged | undefined> {
    return this.#db.transaction(async (db) => {
      const run = (await db.query(this.#sql.lockForCancel, [runId])).rows[0] as (Record<string, unknown> & Pick<RunRow, 'status' | 'digest'>) | undefined
      if (!run) return undefined
      const step = cancelStep(run, run.live === true, swap)
      if (step !== 'cancel') {
        if (step.outcome === 'requested') await db.query(this.#sql.requestCancel, [runId])
        return step
      }
      await db.query(this.#sql.cancelNow, [runId, Date.now(), swap?.digest ?? null])
      return { outcome: 'cancelled', status: 'cancelled' }
    })
  }

  async requeuePaused(request: RequeueRequest): Promise<RequeueOutcome | RunChanged | undefined> {
    return (await this.requeuePausedMany([request]))[0]
  }

  /**
   * One transaction of a few statements, whatever the number of runs: the runs are locked in run
   * id order (two sweeps of overlapping batches wait for each other instead of deadlocking; the
   * second finds the runs queued already), decided, queued, given their digests and log entries,
   * and the workers woken.
   */
  async requeuePausedMany(requests: readonly RequeueRequest[]): Promise<(RequeueOutcome | RunChanged | undefined)[]> {
    if (requests.length === 0) return []
    return this.#db.transaction(async (db) => {
      const { rows } = await db.query(this.#sql.lockManyForRequeue, [[...new Set(requests.map((request) => request.runId))]])
      const locked = new Map(rows.map((row) => [row.runId as string, row]))
      const outcomes: (RequeueOutcome | RunChanged | undefined)[] = []
      const queued = new Map<string, RequeueRequest>()
      for (const request of requests) {
        const row = locked.get(request.runId)
        // A run named twice is decided once: its later requests find it queued.
        const refused = queued.has(request.runId) ? { outcome: 'not_paused' as const, status: 'queued' as const } : row && requeueRefusal(runRowOf(row), heldLease(row), request.swap)
        if (!row || refused) {
          outcomes.push(refused)
          continue
        }
        queued.set(request.runId, request)
        outcomes.push(request.append ? { outcome: 'queued', appended: true } : { outcome: 'queued' })
      }
      if (queued.size === 0) return outcomes
      const runIds = [...queued.keys()]
      const decided = [...queued.values()]
      const now = Math.max(...decided.map((request) => request.now))
      await db.query(this.#sql.requeueMany, [runIds, decided.map((request) => request.metadata), now, decided.map((request) => request.swap.digest), this.#channel])
      const appends = decided.flatMap((request) => (request.append ? [{ runId: request.runId, ...request.append }] : []))
      if (appends.length > 0) await db.query(this.#sql.appendItems, [appends.map((a) => a.runId), appends.map((a) => a.listId), appends.map((a) => a.item)])
      return outcomes
    })
  }

  async getLease(runId: string): Promise<LeaseRow | undefined> {
    const { rows } = await this.#db.query(this.#sql.getLease, [runId])
    return rows[0] && leaseRowOf(rows[0])
  }

  /**
   * `LISTEN` on the schema's channel over a connection of its own (re-established after a
   * server restart). Undefined when the pool's connections cannot deliver notifications (PGlite
   * through `PGliteClient`): workers poll instead.
   */
  async subscribe(onWake: () => void): Promise<LeaseSubscription | undefined> {
    const listener = new PostgresListener({ pool: this.#db.pool, channel: this.#channel, onWake, warn: (message) => this.#db.warn(message) })
    return (await listener.start()) ? listener : undefined
  }
}

/** The `NOTIFY` channel of a schema: a Postgres identifier, at most 63 bytes. */
export function wakeChannel(schema: string): string {
  const name = `cairn_wake_${schema}`
  return name.length <= 63 ? name : `cairn_wake_${sha256(schema).slice(0, 32)}`
}

function claimedRows(rows: Record<string, unknown>[]): ClaimedRun[] {
  return rows
    .map((row) => ({ run: runRowOf(row), lease: leaseRowOf(row) }))
    .sort((a, b) => b.lease.priority - a.lease.priority || a.run.createdAt - b.run.createdAt || (a.run.runId < b.run.runId ? -1 : 1))
}

/** A locked row's lease as a requeue reads it (`live` and `leaseLeftMs` on the server's clock). */
function heldLease(row: Record<string, unknown>): HeldLease {
  return { queue: row.queue as string | null, owner: row.owner as string | null, leaseLeftMs: row.live === true ? Number(row.leaseLeftMs) : null }
}
