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
 * The unkeyed digest of a run row's fields: `r1.`, SHA-256 over the values of
 * {@link RUN_DIGEST_FIELDS} in order, then a 32-bit FNV-1a checksum of each value, so a mismatch
 * can name the field that changed.
 */
export function runDigest(row: Pick<RunRow, RunDigestField>): string {
  const values = RUN_DIGEST_FIELDS.map((field) => valueText(row[field]))
  return `r1.${sha256(JSON.stringify(values))}.${values.map(checksum).join('')}`
}

/**
 * How `row` compares with an `r1.` digest: `match`, `malformed` (not an `r1.` digest of the right
 * shape), or the fields whose checksums differ (empty when the digest differs but no checksum
 * names a field: the digest itself was edited).
 */
export function compareRunDigest(row: Pick<RunRow, RunDigestField>, digest: string): 'match' | 'malformed' | RunDigestField[] {
  const parts = digest.split('.')
  if (parts.length !== 3 || parts[0] !== 'r1' || parts[2]!.length !== RUN_DIGEST_FIELDS.length * 8) return 'malformed'
  if (digest === runDigest(row)) return 'match'
  return RUN_DIGEST_FIELDS.filter((field, k) => parts[2]!.slice(k * 8, k * 8 + 8) !== checksum(valueText(row[field])))
}

/**
 * The unkeyed progress digest of a run row (`p1.` and SHA-256 over its run id and last seq), kept
 * in its `seal` and written by the commit that advances the last seq. A keyed store keeps a
 * signature there instead (see `runSeal`).
 */
export function runProgressDigest(runId: string, lastSeq: number): string {
  return `p1.${sha256(JSON.stringify(['run-progress', runId, lastSeq]))}`
}

/** A value as hashed: a string as itself (marked), anything else (a number, null, a hand-edited value) as JSON. */
function valueText(value: unknown): string {
  return typeof value === 'string' ? `s${value}` : `j${JSON.stringify(value ?? null)}`
}

/** FNV-1a over UTF-16 code units, as 8 hex digits: names a changed field, proves nothing. */
function checksum(text: string): string {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193)
  return (hash >>> 0).toString(16).padStart(8, '0')
}
