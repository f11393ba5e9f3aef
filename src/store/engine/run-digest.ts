import { sha256 } from '../../core/hash.js'
import type { RunRow } from './rows.js'

/**
 * The fields of a run row its `digest` covers: everything a resume or a listing trusts but the
 * last seq (covered by the row's progress digest, its `seal`), the update time (a clock reading,
 * rewritten by every commit) and the lease columns (ownership, fenced by epochs).
 */
export const RUN_DIGEST_FIELDS = ['runId', 'status', 'name', 'threadId', 'workflowName', 'configSignature', 'metadata', 'createdAt'] as const

/** One field the digest covers. */
export type RunDigestField = (typeof RUN_DIGEST_FIELDS)[number]

/**
 * The unkeyed digest of a run row's fields: `r1.` and, per field of {@link RUN_DIGEST_FIELDS}, the
 * first 16 hex digits of SHA-256 over the run id, the field's name and its value, so a mismatch
 * names the field that changed. An engine stores it in the row's `digest` whenever it writes one
 * of those fields: a new row arrives with it, and a patch brings a function that computes it from
 * the row as patched (`RunPatch.digestOf`).
 */
export function runDigest(row: Pick<RunRow, RunDigestField>): string {
  return `r1.${RUN_DIGEST_FIELDS.map((field) => fieldDigest(row, field)).join('.')}`
}

/**
 * The fields of `row` whose part of an `r1.` digest does not match, or undefined when `digest`
 * is not an `r1.` digest of the right shape (then it matches nothing).
 */
export function changedRunFields(row: Pick<RunRow, RunDigestField>, digest: string): RunDigestField[] | undefined {
  const parts = digest.split('.')
  if (parts[0] !== 'r1' || parts.length !== RUN_DIGEST_FIELDS.length + 1) return undefined
  return RUN_DIGEST_FIELDS.filter((field, k) => parts[k + 1] !== fieldDigest(row, field))
}

/**
 * The unkeyed progress digest of a run row (`p1.` and SHA-256 over its run id and last seq), kept
 * in its `seal` and written by the commit that advances the last seq. A keyed store keeps a
 * signature there instead (see `runSeal`).
 */
export function runProgressDigest(runId: string, lastSeq: number): string {
  return `p1.${sha256(JSON.stringify(['run-progress', runId, lastSeq]))}`
}

function fieldDigest(row: Pick<RunRow, RunDigestField>, field: RunDigestField): string {
  // JSON keeps a string apart from a number and null apart from a missing value's `null`.
  return sha256(JSON.stringify([String(row.runId), field, row[field] ?? null])).slice(0, 16)
}
