import type { JsonObject } from '../../core/codec.js'
import { CairnError, CheckpointNotFoundError, InvalidArgumentError, LeaseLostError } from '../../core/errors.js'
import { newId } from '../../core/ids.js'
import type { CreateRunInput, RunRecord, RunStatus } from '../store-types.js'
import type { RunRow } from '../engine/rows.js'
import type { AcquireRequest, CancelOutcome, ClaimRequest, Fence, HeartbeatRequest, HeartbeatRow } from '../engine/lease-engine.js'
import { requeueAll, type LeaseEngine, type LeaseRow, type LeaseSubscription, type RequeueOutcome, type RequeueRequest } from '../engine/lease-engine.js'
import { changeRun, decodeRunRow, encodeMetadata, isRunChanged, newRunRow, swapFor, swapPatch, toRunPatch } from '../encoding/run-rows.js'
import { assertId } from '../encoding/validate.js'
import type { RunLogEntry } from '../encoding/rollback.js'
import { RUN_LOG_LIST } from '../engine/list-retention.js'

/** What `enqueue` takes. */
export interface EnqueueRunInput {
  /** A stable id makes the enqueue idempotent; a fresh one by default. */
  runId?: string
  name?: string | null
  threadId?: string | null
  metadata?: JsonObject
  /** Default `default`. */
  queue?: string
  /** Higher runs are claimed first. Default 0. */
  priority?: number
}

/** A run a claim handed to a worker, with the fence its writes must carry. */
export interface ClaimedLease {
  run: RunRecord
  fence: Fence
  lease: LeaseRow
  /**
   * Why the run must not be executed, when its row was put back from an older copy (its log
   * says it was cancelled or completed since): the claimant fails it with this error instead.
   */
  refused?: CairnError
}

/** What `RunLeases.acquire` takes: `create` is the run to insert (with the lease) when the id is unknown. */
export type AcquireRunInput = Omit<AcquireRequest, 'create'> & {
  create?: Omit<CreateRunInput, 'runId'>
  /**
   * False: the caller checks the run's status against its log itself before anything runs (a
   * resume's `EngineStore.openRun` does, in the read it makes anyway), so the acquire does not read the log.
   */
  checkStatus?: boolean
}

/** What `RunLeases.acquire` did (see {@link LeaseEngine.acquire}). */
export type AcquiredLease =
  | { outcome: 'acquired'; run: RunRecord; lease: LeaseRow; fence: Fence; created: boolean }
  | { outcome: 'held'; lease: LeaseRow }
  | { outcome: 'not_found' }

/** How a worker gives a run back. */
export interface ReleaseOptions {
  status?: RunStatus
  metadata?: JsonObject
  /** The execution ended without finishing the run: count one more recovery. */
  failed?: boolean
}

/** The queue a run goes to when none is named. */
export const DEFAULT_QUEUE = 'default'

/** Backend calls go through the store's wrapper (closed check, errors named after the run). */
type Call = <T>(runId: string | undefined, what: string, fn: () => Promise<T>) => Promise<T>

/** The runs' logs (see `RunLog`): status changes are recorded there, and run rows checked against them. */
export interface RunLogAccess {
  append(runId: string, entries: readonly RunLogEntry[]): Promise<void>
  /** Throws when the run's log says its status was settled otherwise (a typed error naming the run). */
  checkStatus(runId: string, status: string): Promise<void>
  /** Entries were appended to the run's log without this store: what it remembers of its length is stale. */
  forget(runId: string): void
}

/**
 * The queue and lease protocol of a store (`store.leases`): the checked, decoded surface of the
 * backend's {@link LeaseEngine}. The worker layer (`CairnClient`, `Worker`) is built on it.
 */
export class RunLeases {
  readonly #engine: LeaseEngine
  readonly #readRun: (runId: string) => Promise<RunRow | undefined>
  readonly #call: Call
  readonly #log: RunLogAccess

  /** `readRun` reads a run row as the store's engine gives it (verified, in a keyed store). */
  constructor(engine: LeaseEngine, readRun: (runId: string) => Promise<RunRow | undefined>, call: Call, log: RunLogAccess) {
    this.#engine = engine
    this.#readRun = readRun
    this.#call = call
    this.#log = log
  }

  /** Add a `queued` run; with a `runId` that exists already, nothing changes and `created` is false. */
  async enqueue(input: EnqueueRunInput = {}): Promise<{ run: RunRecord; created: boolean }> {
    const runId = input.runId ?? newId()
    assertId(runId, 'runId')
    const queue = input.queue ?? DEFAULT_QUEUE
    if (typeof queue !== 'string' || queue === '' || queue.includes('\u0000')) {
      throw new InvalidArgumentError(`queue must be a non-empty string, got ${JSON.stringify(queue)}`, { runId })
    }
    const priority = input.priority ?? 0
    if (!Number.isSafeInteger(priority) || Math.abs(priority) > 2 ** 31 - 1) {
      throw new InvalidArgumentError(`priority must be a 32-bit integer, got ${String(priority)}`, { runId })
    }
    const row = newRunRow(runId, { status: 'queued', name: input.name ?? null, threadId: input.threadId ?? null, ...(input.metadata ? { metadata: input.metadata } : {}) })
    const created = await this.#call(runId, 'enqueue run', () => this.#engine.enqueue(row, { queue, priority }))
    if (created) return { run: decodeRunRow(row), created }
    const existing = await this.#readRun(runId)
    if (!existing) throw new CheckpointNotFoundError(`run ${runId} disappeared while it was enqueued (deleted concurrently)`, { runId, code: 'run_not_found' })
    return { run: decodeRunRow(existing), created }
  }

