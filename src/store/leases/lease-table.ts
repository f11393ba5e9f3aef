import type { RunChanged, RunRow, RunSwap } from '../engine/rows.js'
import { applyRunPatch, RUN_CHANGED, swapFails } from '../engine/run-patch.js'
import { cancelStep, queueBudgets, requeueRefusal, withinBudgets } from './lease-steps.js'
import { CLAIMABLE_STATUSES, type AcquireOutcome, type AcquireRequest, type CancelOutcome, type ClaimedRun, type ClaimRequest, type EnqueueJob } from '../engine/lease-engine.js'
import type { Fence, HeartbeatRequest, HeartbeatRow, LeaseEngine, LeaseRow, LeaseSubscription, ReleaseRequest, RequeueOutcome, RequeueRequest } from '../engine/lease-engine.js'

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
 * The lease state of runs whose rows live in this process (memory, file), in a map; a
 * {@link TableLeases} runs the lease protocol over it. Its engine checks fences with `check`.
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

  get(runId: string): LeaseRow | undefined {
    const entry = this.#entries.get(runId)
    return entry && leaseRow(runId, entry)
  }

  /** The run's entry itself, for a change. */
  entry(runId: string): LeaseEntry | undefined {
    return this.#entries.get(runId)
  }

  /** Give the run a fresh entry (of no queue: a run never enqueued). */
  add(runId: string, job: { queue: string | null; priority: number; createdAt: number }): LeaseEntry {
    const entry = { ...job, owner: null, epoch: 0, expiresAt: null, recoveries: 0, cancelRequested: false }
    this.#entries.set(runId, entry)
    return entry
  }

  delete(runId: string): void {
    this.#entries.delete(runId)
  }

  /** Every entry, for persisting. */
  entries(): [string, LeaseEntry][] {
    return [...this.#entries].map(([runId, entry]) => [runId, { ...entry }])
  }

  /** Every entry itself, for a claim. */
  live(): IterableIterator<[string, LeaseEntry]> {
    return this.#entries.entries()
  }

  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  wake(): void {
    for (const listener of this.#listeners) queueMicrotask(listener)
  }
}

/** What a {@link TableLeases} needs of the engine whose runs it leases. */
export interface TableLeasesHost {
  /** The table; with `change`, made ready for a change of that run's lease (of any run's when undefined). */
  table(change?: { runId: string | undefined }): Promise<LeaseTable>
  /** The run's row as stored now (a claim copies it). */
  row(runId: string): RunRow | undefined
  /** Whether a write to the run is in progress: a claim skips it, so the write lands before a new owner starts. */
  busy?(runId: string): boolean
  /**
   * `fn` with the run's row, alone with the run, and `save`: store the run's new row (if any) and
   * the table, the row first when `rowFirst`. `save` changes what it changes in memory before it
   * first awaits, so an engine without persistence needs no lock: its changes are atomic.
   */
  change<T>(runId: string, fn: (row: RunRow | undefined, save: (row: RunRow | undefined, rowFirst: boolean) => Promise<void>) => Promise<T>): Promise<T>
  /** Store the table after a change of leases alone (a claim, a heartbeat). */
  persist?(table: LeaseTable): Promise<void>
}

/**
 * The lease protocol over a {@link LeaseTable}, for engines whose rows live in this process
 * (memory, file): every decision is made and applied to the table without awaiting, so a check
 * and the change after it are never interleaved with a claim. Wakes idle workers of the process.
 */
export class TableLeases implements LeaseEngine {
  readonly #host: TableLeasesHost

  constructor(host: TableLeasesHost) {
    this.#host = host
  }

  /** The table as it is (for fence checks). */
  table(): Promise<LeaseTable> {
    return this.#host.table()
  }

  async enqueue(row: RunRow, job: EnqueueJob): Promise<boolean> {
    const table = await this.#host.table({ runId: row.runId })
    const created = await this.#host.change(row.runId, async (stored, save) => {
      if (stored) return false
      table.add(row.runId, { ...job, createdAt: row.createdAt })
      // The entry is stored first: an entry without its run is never claimed, a run without its entry never would be.
      await save({ ...row }, false)
      return true
    })
    if (created) table.wake()
    return created
  }

  async claim(request: ClaimRequest): Promise<ClaimedRun[]> {
    const table = await this.#host.table({ runId: undefined })
    const now = Date.now()
    const rows = new Map<string, RunRow>()
    const live = new Map<string, number>()
    const candidates: [string, LeaseEntry][] = []
    for (const [runId, entry] of table.live()) {
      const row = entry.queue === null ? undefined : this.#claimable(runId)
      if (!row || !CLAIMABLE_STATUSES.includes(row.status)) continue
      rows.set(runId, row)
      if (isLive(entry, now)) live.set(entry.queue!, (live.get(entry.queue!) ?? 0) + 1)
      else if (request.queues === undefined || request.queues.includes(entry.queue!)) candidates.push([runId, entry])
    }
    candidates.sort(([aId, a], [bId, b]) => b.priority - a.priority || a.createdAt - b.createdAt || (aId < bId ? -1 : aId > bId ? 1 : 0))
    const budgets = queueBudgets(request, [...live].map(([queue, n]) => ({ queue, n })))
    const picked = withinBudgets(candidates.map(([runId, { queue }]) => ({ runId, queue })), budgets, request.limit)
    const claimed = picked.map((runId) => ({ run: { ...rows.get(runId)! }, lease: leaseRow(runId, take(table.entry(runId)!, request.owner, request.leaseMs, now)) }))
    if (claimed.length > 0) await this.#host.persist?.(table)
    return claimed
  }

  async acquire(request: AcquireRequest): Promise<AcquireOutcome> {
    const table = await this.#host.table({ runId: request.runId })
    return this.#host.change(request.runId, async (row, save): Promise<AcquireOutcome> => {
      const created = !row && request.create !== undefined
      const run = row ?? request.create
      if (!run) return { outcome: 'not_found' }
      const now = Date.now()
      const entry = table.entry(request.runId) ?? table.add(request.runId, { queue: null, priority: 0, createdAt: now })
      const dead = request.takeFrom !== undefined && entry.owner === request.takeFrom.owner && entry.epoch === request.takeFrom.epoch
      if (isLive(entry, now) && !dead) {
        if (created) await save({ ...run }, true)
        return { outcome: 'held', lease: leaseRow(request.runId, entry) }
      }
      take(entry, request.owner, request.leaseMs, now)
      await save(created ? { ...run } : undefined, true)
      return { outcome: 'acquired', run: { ...(this.#host.row(request.runId) ?? run) }, lease: leaseRow(request.runId, entry), created }
    })
  }

  async heartbeat(request: HeartbeatRequest): Promise<HeartbeatRow[]> {
    const table = await this.#host.table({ runId: request.runs[0]?.runId })
    const expires = Date.now() + request.leaseMs
    const held: HeartbeatRow[] = []
    for (const { runId, epoch } of request.runs) {
      const entry = table.entry(runId)
      if (!entry || entry.owner !== request.owner || entry.epoch !== epoch) continue
      entry.expiresAt = expires
      held.push({ runId, cancelRequested: entry.cancelRequested })
    }
    if (held.length > 0) await this.#host.persist?.(table)
    return held
  }

  async release({ fence, patch, failed = false }: ReleaseRequest): Promise<boolean | RunChanged> {
    const table = await this.#host.table({ runId: fence.runId })
    let claimable = false
    const released = await this.#host.change(fence.runId, async (row, save) => {
      if (!row || !table.check(fence).held) return false
      if (patch && swapFails(row, patch.swap)) return RUN_CHANGED
      const next = patch && applyRunPatch(row, patch)
      const entry = table.entry(fence.runId)!
      entry.owner = null
      entry.expiresAt = null
      if (failed) entry.recoveries++
      claimable = CLAIMABLE_STATUSES.includes((next ?? row).status)
      await save(next, true)
      return true
    })
    if (claimable) table.wake()
    return released
  }

  async cancel(runId: string, swap?: RunSwap): Promise<CancelOutcome | RunChanged | undefined> {
    const table = await this.#host.table({ runId })
    return this.#host.change(runId, async (row, save) => {
      if (!row) return undefined
      const now = Date.now()
      const entry = table.entry(runId)
      const step = cancelStep(row, entry !== undefined && isLive(entry, now), swap)
      if (step !== 'cancel') {
        if (step.outcome === 'requested') {
          entry!.cancelRequested = true
          await save(undefined, false)
        }
        return step
      }
      if (entry) fenceOut(entry).cancelRequested = true
      await save(applyRunPatch(row, { status: 'cancelled', updatedAt: Math.max(row.updatedAt, now), ...(swap ? { swap } : {}) }), false)
      return { outcome: 'cancelled', status: 'cancelled' }
    })
  }

  async requeuePaused({ runId, metadata, now, swap }: RequeueRequest): Promise<RequeueOutcome | RunChanged | undefined> {
    const table = await this.#host.table({ runId })
    const outcome = await this.#host.change(runId, async (row, save): Promise<RequeueOutcome | RunChanged | undefined> => {
      if (!row) return undefined
      const entry = table.entry(runId)
      const live = entry !== undefined && isLive(entry, now)
      const refused = requeueRefusal(row, { queue: entry?.queue ?? null, owner: entry?.owner ?? null, leaseLeftMs: live ? entry.expiresAt! - now : null }, swap)
      if (refused) return refused
      fenceOut(entry!)
      await save(applyRunPatch(row, { status: 'queued', metadata, updatedAt: Math.max(row.updatedAt, now), swap }), false)
      return { outcome: 'queued' }
    })
    // Once the run's change has settled: a claim skips a run that is being written.
    if (outcome?.outcome === 'queued') table.wake()
    return outcome
  }

  async getLease(runId: string): Promise<LeaseRow | undefined> {
    const table = await this.#host.table()
    return this.#host.row(runId) ? (table.get(runId) ?? unleased(runId)) : undefined
  }

  async subscribe(onWake: () => void): Promise<LeaseSubscription> {
    const unsubscribe = (await this.#host.table({ runId: undefined })).subscribe(onWake)
    return { close: async () => void unsubscribe() }
  }

  /** The row of a run a claim may take (not one being written, nor one that cannot be read). */
  #claimable(runId: string): RunRow | undefined {
    try {
      return this.#host.busy?.(runId) ? undefined : this.#host.row(runId)
    } catch {
      return undefined
    }
  }
}

