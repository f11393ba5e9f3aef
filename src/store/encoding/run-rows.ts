import { deserialize, encodeValue, stringifyEncoded, type JsonObject } from '../../core/codec.js'
import { CheckpointError } from '../../core/errors.js'
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
  return stringifyEncoded(encodeValue(metadata, 'metadata'), 'metadata')
}

export function decodeRunRow(row: RunRow): RunRecord {
  const metadata = deserialize(row.metadata, { runId: row.runId, what: 'run metadata' })
  return { ...row, metadata: (metadata ?? {}) as JsonObject }
}
