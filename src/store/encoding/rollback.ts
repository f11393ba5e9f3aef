import { CheckpointCorruptionError } from '../../core/errors.js'
import type { CheckpointHeaderRow, RunRow } from '../engine/rows.js'

/**
 * Whether a run's newest checkpoint found is the one its row says it reached. A run row keeps
 * the seq of the last checkpoint committed (`lastSeq`, which never moves back); when the newest
 * checkpoint found has a lower seq, checkpoints after it were removed — by `delete`, by a restore
 * of an older backup, or by hand — and going on from the older one would redo work already done
 * (tool calls included). Such a run is refused; a fork goes on from any earlier checkpoint.
 *
 * Returns `'ahead'` when the checkpoint is newer than the row (a commit landing between the two
 * reads, or a row edited back); the caller reads the row again before deciding.
 */
export function checkLatestAgainstRun(run: RunRow | undefined, latest: Pick<CheckpointHeaderRow, 'id' | 'seq'> | undefined, runId: string): 'ok' | 'ahead' {
  const lastSeq = run?.lastSeq ?? 0
  const seq = latest?.seq ?? 0
  if (typeof seq !== 'number' || typeof lastSeq !== 'number' || !Number.isSafeInteger(lastSeq) || lastSeq < 0) {
    throw new CheckpointCorruptionError(`run ${runId} has a malformed last seq (${String(lastSeq)}) in its row`, { runId })
  }
  if (seq > lastSeq) return 'ahead'
  if (seq === lastSeq) return 'ok'
  const found = latest ? `its newest checkpoint is ${latest.id} at seq ${seq}` : 'it has no checkpoint left'
  throw new CheckpointCorruptionError(
    `run ${runId} was rolled back: ${found}, but the run reached seq ${lastSeq}, so the checkpoints after it were removed (deleted, restored from an older backup, or edited) and resuming would redo work already done; fork an earlier checkpoint into a new run to go on from it (store.fork)`,
    { runId, checkpointId: latest?.id },
  )
}

/** The error of a checkpoint newer than its run row, still so after reading the row again. */
export function aheadOfRun(run: RunRow | undefined, latest: Pick<CheckpointHeaderRow, 'id' | 'seq'>, runId: string): CheckpointCorruptionError {
  return new CheckpointCorruptionError(
    `run ${runId}: its newest checkpoint ${latest.id} is at seq ${latest.seq}, beyond the seq ${String(run?.lastSeq ?? 0)} its row records: the run row was edited or restored from an older backup`,
    { runId, checkpointId: latest.id },
  )
}