  /** Claim runs for `request.owner` (see {@link LeaseEngine.claim}). */
  async claim(request: ClaimRequest): Promise<ClaimedLease[]> {
    if (!Number.isSafeInteger(request.limit) || request.limit < 1) throw new InvalidArgumentError(`claim limit must be a positive integer, got ${request.limit}`)
    if (!Number.isFinite(request.leaseMs) || request.leaseMs <= 0) throw new InvalidArgumentError(`leaseMs must be positive, got ${request.leaseMs}`)
    const claimed = await this.#call(undefined, 'claim runs', () => this.#engine.claim(request))
    return Promise.all(
      claimed.map(async ({ run, lease }) => {
        const refused = await this.#refusal(run.runId, run.status)
        return { run: decodeRunRow(run), lease, fence: { runId: run.runId, owner: request.owner, epoch: lease.epoch }, ...(refused ? { refused } : {}) }
      }),
    )
  }

  /**
   * Take the lease of one named run (see {@link LeaseEngine.acquire}): `acquired` with the fence
   * its writes must carry, `held` by a live owner (with its lease), or `not_found`.
   */
  async acquire(input: AcquireRunInput): Promise<AcquiredLease> {
    const { runId, create, checkStatus = true, ...rest } = input
    assertId(runId, 'runId')
    if (typeof input.owner !== 'string' || input.owner === '') throw new InvalidArgumentError('acquire needs a non-empty owner', { runId })
    if (!Number.isFinite(input.leaseMs) || input.leaseMs <= 0) throw new InvalidArgumentError(`leaseMs must be positive, got ${input.leaseMs}`, { runId })
    const request: AcquireRequest = { runId, ...rest, ...(create ? { create: newRunRow(runId, create) } : {}) }
    const outcome = await this.#call(runId, 'acquire run lease', () => this.#engine.acquire(request))
    if (outcome.outcome !== 'acquired') return outcome
    const { run, lease, created } = outcome
    const fence = { runId, owner: request.owner, epoch: lease.epoch }
    // Before anything runs: a row put back over a cancel or a completion is refused (the lease is given back).
    const refused = created || !checkStatus ? undefined : await this.#refusal(runId, run.status)
    if (refused) {
      await this.#call(runId, 'release run', () => this.#engine.release({ fence }))
      throw refused
    }
    return { outcome: 'acquired', run: decodeRunRow(run), lease, created, fence }
  }

  /** Extend the leases still held; returns those (a run missing from the answer was lost). */
  async heartbeat(request: HeartbeatRequest): Promise<HeartbeatRow[]> {
    return this.#call(undefined, 'extend leases', () => this.#engine.heartbeat(request))
  }

  /** Give a run back (clear its lease, apply a final status); throws {@link LeaseLostError} when the fence is stale. */
  async release(fence: Fence, options: ReleaseOptions = {}): Promise<void> {
    const { failed = false, ...fields } = options
    const change = fields.status !== undefined || fields.metadata !== undefined ? toRunPatch(fields) : undefined
    const released = await this.#call(fence.runId, 'release run', () =>
      change
        ? changeRun(fence.runId, () => this.#readRun(fence.runId), (before) => this.#engine.release({ fence, patch: swapPatch(before, change), failed }))
        : this.#engine.release({ fence, failed }),
    )
    if (released !== true) throw new LeaseLostError({ ...fence, message: `worker ${fence.owner} could not release run ${fence.runId}: it no longer holds it (epoch ${fence.epoch})` })
    if (change?.status !== undefined) await this.#log.append(fence.runId, [['status', change.status]])
  }

  /** Cancel a run now, or ask its holder to (see {@link LeaseEngine.cancel}). */
  async cancel(runId: string): Promise<CancelOutcome> {
    assertId(runId, 'runId')
    const outcome = await this.#call(runId, 'cancel run', () =>
      changeRun(runId, () => this.#readRun(runId), (before) => this.#engine.cancel(runId, swapFor(before, { status: 'cancelled', updatedAt: Date.now() }))),
    )
    if (!outcome) throw new CheckpointNotFoundError(`run ${runId} does not exist`, { runId, code: 'run_not_found' })
    if (outcome.outcome === 'cancelled') await this.#log.append(runId, [['status', 'cancelled']])
    return outcome
  }

