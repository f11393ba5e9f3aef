import { FINISHED_STATUSES, type PruneResult } from './checkpoint-store.js'
import type { StorageEngine } from './engine/storage-engine.js'
import { retainedListLengths } from './engine/list-retention.js'
import { readFound } from './encoding/load-many.js'
import { sharedRefs } from './encoding/shared-outputs.js'

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
  const effectsDeleted = await engine.deleteEffects(runId, await sharedCallIds(engine, runId))
  return { checkpointsDeleted, effectsDeleted }
}

/**
 * The call ids of effects whose outputs the remaining checkpoints' list items hold by ref (a
 * tool result stored once, see `shared-outputs.ts`): their rows stay when the journal goes.
 */
async function sharedCallIds(engine: StorageEngine, runId: string): Promise<string[]> {
  const rows = await readFound(engine, await engine.listCheckpoints({ runId }))
  const longest = retainedListLengths(rows)
  // A row whose refs cannot be read: keep every effect rather than lose a shared output.
  if (longest === undefined) return (await engine.listEffects(runId)).map((effect) => effect.callId)
  if (longest.size === 0) return []
  const items = await engine.readLists(runId, [...longest].map(([id, n]) => ({ id, n, h: '' })))
  return [...sharedRefs(items.flat())]
}
