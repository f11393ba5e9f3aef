import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { CairnError, InvalidArgumentError, LeaseLostError, parseOwner, RunBusyError } from '../core/errors.js'
import type { CreateRunInput, RunRecord, RunStore } from '../store/checkpoint-store.js'
import type { Fence, LeaseRow } from '../store/engine/lease-engine.js'
import type { RunLeases } from '../store/leases/run-leases.js'
import { processIsGone } from '../core/process-alive.js'

/** How long to wait for a run's owner to finish, when its lease is live (see `waitForOwner`). */
export type WaitForOwner = boolean | { timeoutMs: number }

/** What {@link RunOwnership.acquire} takes. */
export interface AcquireOwnershipParams {
  store: RunStore
  runId: string
  leaseMs: number
  /** Insert the run with the lease when it does not exist (`runner.run`). */
  create?: Omit<CreateRunInput, 'runId'>
  waitForOwner?: WaitForOwner
  signal?: AbortSignal | undefined
  /** The run's status is checked against its log by the read that follows (see `AcquireRunInput.checkStatus`). */
  statusCheckedLater?: boolean
}

/** A lease someone else already holds for this execution (a worker's claim): fence writes with it, never renew or release it. */
export interface HeldLease {
  fence: Fence
}

/** Tries in a row when a lease was found free just after taking it failed. */
const MAX_QUICK_RETRIES = 5

/** Longest pause between two tries while waiting for an owner. */
const MAX_WAIT_STEP_MS = 1000

/**
 * One execution's hold on one run: the lease taken through the store's lease protocol (the same
 * one workers claim runs with), the fence every write of the execution carries, a renewal in the
 * background (a timer, never a commit per checkpoint) and the release at the end. When a renewal
 * finds the lease taken over, or cannot renew it before it lapses, the ownership is lost: `signal`
 * aborts and every fenced write is rejected by the store.
 */
export class RunOwnership {
  readonly fence: Fence
  /** The run as it was when the lease was taken. */
  readonly run: RunRecord | undefined
  /** Whether `acquire` inserted the run. */
  readonly created: boolean
  readonly #leases: RunLeases | undefined
  readonly #leaseMs: number
  readonly #controller = new AbortController()
  #timer: NodeJS.Timeout | undefined
  #confirmedUntil: number
  #lost: LeaseLostError | undefined
  #renewing = false

  private constructor(params: { fence: Fence; run: RunRecord | undefined; created: boolean; leases: RunLeases | undefined; leaseMs: number; sentAt: number }) {
    this.fence = params.fence
    this.run = params.run
    this.created = params.created
    this.#leases = params.leases
    this.#leaseMs = params.leaseMs
    this.#confirmedUntil = params.sentAt + params.leaseMs
    if (params.leases) {
      this.#timer = setInterval(() => void this.#renew(), Math.max(1, Math.floor(params.leaseMs / 3)))
      this.#timer.unref()
    }
  }

