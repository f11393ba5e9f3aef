import { sha256 } from '../../../core/hash.js'
import type { RunChanged, RunRow, RunSwap } from '../../engine/rows.js'
import { RUN_CHANGED, swapFails } from '../../engine/run-patch.js'
import { runRow as runRowOf } from '../../sql/engine-sql.js'
import type {
  AcquireOutcome,
  AcquireRequest,
  CancelOutcome,
  ClaimedRun,
  ClaimRequest,
  EnqueueJob,
  HeartbeatRequest,
  HeartbeatRow,
  LeaseEngine,
  LeaseRow,
  LeaseSubscription,
  ReleaseRequest,
  RequeueOutcome,
  RequeueRequest,
} from '../../engine/lease-engine.js'
import type { PostgresPool, PostgresQueryable, PostgresQueryResult } from './driver.js'
import { PostgresListener } from './postgres-listener.js'
import { RUN_PARAMS, postgresStatements } from './sql.js'
import { leaseStatements, releaseSql, type LeaseStatements } from './lease-sql.js'
import { WAITING_STATUSES } from '../../checkpoint-store.js'

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
    const limited = Object.keys(request.queueLimits ?? {})
      .filter((queue) => queues === null || queues.includes(queue))
      .sort()
    if (limited.length === 0) {
      const { rows } = await this.#db.query(this.#sql.claim, [request.owner, request.limit, queues, null, request.leaseMs])
      return claimedRows(rows)
    }
    return this.#db.transaction(async (db) => {
      // Locks in a fixed order, so two workers with overlapping limits never deadlock.
      for (const queue of limited) await db.query(this.#sql.lockQueue, [`cairn.queue:${this.#db.schema}:${queue}`])
      const budgets = new Map(limited.map((queue) => [queue, request.queueLimits![queue]!]))
      for (const row of (await db.query(this.#sql.liveCounts, [limited])).rows) {
        budgets.set(row.queue as string, budgets.get(row.queue as string)! - Number(row.n))
      }
      const full = [...budgets].filter(([, left]) => left <= 0).map(([queue]) => queue)
      const { rows: candidates } = await db.query(this.#sql.candidates, [request.limit * 4 + 16, queues, full.length === 0 ? null : full])
      const picked: string[] = []
      for (const { runId, queue } of candidates as { runId: string; queue: string }[]) {
        if (picked.length >= request.limit) break
        const left = budgets.get(queue)
        if (left !== undefined && left <= 0) continue
        if (left !== undefined) budgets.set(queue, left - 1)
        picked.push(runId)
      }
      if (picked.length === 0) return []
      const { rows } = await db.query(this.#sql.claimRuns, [request.owner, picked, request.leaseMs])
      return claimedRows(rows)
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
    if (rows[0]) return { outcome: 'acquired', run: runRowOf(rows[0]), lease: leaseRow(rows[0]), created }
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
      const run = (await db.query(this.#sql.lockForCancel, [runId])).rows[0]
      if (!run) return undefined
      if (swapFails(run, swap)) return RUN_CHANGED
      const status = run.status as RunRow['status']
      if (status === 'completed' || status === 'failed' || status === 'cancelled') return { outcome: 'unchanged', status }
      if (run.live === true) {
        await db.query(this.#sql.requestCancel, [runId])
        return { outcome: 'requested', status }
      }
      await db.query(this.#sql.cancelNow, [runId, Date.now(), swap?.digest ?? null])
      return { outcome: 'cancelled', status: 'cancelled' }
    })
  }

  async requeuePaused(request: RequeueRequest): Promise<RequeueOutcome | RunChanged | undefined> {
    return this.#db.transaction((db) => this.#requeue(db, request))
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
        if (!row) {
          outcomes.push(undefined)
          continue
        }
        const run = runRowOf(row)
        if (queued.has(request.runId)) outcomes.push({ outcome: 'not_paused', status: 'queued' })
        else if (!WAITING_STATUSES.includes(run.status)) outcomes.push({ outcome: 'not_paused', status: run.status })
        else if (row.queue === null) outcomes.push({ outcome: 'not_enqueued' })
        else if (row.live === true) outcomes.push({ outcome: 'held', owner: row.owner as string, leaseLeftMs: Number(row.leaseLeftMs) })
        else if (swapFails(run, request.swap)) outcomes.push(RUN_CHANGED)
        else {
          queued.set(request.runId, request)
          outcomes.push(request.append ? { outcome: 'queued', appended: true } : { outcome: 'queued' })
        }
      }
      if (queued.size === 0) return outcomes
      const runIds = [...queued.keys()]
      const decided = [...queued.values()]
      const now = Math.max(...decided.map((request) => request.now))
      const updated = await db.query(this.#sql.requeueMany, [runIds, decided.map((request) => request.metadata), now, decided.map((request) => request.swap.digest)])
      const appends = decided.flatMap((request) => (request.append ? [{ runId: request.runId, ...request.append }] : []))
      if (appends.length > 0) await db.query(this.#sql.appendItems, [appends.map((a) => a.runId), appends.map((a) => a.listId), appends.map((a) => a.item)])
      await db.query(this.#sql.wakeMany, [this.#channel, [...new Set(updated.rows.map((row) => row.queue as string))]])
      return outcomes
    })
  }

  /** Inside a transaction: one run's `requeuePaused`. */
  async #requeue(db: PostgresQueryable, { runId, metadata, now, swap, append }: RequeueRequest): Promise<RequeueOutcome | RunChanged | undefined> {
    const row = (await db.query(this.#sql.lockForRequeue, [runId])).rows[0]
    if (!row) return undefined
    const run = runRowOf(row)
    if (!WAITING_STATUSES.includes(run.status)) return { outcome: 'not_paused', status: run.status }
    if (row.queue === null) return { outcome: 'not_enqueued' }
    if (row.live === true) return { outcome: 'held', owner: row.owner as string, leaseLeftMs: Number(row.leaseLeftMs) }
    if (swapFails(run, swap)) return RUN_CHANGED
    await db.query(this.#sql.requeuePaused, [runId, metadata, now, this.#channel, swap.digest])
    if (!append) return { outcome: 'queued' }
    await db.query(this.#sql.appendItem, [runId, append.listId, append.item])
    return { outcome: 'queued', appended: true }
  }

  async getLease(runId: string): Promise<LeaseRow | undefined> {
    const { rows } = await this.#db.query(this.#sql.getLease, [runId])
    return rows[0] && leaseRow(rows[0])
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
    .map((row) => ({ run: runRowOf(row), lease: leaseRow(row) }))
    .sort((a, b) => b.lease.priority - a.lease.priority || a.run.createdAt - b.run.createdAt || (a.run.runId < b.run.runId ? -1 : 1))
}

function leaseRow(row: Record<string, unknown>): LeaseRow {
  return {
    runId: row.runId as string,
    queue: row.queue as string | null,
    priority: Number(row.priority),
    owner: row.owner as string | null,
    epoch: Number(row.epoch),
    leaseExpiresAt: row.leaseExpiresAt === null ? null : Number(row.leaseExpiresAt),
    recoveries: Number(row.recoveries),
    cancelRequested: row.cancelRequested === true,
  }
}
