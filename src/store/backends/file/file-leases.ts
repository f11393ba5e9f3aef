import { join } from 'node:path'
import type { RunChanged, RunRow, RunSwap } from '../../engine/rows.js'
import { applyRunPatch, RUN_CHANGED, swapFails } from '../../engine/run-patch.js'
import {
  CLAIMABLE_STATUSES,
  type AcquireOutcome,
  type AcquireRequest,
  type CancelOutcome,
  type ClaimedRun,
  type LeaseEngine,
  type LeaseSubscription,
  type RequeueOutcome,
  type RequeueRequest,
} from '../../engine/lease-engine.js'
import { LeaseTable, unleased, type LeaseEntry } from '../../leases/lease-table.js'
import type { DirectoryState } from './directory-state.js'
import { readJsonFile, writeFileAtomic } from './driver.js'
import type { RunLog } from './file-log.js'
import { WAITING_STATUSES } from '../../checkpoint-store.js'
import { StoreError } from '../../../core/errors.js'

/** What the leases need of their engine: a write under a run's lock, and a change of the run row (a frame of its log). */
export interface FileRunAccess {
  write<T>(runId: string, fn: (log: RunLog) => Promise<T>): Promise<T>
  putRun(log: RunLog, row: RunRow): Promise<void>
}

/**
 * The lease protocol of a file store, for several workers inside one process (a file store is
 * single-process: the first change to a lease takes the directory's `process.lock`, and a second
 * process is refused with `RunBusyError` until the first closes the store or dies). The lease
 * state of every enqueued run lives in one `leases.json` at the store's root, rewritten
 * atomically after each change and shared in memory by every engine the process opens on the
 * directory. A claim skips runs with a write in progress (as `SKIP LOCKED`
 * does), so a write checked against the old epoch always lands before the new owner starts.
 */
export class FileLeases implements LeaseEngine {
  readonly #dir: DirectoryState
  readonly #runs: FileRunAccess

  constructor(dir: DirectoryState, runs: FileRunAccess) {
    this.#dir = dir
    this.#runs = runs
  }