  /**
   * Take the run's lease. A live owner makes this throw {@link RunBusyError} at once, or, with
   * `waitForOwner`, wait until it releases the run or its lease lapses. An owner on this machine
   * whose process is gone is taken over at once. An unknown run (without `create`) is undefined.
   */
  static async acquire(params: AcquireOwnershipParams): Promise<RunOwnership | undefined> {
    const leases = requireLeases(params.store, params.runId)
    const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`
    const deadline = waitDeadline(params.waitForOwner)
    let takeFrom: { owner: string; epoch: number } | undefined
    let quickRetries = 0
    for (let attempt = 0; ; attempt++) {
      const sentAt = Date.now()
      let outcome: Awaited<ReturnType<RunLeases['acquire']>>
      try {
        outcome = await leases.acquire({
          runId: params.runId,
          owner,
          leaseMs: params.leaseMs,
          ...(params.create ? { create: params.create } : {}),
          ...(takeFrom ? { takeFrom } : {}),
          ...(params.statusCheckedLater === true ? { checkStatus: false } : {}),
        })
      } catch (err) {
        // A store may refuse before it looks at the lease (a file store held by another live
        // process): that is a busy owner too, waited for like a held lease.
        if (!(err instanceof RunBusyError) || deadline === undefined || Date.now() >= deadline) throw err
        params.signal?.throwIfAborted()
        await sleep(waitStep({ leaseExpiresAt: err.leaseExpiresAt }, attempt, deadline), undefined, params.signal ? { signal: params.signal } : {})
        continue
      }
      if (outcome.outcome === 'not_found') return undefined
      if (outcome.outcome === 'acquired') {
        return new RunOwnership({ fence: outcome.fence, run: outcome.run, created: outcome.created, leases, leaseMs: params.leaseMs, sentAt })
      }
      const holder = outcome.lease
      // Released or lapsed between the take and the read of who holds it (a backend without one
      // transaction for both): take it again.
      const free = holder.owner === null || (holder.leaseExpiresAt !== null && holder.leaseExpiresAt < Date.now())
      if (free && quickRetries++ < MAX_QUICK_RETRIES) continue
      if (holder.owner !== null && ownerProcessIsGone(holder.owner) && takeFrom?.epoch !== holder.epoch) {
        takeFrom = { owner: holder.owner, epoch: holder.epoch }
        continue
      }
      const busy = new RunBusyError({ runId: params.runId, owner: holder.owner ?? 'unknown', leaseExpiresAt: holder.leaseExpiresAt })
      if (deadline === undefined || Date.now() >= deadline) throw busy
      params.signal?.throwIfAborted()
      await sleep(waitStep(holder, attempt, deadline), undefined, params.signal ? { signal: params.signal } : {})
    }
  }

  /** An execution under a lease its caller holds and renews (a worker's claim). */
  static held(lease: HeldLease): RunOwnership {
    return new RunOwnership({ fence: lease.fence, run: undefined, created: false, leases: undefined, leaseMs: Infinity, sentAt: Date.now() })
  }

  /** Aborts when the lease is lost. */
  get signal(): AbortSignal {
    return this.#controller.signal
  }

  /** Why the lease was lost, once it was. */
  get lost(): LeaseLostError | undefined {
    return this.#lost
  }

  /** Note a write the store rejected for this lease. */
  noteLost(error: LeaseLostError): void {
    this.#markLost(error)
  }

  /** Stop renewing and give the run back (a lost or lapsed lease is simply let go). */
  async release(): Promise<void> {
    clearInterval(this.#timer)
    this.#timer = undefined
    if (!this.#leases || this.#lost) return
    try {
      await this.#leases.release(this.fence)
    } catch {
      // Lost already, or the store is away: the lease lapses on its own after leaseMs.
    }
  }

  async #renew(): Promise<void> {
    if (Date.now() >= this.#confirmedUntil) {
      this.#markLost(new LeaseLostError({ ...this.fence, message: `run ${this.fence.runId}: the lease of ${this.fence.owner} could not be renewed within ${this.#leaseMs} ms; another process may take the run over, so this one writes nothing more` }))
      return
    }
    if (this.#renewing || !this.#leases || this.#lost) return
    this.#renewing = true
    const sentAt = Date.now()
    try {
      const held = await this.#leases.heartbeat({ owner: this.fence.owner, leaseMs: this.#leaseMs, runs: [{ runId: this.fence.runId, epoch: this.fence.epoch }] })
      if (held.length === 1) this.#confirmedUntil = sentAt + this.#leaseMs
      else this.#markLost(new LeaseLostError({ ...this.fence, message: `run ${this.fence.runId} was taken over from ${this.fence.owner} (epoch ${this.fence.epoch}): this execution writes nothing more` }))
    } catch {
      // The store is away for a moment: try again at the next tick, until the lease would lapse.
    } finally {
      this.#renewing = false
    }
  }

  #markLost(error: LeaseLostError): void {
    if (this.#lost) return
    this.#lost = error
    clearInterval(this.#timer)
    this.#timer = undefined
    this.#controller.abort(error)
  }
}

/** The store's leases, or a clear error when it has none. */
function requireLeases(store: RunStore, runId: string): RunLeases {
  const leases = store.leases
  if (!leases) {
    throw new CairnError(
      'invalid_argument',
      `run ${runId}: this store has no leases, so the runner cannot make sure no other process executes the run at the same time; use a Cairn store (MemoryStore, FileStore, SqliteStore, PostgresStore) or one that forwards their leases`,
    )
  }
  return leases
}

/** Whether an owner id names a process on this machine that no longer exists. */
export function ownerProcessIsGone(owner: string): boolean {
  const { host, pid } = parseOwner(owner)
  if (host !== hostname() || pid === undefined || pid === process.pid) return false
  return processIsGone(pid)
}

function waitDeadline(wait: WaitForOwner | undefined): number | undefined {
  if (wait === undefined || wait === false) return undefined
  if (wait === true) return Infinity
  if (!Number.isFinite(wait.timeoutMs) || wait.timeoutMs < 0) throw new InvalidArgumentError(`waitForOwner.timeoutMs must be a non-negative number, got ${String(wait.timeoutMs)}`)
  return Date.now() + wait.timeoutMs
}

/** Until the lease would lapse, but at most a second (it may be released sooner), growing from 25 ms. */
function waitStep(holder: Pick<LeaseRow, 'leaseExpiresAt'>, attempt: number, deadline: number): number {
  const untilLapse = holder.leaseExpiresAt === null ? MAX_WAIT_STEP_MS : holder.leaseExpiresAt - Date.now() + 1
  const step = Math.min(MAX_WAIT_STEP_MS, 25 * 2 ** Math.min(attempt, 6), Math.max(1, untilLapse))
  return Math.max(1, Math.min(step, deadline - Date.now()))
}
