import { CheckpointCorruptionError } from '../../core/errors.js'
import type { CheckpointHeaderRow, RunRow } from '../engine/rows.js'

/**
 * Whether a run's newest checkpoint is the one its row's `lastSeq` says it reached. An older one
 * means checkpoints after it were removed (deleted, restored from a backup, edited) and going on
 * would redo work already done: refused. `'ahead'` when the checkpoint is newer than the row (a
 * commit between the two reads, or a row edited back): the caller reads the row again.
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

/**
 * One entry of a run's log (see `run-log.ts`): an effect marked started, an effect given its
 * outcome, the run given a status, or the run's effects pruned.
 */
export type RunLogEntry = ['started' | 'finished', string] | ['status', string] | ['pruned']

/** The statuses a run is never moved out of but by an explicit `updateRun`, which its log records too. */
const SETTLED: readonly string[] = ['completed', 'cancelled']

/**
 * Check a run's effect journal against its log: each effect the log says started must be
 * `started` or finished, each one it says finished must be finished. An effect row put back from
 * `started` (or finished) to `pending`, or deleted, would have its call run again on resume; such
 * a journal is refused. Entries before the last `pruned` mark are checked only for the rows left
 * (a prune deletes a finished run's effects). `effects` must be read after `log`; with `only`, they
 * are that one call's row (or none) and only its entries are checked.
 */
export function checkEffectsAgainstLog(runId: string, log: readonly RunLogEntry[], effects: readonly { callId: string; status: string }[], only?: string | ReadonlySet<string>): void {
  const status = new Map(effects.map((effect) => [effect.callId, effect.status]))
  const pruned = log.findLastIndex((entry) => entry[0] === 'pruned')
  log.forEach((entry, at) => {
    if (entry[0] !== 'started' && entry[0] !== 'finished') return
    if (only !== undefined && (typeof only === 'string' ? entry[1] !== only : !only.has(entry[1]))) return
    const found = status.get(entry[1])
    if (found === undefined && at < pruned) return
    const ok = found === 'succeeded' || found === 'failed' || (entry[0] === 'started' && found === 'started')
    if (ok) return
    const now = found === undefined ? 'its effect row is gone' : `its effect row says ${found}`
    throw new CheckpointCorruptionError(
      `run ${runId} was rolled back: its log records that effect ${entry[1]} ${entry[0]}, but ${now}, so the row was deleted or put back from an older copy and resuming would run the call again; nothing was run. Restore the effect row from the backup it came from, and check the store with \`cairn verify\``,
      { runId },
    )
  })
}

/**
 * Check a run row's status against its log: once the log says the run was `completed` or
 * `cancelled` (and no later status), a row with another status was put back from an older copy
 * (a cancelled job would run, a finished run would be asked again). Such a row is refused.
 */
export function checkStatusAgainstLog(runId: string, log: readonly RunLogEntry[], status: string): void {
  const last = log.findLast((entry) => entry[0] === 'status')?.[1]
  if (last === undefined || !SETTLED.includes(last) || last === status) return
  throw new CheckpointCorruptionError(
    `run ${runId} was rolled back: its row says ${status}, but its log records that the run was ${last} after that, so the row was put back from an older copy; nothing was run. Restore the run row from the backup it came from, or set its status with store.updateRun once you know where the run stands`,
    { runId },
  )
}

/** A log item as stored (JSON text) read back; an item that is not an entry is a corruption. */
export function parseRunLogEntry(runId: string, item: string): RunLogEntry {
  let entry: unknown
  try {
    entry = JSON.parse(item)
  } catch {
    entry = undefined
  }
  const ok =
    Array.isArray(entry) &&
    ((entry.length === 1 && entry[0] === 'pruned') || (entry.length === 2 && ['started', 'finished', 'status'].includes(entry[0] as string) && typeof entry[1] === 'string'))
  if (!ok) throw new CheckpointCorruptionError(`run ${runId} has a log entry that cannot be read (${item.slice(0, 80)}); check the store with \`cairn verify\``, { runId })
  return entry as RunLogEntry
}