  /** The shared lease table, loaded from `leases.json` on first use. */
  table(): Promise<LeaseTable> {
    this.#dir.leases ??= this.#load().catch((err: unknown) => {
      this.#dir.leases = undefined
      throw err
    })
    return this.#dir.leases
  }

  async enqueue(row: RunRow, job: { queue: string; priority: number }): Promise<boolean> {
    const table = await this.#writable(row.runId)
    return this.#runs.write(row.runId, async (state) => {
      if (state.row) return false
      // The lease entry is durable first: an entry without its run is never claimed.
      table.add(row.runId, { ...job, createdAt: row.createdAt })
      await this.#persist(table)
      await this.#runs.putRun(state, { ...row })
      return true
    })
  }

  async claim(request: Parameters<LeaseEngine['claim']>[0]): Promise<ClaimedRun[]> {
    const table = await this.#writable(undefined)
    const states = new Map<string, RunLog>()
    for (const [runId] of table.entries()) {
      try {
        states.set(runId, this.#dir.runLog(runId))
      } catch {
        // A run that cannot be read is not claimed.
      }
    }
    // From here to the end of the claim nothing awaits: the decision is made at one instant.
    const claimed = table.claim(request, (runId) => (this.#dir.isLocked(runId) ? undefined : states.get(runId)?.row?.status))
    if (claimed.length > 0) await this.#persist(table)
    return claimed.map(({ runId, row }) => ({ run: { ...states.get(runId)!.row! }, lease: row }))
  }

  async acquire(request: AcquireRequest): Promise<AcquireOutcome> {
    const table = await this.#writable(request.runId)
    return this.#runs.write(request.runId, async (state): Promise<AcquireOutcome> => {
      let created = false
      if (!state.row) {
        if (!request.create) return { outcome: 'not_found' }
        await this.#runs.putRun(state, { ...request.create })
        created = true
      }
      if (!state.row) return { outcome: 'not_found' }
      const { acquired, row } = table.acquire(request.runId, request)
      if (!acquired) return { outcome: 'held', lease: row }
      await this.#persist(table)
      return { outcome: 'acquired', run: { ...state.row }, lease: row, created }
    })
  }

  async heartbeat(request: Parameters<LeaseEngine['heartbeat']>[0]) {
    const table = await this.#writable(request.runs[0]?.runId)
    const held = table.heartbeat(request)
    if (held.length > 0) await this.#persist(table)
    return held
  }

  async release({ fence, patch, failed = false }: Parameters<LeaseEngine['release']>[0]): Promise<boolean | RunChanged> {
    const table = await this.#writable(fence.runId)
    return this.#runs.write(fence.runId, async (state) => {
      if (!state.row || !table.check(fence).held) return false
      if (patch && swapFails(state.row, patch.swap)) return RUN_CHANGED
      if (patch) await this.#runs.putRun(state, applyRunPatch(state.row, patch))
      table.release(fence, { failed, claimableAfter: CLAIMABLE_STATUSES.includes(state.row.status) })
      await this.#persist(table)
      return true
    })
  }

  async cancel(runId: string, swap?: RunSwap): Promise<CancelOutcome | RunChanged | undefined> {
    const table = await this.#writable(runId)
    return this.#runs.write(runId, async (state) => {
      if (!state.row) return undefined
      if (swapFails(state.row, swap)) return RUN_CHANGED
      const outcome = table.cancel(runId, state.row.status)
      await this.#persist(table)
      if (outcome === 'cancelled') {
        await this.#runs.putRun(state, applyRunPatch(state.row, { status: 'cancelled', updatedAt: Math.max(state.row.updatedAt, Date.now()), ...(swap ? { swap } : {}) }))
      }
      return { outcome, status: state.row.status }
    })
  }

  async requeuePaused({ runId, metadata, now, swap }: RequeueRequest): Promise<RequeueOutcome | RunChanged | undefined> {
    const table = await this.#writable(runId)
    const outcome = await this.#runs.write(runId, async (state): Promise<RequeueOutcome | RunChanged | undefined> => {
      if (!state.row) return undefined
      if (!WAITING_STATUSES.includes(state.row.status)) return { outcome: 'not_paused', status: state.row.status }
      const blocked = table.blocksRequeue(runId, now)
      if (blocked) return blocked
      if (swapFails(state.row, swap)) return RUN_CHANGED
      const patch = { status: 'queued' as const, metadata, updatedAt: Math.max(state.row.updatedAt, now), swap }
      table.requeue(runId)
      await this.#persist(table)
      await this.#runs.putRun(state, applyRunPatch(state.row, patch))
      return { outcome: 'queued' }
    })
    // Once the run's write lock is released: a claim skips a run that is being written.
    if (outcome?.outcome === 'queued') table.wake()
    return outcome
  }

  async getLease(runId: string) {
    const table = await this.table()
    const state = this.#dir.runLog(runId)
    return state.row ? (table.get(runId) ?? unleased(runId)) : undefined
  }

  async subscribe(onWake: () => void): Promise<LeaseSubscription> {
    const unsubscribe = (await this.#writable(undefined)).subscribe(onWake)
    return { close: async () => void unsubscribe() }
  }

  /** Drop a deleted run's entry. */
  async forget(runId: string): Promise<void> {
    if (this.#dir.leases === undefined) return
    const table = await this.#writable(runId)
    if (table.get(runId) === undefined) return
    table.delete(runId)
    await this.#persist(table)
  }

  /**
   * The table, for a change: first make this process the only one taking leases in the directory
   * (the table lives in its memory), and read the table afresh when the lock was just taken.
   */
  async #writable(runId: string | undefined): Promise<LeaseTable> {
    await this.#dir.lockLeases(runId, () => (this.#dir.leases = undefined))
    return this.table()
  }

  async #load(): Promise<LeaseTable> {
    const path = this.#path()
    const file = readJsonFile(path)
    if (file.state === 'missing') return new LeaseTable()
    if (file.state === 'invalid' || !Array.isArray(file.value)) {
      throw new StoreError(`the lease file ${path} is corrupt; delete it to drop every lease (runs then start over from their queues' defaults)`)
    }
    return new LeaseTable(file.value as [string, LeaseEntry][])
  }

  /** Write the table as it is now, after every write queued before. */
  async #persist(table: LeaseTable): Promise<void> {
    const write = this.#dir.leaseWrites.then(() => writeFileAtomic(this.#path(), JSON.stringify(table.entries())))
    this.#dir.leaseWrites = write.catch(() => undefined)
    await write
  }

  #path(): string {
    return join(this.#dir.layout.root, 'leases.json')
  }
}
