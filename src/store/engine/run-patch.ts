import type { RunChanged, RunPatch, RunRow, RunSwap } from './rows.js'
import { runProgressDigest } from './run-digest.js'

/** The fields a {@link RunPatch} may change; a stray run id or last seq never reaches a stored row. */
const PATCHABLE_RUN_FIELDS = ['status', 'name', 'threadId', 'workflowName', 'configSignature', 'metadata', 'seal', 'updatedAt'] as const

/**
 * A run row with `patch` applied, as an engine stores it: the fields the patch sets, and the
 * digest of its swap (kept as it is without one). For engines that patch a row in code; check
 * the swap first ({@link swapFails}).
 */
export function applyRunPatch(row: RunRow, patch: RunPatch): RunRow {
  const updated: RunRow = { ...row }
  for (const key of PATCHABLE_RUN_FIELDS) if (patch[key] !== undefined) Object.assign(updated, { [key]: patch[key] })
  if (patch.swap) updated.digest = patch.swap.digest
  return updated
}

/** Whether a {@link RunSwap} must refuse its change: the stored row's digest is not the one it expects. */
export function swapFails(row: Pick<RunRow, 'digest'>, swap: RunSwap | undefined): boolean {
  return swap !== undefined && (row.digest ?? null) !== swap.ifDigest
}

/** What an engine answers when a swap fails. */
export const RUN_CHANGED: RunChanged = Object.freeze({ outcome: 'changed' })

/**
 * A row whose last seq the engine moves from what the row says to `lastSeq` (the file store's
 * run.json behind its checkpoint files after a crash between the two writes): an unkeyed
 * progress digest that matched the row's own last seq is carried to `lastSeq`; any other seal is
 * left as it is (a keyed store checks its signature against the checkpoints themselves).
 */
export function carryProgress(row: RunRow, lastSeq: number): RunRow {
  if (row.lastSeq === lastSeq) return row
  const seal = typeof row.seal === 'string' && row.seal === runProgressDigest(row.runId, row.lastSeq) ? runProgressDigest(row.runId, lastSeq) : row.seal
  return { ...row, lastSeq, seal: seal ?? null }
}
