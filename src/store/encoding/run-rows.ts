import { decodeValue, parseJson, serialize, type JsonObject } from '../../core/codec.js'
import { CairnError, CheckpointCorruptionError, CheckpointError } from '../../core/errors.js'
import type { RunRecord, UpdateRunInput } from '../checkpoint-store.js'
import type { RunPatch, RunRow } from '../engine/rows.js'
import { assertRunPatch } from './validate.js'

/** A checked run patch as an engine applies it: only the fields a caller may change, metadata encoded. */
export function toRunPatch(patch: UpdateRunInput): RunPatch {
  assertRunPatch(patch)
  // lastSeq, createdAt and the id are the store's.
  const rowPatch: RunPatch = { updatedAt: Date.now() }
  for (const key of ['status', 'name', 'threadId', 'workflowName', 'configSignature'] as const) {
    if (patch[key] !== undefined) Object.assign(rowPatch, { [key]: patch[key] })
  }
  if (patch.metadata !== undefined) rowPatch.metadata = encodeMetadata(patch.metadata)
  return rowPatch
}

/** Metadata is persisted through the codec, so it may hold Dates and the other tagged values. */
export function encodeMetadata(metadata: JsonObject | undefined): string {
  if (metadata === undefined) return '{}'
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
    throw new CheckpointError('invalid_argument', 'metadata must be a plain object')
  }
  return serialize(metadata, 'metadata')
}

/**
 * A run row as callers see it, checked: a field of the wrong type, an unknown status, a
 * malformed last seq or unreadable metadata is a {@link CheckpointCorruptionError} naming the
 * run, never a crash deeper in.
 */
export function decodeRunRow(row: RunRow): RunRecord {
  const problem = runProblem(row)
  if (problem !== undefined) throw new CheckpointCorruptionError(`run ${String(row.runId)} ${problem}; restore its row from a backup`, { runId: row.runId })
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
  // The seal is the keyed store's business, not the caller's.
  const { seal: _seal, ...fields } = row
  return { ...fields, metadata: metadata as JsonObject }
}

const STATUSES: readonly string[] = ['queued', 'running', 'paused', 'completed', 'failed', 'cancelled']

function runProblem(row: RunRow): string | undefined {
  if (!STATUSES.includes(row.status)) return `has an unknown status ${JSON.stringify(row.status)}`
  if (!Number.isSafeInteger(row.lastSeq) || row.lastSeq < 0) return `has a malformed last seq (${String(row.lastSeq)})`
  for (const key of ['name', 'threadId', 'workflowName', 'configSignature'] as const) {
    if (row[key] !== null && typeof row[key] !== 'string') return `has a ${key} that is not a string`
  }
  if (typeof row.metadata !== 'string') return 'has no metadata'
  return undefined
}