/** The lease row of a run that was never enqueued. */
export function unleased(runId: string): LeaseRow {
  return { runId, queue: null, priority: 0, owner: null, epoch: 0, leaseExpiresAt: null, recoveries: 0, cancelRequested: false }
}

function isLive(entry: LeaseEntry, now: number): boolean {
  return entry.owner !== null && entry.expiresAt !== null && entry.expiresAt >= now
}

/** Give the lease to `owner` under a raised epoch; a lapsed holder counts one more recovery. */
function take(entry: LeaseEntry, owner: string, leaseMs: number, now: number): LeaseEntry {
  if (entry.owner !== null) entry.recoveries++
  entry.owner = owner
  entry.epoch++
  entry.expiresAt = now + leaseMs
  return entry
}

/** Clear the holder; a lapsed one is fenced out by a raised epoch. */
function fenceOut(entry: LeaseEntry): LeaseEntry {
  if (entry.owner !== null) entry.epoch++
  entry.owner = null
  entry.expiresAt = null
  return entry
}

function leaseRow(runId: string, entry: LeaseEntry): LeaseRow {
  const { queue, priority, owner, epoch, expiresAt, recoveries, cancelRequested } = entry
  return { runId, queue, priority, owner, epoch, leaseExpiresAt: expiresAt, recoveries, cancelRequested }
}
