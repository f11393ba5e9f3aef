import { FINISHED_STATUSES, type PruneResult } from './checkpoint-store.js'
import type { StorageEngine } from './engine/storage-engine.js'

/**
 * Remove what a resume of `runId` cannot need: checkpoints beyond the `keepLast` newest (and,
 * with `olderThan`, only those created before it), never the latest and never a terminal one;
 * and the effect journal of a finished run (last updated before `olderThan`, when given).
 */
export async function pruneRun(
  engine: StorageEngine,
  params: { runId: string; keepLast: number; olderThan: number | undefined; markPruned?: () => Promise<void> },
): Promise<PruneResult> {
  const { runId, keepLast, olderThan, markPruned } = params
  const run = await engine.getRun(runId)
  if (!run) return { checkpointsDeleted: 0, effectsDeleted: 0 }
  const history = await engine.listCheckpoints({ runId })
  const doomed = history
    .slice(keepLast)
    .filter((cp) => !cp.terminal && (olderThan === undefined || cp.createdAt < olderThan))
    .map((cp) => cp.id)
  const checkpointsDeleted = doomed.length > 0 ? await engine.deleteCheckpoints(runId, doomed) : 0
  const finished = FINISHED_STATUSES.includes(run.status) && (olderThan === undefined || run.updatedAt < olderThan)
  if (!finished) return { checkpointsDeleted, effectsDeleted: 0 }
  // Marked in the run's log first, so a check of the journal against the log expects the rows gone.
  await markPruned?.()
  const effectsDeleted = await engine.deleteEffects(runId)
  return { checkpointsDeleted, effectsDeleted }
}
