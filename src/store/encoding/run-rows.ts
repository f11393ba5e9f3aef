import { decodeValue, parseJson, serialize, type JsonObject } from '../../core/codec.js'
import { CairnError, CheckpointCorruptionError, InvalidArgumentError } from '../../core/errors.js'
import { RUN_STATUSES, type RunRecord, type UpdateRunInput } from '../store-types.js'
import type { RunDigestOf, RunPatch, RunRow } from '../engine/rows.js'
import { compareRunDigest, runDigest, runProgressDigest } from '../engine/run-digest.js'
import { isSignature } from '../trust/seal.js'
import { assertRunPatch } from './validate.js'

/** A checked run patch as an engine applies it: only the fields a caller may change, metadata encoded. */
export function toRunPatch(patch: UpdateRunInput): RunPatch {
  assertRunPatch(patch)
  // lastSeq, createdAt and the id are the store's.
  const rowPatch: RunPatch = { updatedAt: Date.now(), digestOf: digestAfterCheck }
  for (const key of ['status', 'name', 'threadId', 'workflowName', 'configSignature'] as const) {
    if (patch[key] !== undefined) Object.assign(rowPatch, { [key]: patch[key] })
  }
  if (patch.metadata !== undefined) rowPatch.metadata = encodeMetadata(patch.metadata)
  return rowPatch
}

/**
 * The digest of a run row about to be written, once the row it replaces has passed the checks of
 * every read: a status or metadata change never re-digests a row edited behind the store's back.
 */
export const digestAfterCheck: RunDigestOf = (row, before) => {
  checkRunRow(before)
  return runDigest(row)
}

/** Metadata is persisted through the codec, so it may hold Dates and the other tagged values. */
export function encodeMetadata(metadata: JsonObject | undefined): string {
  if (metadata === undefined) return '{}'
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
    throw new InvalidArgumentError('metadata must be a plain object')
  }
  return serialize(metadata, 'metadata')
}

/**
 * A run row as callers see it, checked: a field of the wrong type, an unknown status, a
 * malformed last seq or unreadable metadata is a {@link CheckpointCorruptionError} naming the
 * run, never a crash deeper in.
 */
export function decodeRunRow(row: RunRow): RunRecord {
  checkRunRow(row)
  const context = { runId: row.runId, what: `metadata of run ${row.runId}` }
  let metadata: unknown
  try {
    metadata = decodeValue(parseJson(row.metadata, context), context)
  } catch (err) {
    if (err instanceof CairnError) throw err
    throw new CheckpointCorruptionError(`run ${row.runId} has metadata that cannot be read (${(err as Error).message})`, { runId: row.runId, cause: err })
  }
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
    throw new CheckpointCorruptionError(`run ${row.runId} has metadata that is not an object`, { runId: row.runId })
  }
  // The digests are the store's business, not the caller's.
  const { seal: _seal, digest: _digest, ...fields } = row
  return { ...fields, metadata: metadata as JsonObject }
}

/**
 * Check a stored run row's shape and its digests: the `digest` over its fields (a mismatch names
 * the fields that changed) and the progress digest in its `seal` over its last seq. A row written
 * before run rows had digests (either one null or absent) is read as it is; it gets them at its
 * next write (a commit writes the progress digest, a status or metadata change the digest). A
 * signed row (a keyed store's, read here without its keys) keeps run rows listable without keys,
 * as its checkpoints' contents are not: only a store with the keys can check its signatures.
 */
export function checkRunRow(row: RunRow): void {
  const runId = row.runId
  const problem = runProblem(row) ?? digestProblem(row) ?? progressProblem(row)
  if (problem !== undefined) throw new CheckpointCorruptionError(`run ${String(runId)} ${problem}; restore its row from a backup`, { runId })
}

function digestProblem(row: RunRow): string | undefined {
  const { digest } = row
  if (digest === null || digest === undefined || isSignature(digest)) return undefined
  const compared = typeof digest === 'string' ? compareRunDigest(row, digest) : 'malformed'
  if (compared === 'match') return undefined
  if (compared === 'malformed') return 'has a malformed digest'
  if (compared.length === 0) return 'does not match its digest: the row or its digest was edited after it was written'
  return `has ${compared.length === 1 ? 'a field' : 'fields'} (${compared.join(', ')}) that ${compared.length === 1 ? 'does' : 'do'} not match its digest: the row was edited after it was written`
}

function progressProblem(row: RunRow): string | undefined {
  const { seal } = row
  // A signature is a keyed store's, checked there.
  if (seal === null || seal === undefined || isSignature(seal)) return undefined
  if (seal === runProgressDigest(row.runId, row.lastSeq)) return undefined
  return String(seal).startsWith('p1.')
    ? `has a last seq (${row.lastSeq}) that does not match its progress digest: the row was edited or restored from an older copy`
    : 'has a malformed progress digest'
}

const STATUSES: readonly string[] = RUN_STATUSES

function runProblem(row: RunRow): string | undefined {
  if (!STATUSES.includes(row.status)) return `has an unknown status ${JSON.stringify(row.status)}`
  if (!Number.isSafeInteger(row.lastSeq) || row.lastSeq < 0) return `has a malformed last seq (${String(row.lastSeq)})`
  for (const key of ['name', 'threadId', 'workflowName', 'configSignature'] as const) {
    if (row[key] !== null && typeof row[key] !== 'string') return `has a ${key} that is not a string`
  }
  if (typeof row.metadata !== 'string') return 'has no metadata'
  if (!Number.isFinite(row.createdAt)) return `has a malformed creation time (${String(row.createdAt)})`
  if (typeof row.runId !== 'string') return 'has a run id that is not a string'
  return undefined
}