  /**
   * Queue a `paused` run again, its metadata rewritten by `metadata` from the run as stored, in one
   * atomic step (see {@link LeaseEngine.requeuePaused}): two concurrent calls never both succeed,
   * and a cancel is never undone. An unknown run is a `run_not_found` error.
   */
  async requeuePaused(runId: string, metadata: (run: RunRecord) => JsonObject): Promise<RequeueOutcome> {
    assertId(runId, 'runId')
    const outcome = await this.#call(runId, 'queue paused run again', () =>
      changeRun(runId, () => this.#readRun(runId), async (before) => this.#engine.requeuePaused(await this.#requeueOf(before, metadata))),
    )
    if (!outcome) throw new CheckpointNotFoundError(`run ${runId} does not exist`, { runId, code: 'run_not_found' })
    if (outcome.outcome !== 'queued') return outcome
    return this.#logged(runId, outcome)
  }

  /**
   * {@link requeuePaused} for several runs, in one write of the engine when it can, each decided as
   * on its own (a run whose row changed since its read, again alone); an unknown run's outcome is undefined.
   */
  async requeuePausedMany(runIds: readonly string[], metadata: (run: RunRecord) => JsonObject): Promise<(RequeueOutcome | undefined)[]> {
    for (const runId of runIds) assertId(runId, 'runId')
    // The runs are read a few at a time: one after the other, a batch's reads would take longer than its write.
    const requests = new Map<string, RequeueRequest>()
    await eachLimited([...new Set(runIds)], CHECKS_AT_ONCE, async (runId) => {
      const row = await this.#readRun(runId)
      if (row) requests.set(runId, await this.#requeueOf(row, metadata))
    })
    const outcomes = await this.#call(runIds[0] ?? '', `queue ${runIds.length} paused runs again`, () =>
      requeueAll(this.#engine, runIds.flatMap((runId) => requests.get(runId) ?? [])),
    )
    const decided: (RequeueOutcome | undefined)[] = []
    for (const runId of runIds) {
      const outcome = requests.has(runId) ? outcomes.shift() : undefined
      if (isRunChanged(outcome)) decided.push(await this.requeuePaused(runId, metadata))
      else decided.push(outcome?.outcome === 'queued' ? await this.#logged(runId, outcome) : outcome)
    }
    return decided
  }

  /**
   * The requeue of a run as read: its status checked against its log (a paused row put back over
   * a completion or a cancel is refused before it is queued), its new metadata computed.
   */
  async #requeueOf(before: RunRow, metadata: (run: RunRecord) => JsonObject): Promise<RequeueRequest> {
    const run = decodeRunRow(before)
    await this.#log.checkStatus(run.runId, run.status)
    const now = Date.now()
    const encoded = encodeMetadata(metadata(run))
    return { runId: run.runId, now, metadata: encoded, swap: swapFor(before, { status: 'queued', metadata: encoded, updatedAt: now }), append: QUEUED_ENTRY }
  }

  /**
   * A requeued run's `queued` entry: written by the engine with the change (the length this store
   * remembers of the run's log is one short now), else appended in a commit of its own.
   */
  async #logged(runId: string, outcome: Extract<RequeueOutcome, { outcome: 'queued' }>): Promise<RequeueOutcome> {
    if (outcome.appended === true) this.#log.forget(runId)
    else await this.#log.append(runId, [['status', 'queued']])
    return { outcome: 'queued' }
  }

  /** A run's lease columns; undefined for an unknown run. */
  async getLease(runId: string): Promise<LeaseRow | undefined> {
    assertId(runId, 'runId')
    return this.#call(runId, 'read lease', () => this.#engine.getLease(runId))
  }

  /** The error of a run row its log refuses (see `RunLogAccess.checkStatus`), or undefined when it passes. */
  async #refusal(runId: string, status: string): Promise<CairnError | undefined> {
    try {
      await this.#log.checkStatus(runId, status)
      return undefined
    } catch (err) {
      if (err instanceof CairnError && (err.code === 'checkpoint_corrupt' || err.code === 'checkpoint_integrity')) return err
      throw err
    }
  }

  /** See {@link LeaseEngine.subscribe}; undefined when the backend cannot notify. */
  async subscribe(onWake: () => void): Promise<LeaseSubscription | undefined> {
    const subscribe = this.#engine.subscribe?.bind(this.#engine)
    return subscribe ? this.#call(undefined, 'listen for new runs', () => subscribe(onWake)) : undefined
  }
}

/** The run-log entry a requeue appends, with the change where the engine can (see `RequeueRequest.append`). */
const QUEUED_ENTRY = { listId: RUN_LOG_LIST, item: JSON.stringify(['status', 'queued'] satisfies RunLogEntry) }

/** How many runs a batch requeue reads at once before it writes. */
const CHECKS_AT_ONCE = 16

/** `fn` for every item, at most `limit` at a time. */
async function eachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const lane = async () => {
    while (next < items.length) await fn(items[next++]!)
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane))
}
