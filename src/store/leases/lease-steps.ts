import { WAITING_STATUSES } from '../checkpoint-store.js'
import type { CancelOutcome, ClaimRequest, LeaseRow, RequeueOutcome } from '../engine/lease-engine.js'
import type { RunChanged, RunRow, RunSwap } from '../engine/rows.js'
import { RUN_CHANGED, swapFails } from '../engine/run-patch.js'

/** What the lease engines (the table's and the SQL one) decide alike, from the rows they read. */

/**
 * Why a paused run cannot be queued again now (see `LeaseEngine.requeuePaused`), given who holds
 * it and for how long more (`leaseLeftMs` null: nobody holds it live); undefined when it can.
 */
export function requeueRefusal(run: RunRow, lease: Pick<LeaseRow, 'queue' | 'owner'> & { leaseLeftMs: number | null }, swap: RunSwap): RequeueOutcome | RunChanged | undefined {
  if (!WAITING_STATUSES.includes(run.status)) return { outcome: 'not_paused', status: run.status }
  if (lease.queue === null) return { outcome: 'not_enqueued' }
  if (lease.leaseLeftMs !== null) return { outcome: 'held', owner: lease.owner!, leaseLeftMs: lease.leaseLeftMs }
  return swapFails(run, swap) ? RUN_CHANGED : undefined
}

/** What a cancel of a run does: nothing to a finished run, a request to a live holder, else it cancels now. */
export function cancelStep(row: Pick<RunRow, 'status' | 'digest'>, live: boolean, swap: RunSwap | undefined): CancelOutcome | RunChanged | 'cancel' {
  if (swapFails(row, swap)) return RUN_CHANGED
  if (row.status === 'completed' || row.status === 'failed' || row.status === 'cancelled') return { outcome: 'unchanged', status: row.status }
  return live ? { outcome: 'requested', status: row.status } : 'cancel'
}

/** The limited queues a claim may take from, each with what is left of its limit given its runs held live now. */
export function queueBudgets(request: ClaimRequest, live: readonly Record<string, unknown>[]): Map<string, number> {
  const budgets = new Map(Object.entries(request.queueLimits ?? {}).filter(([queue]) => request.queues === undefined || request.queues.includes(queue)))
  for (const { queue, n } of live) if (budgets.has(queue as string)) budgets.set(queue as string, budgets.get(queue as string)! - Number(n))
  return budgets
}

/** The candidates (in claim order) a claim takes: at most `limit`, none past its queue's budget. */
export function withinBudgets(candidates: readonly Record<string, unknown>[], budgets: Map<string, number>, limit: number): string[] {
  const picked: string[] = []
  for (const { runId, queue } of candidates) {
    if (picked.length >= limit) break
    const left = budgets.get(queue as string)
    if (left !== undefined && left <= 0) continue
    if (left !== undefined) budgets.set(queue as string, left - 1)
    picked.push(runId as string)
  }
  return picked
}
