import type { CheckpointRow, RunChanged, RunPatch, RunRow } from '../engine/rows.js'
import { applyRunPatch, RUN_CHANGED } from '../engine/run-patch.js'
import { RUN_DIGEST_FIELDS, runDigest, type RunDigestField } from '../engine/run-digest.js'
import type { KeyRing } from './key-ring.js'
import { stringOr } from './record-seal.js'
import { integrity, requireSignature, sign, verifies, verify, type SealContext } from './seal.js'

/**
 * A new run row as stored: a progress signature over no checkpoint (its `seal`) and the signature
 * of its fields (those of `RUN_DIGEST_FIELDS`) in its `digest`, bound to the run id, so a row
 * copied from another run does not verify either.
 */
export function sealNewRun(ring: KeyRing, row: RunRow): RunRow {
  return { ...row, seal: runSeal(ring, row.runId, row.lastSeq, undefined), digest: runFieldsSeal(ring, row) }
}

/** The signature of a run row's fields, kept in its `digest` (see {@link sealNewRun}). */
export function runFieldsSeal(ring: KeyRing, row: Pick<RunRow, RunDigestField>): string {
  return sign(ring, 'run-fields', fieldsOf(row))
}

/**
 * Check a stored run row's field signature: an edited field, or a signature missing or replaced
 * by an unkeyed digest, is a `CheckpointIntegrityError`.
 */
export function verifyRunFields(ring: KeyRing, row: RunRow): void {
  const context = runContext(row)
  if (row.digest === null || row.digest === undefined) {
    throw integrity(context, 'has no signature over its fields (written before run rows were signed whole): sign them with store.rekey()')
  }
  verify(ring, row.digest, 'run-fields', fieldsOf(row), context)
}

/**
 * A change from the store above, whose swap is in the unkeyed digests of the rows a keyed engine
 * hands out, as the engine below stores it: the stored row's field signature verified first (a
 * change never re-signs a row edited behind the store's back), then a swap that expects the
 * stored signature and writes the signature of the row as changed. `changed` when the stored row
 * is not the row the change was computed from (another writer changed it in between). A patch
 * without a swap passes as it is.
 */
export function signedPatch<P extends RunPatch>(ring: KeyRing, stored: RunRow, patch: P): P | RunChanged {
  if (!patch.swap) return patch
  verifyRunFields(ring, stored)
  if (runDigest(stored) !== patch.swap.ifDigest) return RUN_CHANGED
  return { ...patch, swap: { ifDigest: stored.digest ?? null, digest: runFieldsSeal(ring, applyRunPatch(stored, patch)) } }
}

/**
 * A run row's progress signature: HMAC over the run id, its last seq and the id and stored
 * (signed) digest of the checkpoint at that seq. It changes only when a commit advances the run,
 * so lease columns, status, name and metadata are outside it.
 */
export function runSeal(ring: KeyRing, runId: string, lastSeq: number, newest: Pick<CheckpointRow, 'id' | 'digest'> | undefined): string {
  return sign(ring, 'run-progress', progressFields(runId, lastSeq, newest))
}

/**
 * Check a stored run row against its seal and the newest stored checkpoint of the run: the row
 * must carry a signature over its last seq and exactly that checkpoint. A last seq lowered to an
 * older checkpoint (with the newer ones deleted), a row copied from another run, a row restored
 * from before later commits, or a newest checkpoint replaced is a `CheckpointIntegrityError`. A
 * row whose last seq is beyond every checkpoint left is not refused here: the rollback check
 * (`checkLatestAgainstRun`) refuses to resume it; the signature cannot be checked without the
 * checkpoint it names, but an unsigned one is refused.
 */
export function verifyRunSeal(ring: KeyRing, row: RunRow, newest: CheckpointRow | undefined): void {
  const context: SealContext = { ...runContext(row), checkpointId: newest?.id }
  const lastSeq = typeof row.lastSeq === 'number' ? row.lastSeq : undefined
  if (newest !== undefined && lastSeq !== undefined && newest.seq > lastSeq) {
    const found = `its newest checkpoint ${newest.id} is at seq ${newest.seq} but its row records seq ${lastSeq}`
    throw integrity(context, `was replayed: ${found}, so the run row was restored from an older copy or edited`)
  }
  if (lastSeq !== undefined && (newest?.seq ?? 0) < lastSeq) requireSignature(row.seal, context)
  else verify(ring, row.seal, 'run-progress', progressFields(row.runId, row.lastSeq, newest), context)
}

/**
 * Whether a run row's seal covers one of `earlier`, the run's checkpoints before its newest: a
 * commit whose checkpoints became durable before its run row was rewritten (an engine that writes
 * them apart, or a damaged last frame of a file store's log). The checkpoints after the sealed
 * one are each signed and bound to this run and seq, and checked when they are read, so
 * accepting the row rolls nothing back.
 */
export function sealCoversEarlier(ring: KeyRing, row: RunRow, earlier: readonly CheckpointRow[]): boolean {
  return earlier.some((checkpoint) => verifies(ring, row.seal, 'run-progress', progressFields(row.runId, checkpoint.seq, checkpoint)))
}

function runContext(row: RunRow): SealContext {
  return { runId: stringOr(row.runId), what: `run ${String(row.runId)}` }
}

function fieldsOf(row: Pick<RunRow, RunDigestField>): (string | number | null | undefined)[] {
  return RUN_DIGEST_FIELDS.map((field) => {
    const value: unknown = row[field]
    return typeof value === 'string' || typeof value === 'number' || value === null ? value : undefined
  })
}

function progressFields(runId: unknown, lastSeq: unknown, newest: Pick<CheckpointRow, 'id' | 'digest'> | undefined) {
  return [stringOr(runId), typeof lastSeq === 'number' ? lastSeq : undefined, newest?.id ?? null, newest?.digest ?? null]
}
