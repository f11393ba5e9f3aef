import { join } from 'node:path'
import { CheckpointCorruptionError } from '../../../core/errors.js'
import type { CheckpointRow, EffectRow, RunRow } from '../../engine/rows.js'
import { readJsonFile } from './driver.js'
import type { CheckpointFile, FileLayout } from './file-names.js'

/**
 * Reading the file store's JSON files back into engine rows. A run or effect file that is not
 * what the store wrote is an error naming the file; a checkpoint file that is not is handed to
 * `EngineStore` as a row that fails its checks, so it is reported as a
 * `CheckpointCorruptionError` with the run and checkpoint ids.
 */

/** A run.json: missing, or its row, or why it cannot be used. */
export type RunFile = { row: RunRow | undefined; error: Error | undefined }

export async function readRunFile(layout: FileLayout, runId: string): Promise<RunFile> {
  const path = layout.runFile(runId)
  const file = await readJsonFile(path)
  if (file.state === 'missing') return { row: undefined, error: undefined }
  const problem = file.state === 'invalid' ? file.reason : runRowProblem(file.value, runId)
  if (problem === undefined && file.state === 'parsed') {
    // A run file written before run rows had digests (or keyed stores signed them) has neither.
    const row = file.value as RunRow
    return { row: { ...row, seal: row.seal ?? null, digest: row.digest ?? null }, error: undefined }
  }
  return {
    row: undefined,
    error: new CheckpointCorruptionError(`run file ${path} of run ${runId} is corrupt: ${problem}; restore it from a backup, or delete the run's directory to drop the run`, { runId }),
  }
}

/** A checkpoint file read back. A `corrupt` one carries a row that `EngineStore` will reject. */
export type CheckpointRead =
  | { state: 'missing' }
  | { state: 'ok'; row: CheckpointRow }
  | { state: 'corrupt'; row: CheckpointRow; /** Why, as a predicate of "its file": `is not valid JSON (…)`. */ reason: string }

export async function readCheckpointFile(layout: FileLayout, runId: string, file: CheckpointFile): Promise<CheckpointRead> {
  const json = await readJsonFile(join(layout.checkpointsDir(runId), file.name))
  if (json.state === 'missing') return { state: 'missing' }
  // The ids come from the file name and the directory, so even an unreadable file can be named.
  const ids = { id: file.id, runId, seq: file.seq }
  if (json.state === 'invalid') return { state: 'corrupt', row: ids as CheckpointRow, reason: `is ${json.reason}` }
  const value = json.value
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { state: 'corrupt', row: ids as CheckpointRow, reason: 'is not a JSON object' }
  }
  const row = value as CheckpointRow
  if (row.id !== file.id || row.runId !== runId || row.seq !== file.seq) {
    // Overriding the ids breaks the digest, so EngineStore reports the row as corrupt.
    return { state: 'corrupt', row: { ...row, ...ids }, reason: 'holds an id, run id or seq other than its file name and directory give' }
  }
  return { state: 'ok', row }
}

/** An effect file's row; `order` breaks ties of `startedAt` (the order intents were recorded). */
export type StoredEffect = EffectRow & { order: number }

/** Parse an effect file; a missing one is `undefined`, a malformed one throws naming the file. */
export async function readEffectFile(path: string): Promise<StoredEffect | undefined> {
  const file = await readJsonFile(path)
  if (file.state === 'missing') return undefined
  const problem = file.state === 'invalid' ? file.reason : effectRowProblem(file.value)
  if (problem !== undefined || file.state !== 'parsed') {
    const value = file.state === 'parsed' ? (file.value as Partial<EffectRow> | null) : null
    const runId = typeof value?.runId === 'string' ? value.runId : undefined
    throw new CheckpointCorruptionError(
      `effect ${String(value?.callId ?? '?')} of run ${runId ?? '?'}: its file ${path} is corrupt: ${problem ?? 'unreadable'}; restore it from a backup or delete it (the effect's outcome is then unknown)`,
      { runId },
    )
  }
  return file.value as StoredEffect
}

/** The row without the file's bookkeeping. */
export function effectRow(stored: StoredEffect): EffectRow {
  const { order: _order, ...row } = stored
  return row
}

let lastOrder = 0

/** Microseconds since the epoch, strictly increasing in this process. */
export function nextEffectOrder(): number {
  lastOrder = Math.max(Math.round((performance.timeOrigin + performance.now()) * 1000), lastOrder + 1)
  return lastOrder
}

function runRowProblem(value: unknown, runId: string): string | undefined {
  if (!isRecord(value)) return 'not a JSON object'
  if (value.runId !== runId) return `it names run ${JSON.stringify(value.runId)}`
  if (typeof value.status !== 'string' || typeof value.metadata !== 'string') return 'status or metadata is missing'
  for (const key of ['lastSeq', 'createdAt', 'updatedAt']) if (typeof value[key] !== 'number') return `${key} is not a number`
  if (!Number.isSafeInteger(value.lastSeq) || (value.lastSeq as number) < 0) return 'lastSeq is not a non-negative integer'
  for (const key of ['name', 'threadId', 'workflowName', 'configSignature']) {
    if (value[key] !== null && typeof value[key] !== 'string') return `${key} is not a string or null`
  }
  if (value.seal !== undefined && value.seal !== null && typeof value.seal !== 'string') return 'seal is not a string or null'
  if (value.digest !== undefined && value.digest !== null && typeof value.digest !== 'string') return 'digest is not a string or null'
  return undefined
}

function effectRowProblem(value: unknown): string | undefined {
  if (!isRecord(value)) return 'not a JSON object'
  for (const key of ['runId', 'callId', 'name', 'inputHash', 'idempotencyKey', 'status']) {
    if (typeof value[key] !== 'string') return `${key} is not a string`
  }
  if (!['pending', 'started', 'succeeded', 'failed'].includes(value.status as string)) return `unknown status ${JSON.stringify(value.status)}`
  for (const key of ['attempts', 'startedAt']) if (typeof value[key] !== 'number') return `${key} is not a number`
  for (const key of ['output', 'outputHash']) if (value[key] !== null && typeof value[key] !== 'string') return `${key} is not a string or null`
  if (value.completedAt !== null && typeof value.completedAt !== 'number') return 'completedAt is not a number or null'
  return undefined
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
