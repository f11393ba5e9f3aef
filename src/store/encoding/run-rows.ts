import { decodeValue, parseJson, serialize, type JsonObject } from '../../core/codec.js'
import { setTimeout as sleep } from 'node:timers/promises'
import { CairnError, CheckpointCorruptionError, InvalidArgumentError, StoreError } from '../../core/errors.js'
import { RUN_STATUSES, type CreateRunInput, type RunRecord, type UpdateRunInput } from '../store-types.js'
import type { RunChanged, RunPatch, RunRow, RunSwap } from '../engine/rows.js'
import { applyRunPatch } from '../engine/run-patch.js'
import { compareRunDigest, runDigest, runProgressDigest } from '../engine/run-digest.js'
import { isSignature } from '../trust/seal.js'
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

/**
 * The compare-and-set of a change computed from `before`, the row as read: its digest as
 * patched, written only while the stored row still has `before`'s. `before` passes the checks of
 * every read first, so a change never re-digests a row edited behind the store's back.
 */
export function swapFor(before: RunRow, patch: RunPatch): RunSwap {
  checkRunRow(before)
  return { ifDigest: before.digest ?? null, digest: runDigest(applyRunPatch(before, patch)) }
}

/** `patch` with the swap computed from `before` (see {@link swapFor}). */
export function swapPatch(before: RunRow, patch: RunPatch): RunPatch {
  return { ...patch, swap: swapFor(before, patch) }
}

/** Whether an engine's answer says the run row changed under a swap ({@link RunChanged}). */
export function isRunChanged(answer: unknown): answer is RunChanged {
  return typeof answer === 'object' && answer !== null && (answer as { outcome?: unknown }).outcome === 'changed'
}

/** Most times a change of a run row is computed again because another writer changed the row first. */
const RUN_CHANGE_ATTEMPTS = 12

/**
 * Change a run row by compare-and-set: `read` it, `write` the change computed from it (with a
 * {@link RunSwap}), and read and compute again while another writer changed the row in between.
 * Undefined when the run does not exist.
 */
export async function changeRun<T>(runId: string, read: () => Promise<RunRow | undefined>, write: (before: RunRow) => Promise<T | RunChanged>): Promise<T | undefined> {
  for (let attempt = 1; attempt <= RUN_CHANGE_ATTEMPTS; attempt++) {
    const before = await read()
    if (!before) return undefined
    const answer = await write(before)
    if (!isRunChanged(answer)) return answer
    // Another writer changed the row: back off with jitter so two writers do not keep colliding.
    await sleep(Math.random() * 2 ** attempt)
  }
  throw new StoreError(`run ${runId}: its row kept changing under concurrent writers after ${RUN_CHANGE_ATTEMPTS} attempts`, { runId })
}

/** The run a commit creates when it does not exist yet, with the progress digest of `seq`, the seq the commit leaves it at. */
export function commitRunRow(runId: string, workflowName: string | null, now: number, seq: number): RunRow {
  return runRowAt(runId, { workflowName }, now, seq)
}

/**
 * A new run row from what a caller gives (status `running` unless said), checked, with its
 * digest and the progress digest of seq 0.
 */
export function newRunRow(runId: string, input: Omit<CreateRunInput, 'runId'>, now = Date.now()): RunRow {
  return runRowAt(runId, input, now, 0)
}

/** A new run row (see {@link newRunRow}) with the progress digest of `seq`: one digest each, on every commit's path. */
function runRowAt(runId: string, input: Omit<CreateRunInput, 'runId'>, now: number, seq: number): RunRow {
  const createdAt = input.createdAt ?? now
  if (!Number.isSafeInteger(createdAt) || createdAt < 0) {
    throw new InvalidArgumentError(`run ${runId}: createdAt must be a time in Unix milliseconds, got ${String(createdAt)}`, { runId })
  }
  const fields = {
    runId,
    status: input.status ?? 'running',
    name: input.name ?? null,
    threadId: input.threadId ?? null,
    workflowName: input.workflowName ?? null,
    configSignature: input.configSignature ?? null,
    lastSeq: 0,
    createdAt,
    updatedAt: Math.max(now, createdAt),
    metadata: encodeMetadata(input.metadata),
  }
  assertRunPatch(fields)
  return { ...fields, digest: runDigest(fields), seal: runProgressDigest(runId, seq) }
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
  const { runId } = row
  const context = { runId, what: `metadata of run ${runId}` }
  let metadata: unknown
  try {
    metadata = decodeValue(parseJson(row.metadata, context), context)
  } catch (err) {
    if (err instanceof CairnError) throw err
    throw new CheckpointCorruptionError(`run ${runId} has metadata that cannot be read (${(err as Error).message})`, { runId, cause: err })
  }
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
    throw new CheckpointCorruptionError(`run ${runId} has metadata that is not an object`, { runId })
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
  const problem = runProblem(row) ?? digestProblem(row) ?? progressProblem(row)
  if (problem !== undefined) throw new CheckpointCorruptionError(`run ${String(row.runId)} ${problem}; restore its row from a backup`, { runId: row.runId })
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
  if (seal === null || seal === undefined || isSignature(seal)) return undefined
  if (seal === runProgressDigest(row.runId, row.lastSeq)) return undefined
  return String(seal).startsWith('p1.')
    ? `has a last seq (${row.lastSeq}) that does not match its progress digest: the row was edited or restored from an older copy`
    : 'has a malformed progress digest'
}

function runProblem(row: RunRow): string | undefined {
  if (!(RUN_STATUSES as readonly string[]).includes(row.status)) return `has an unknown status ${JSON.stringify(row.status)}`
  if (!Number.isSafeInteger(row.lastSeq) || row.lastSeq < 0) return `has a malformed last seq (${String(row.lastSeq)})`
  for (const key of ['name', 'threadId', 'workflowName', 'configSignature'] as const) {
    if (row[key] !== null && typeof row[key] !== 'string') return `has a ${key} that is not a string`
  }
  if (typeof row.metadata !== 'string') return 'has no metadata'
  if (!Number.isFinite(row.createdAt)) return `has a malformed creation time (${String(row.createdAt)})`
  if (typeof row.runId !== 'string') return 'has a run id that is not a string'
  return undefined
}
