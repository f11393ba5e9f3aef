import { decodeValue, deserialize, parseJson, type JsonObject } from '../../core/codec.js'
import { CheckpointCorruptionError, CheckpointIntegrityError } from '../../core/errors.js'
import { digestMatches, sha256, STORED_DIGEST_CHARS } from '../../core/hash.js'
import type { SchemaRegistry } from '../../core/schema.js'
import type { CheckpointInfo, CheckpointRecord } from '../checkpoint-store.js'
import type { RunLoad, StorageEngine } from '../engine/storage-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, ListRef } from '../engine/rows.js'
import { isSignature, keyIdOf } from '../trust/seal.js'
import { cacheFromRefs, decodePayload, type ListCache } from './payload-lists.js'

/** The fields a checkpoint's digest covers, in order: all but the digest itself. */
const DIGEST_FIELDS = ['id', 'runId', 'parentId', 'seq', 'kind', 'phase', 'schemaVersion', 'createdAt', 'workflowName', 'terminal', 'metadata', 'body', 'lists'] as const

/** The digest a checkpoint row is stored with (see {@link STORED_DIGEST_CHARS}). */
export function storedDigest(row: Omit<CheckpointRow, 'digest'>): string {
  return checkpointDigest(row).slice(0, STORED_DIGEST_CHARS)
}

/** SHA-256 over every field of a checkpoint row but the digest itself. */
export function checkpointDigest(row: Omit<CheckpointRow, 'digest'>): string {
  return sha256(JSON.stringify(DIGEST_FIELDS.map((field) => row[field])))
}

/** A checkpoint row read back, checked, with its lists' items. */
export interface StoredCheckpoint {
  row: CheckpointRow
  refs: ListRef[]
  items: string[][]
}

/** Check a row's shape and digest and fetch its lists' items (its own rows, nothing else); any flaw is a corruption error. */
export async function readStoredCheckpoint(row: CheckpointRow, engine: StorageEngine, loaded?: RunLoad['lists']): Promise<StoredCheckpoint> {
  const refs = checkRow(row)
  // Lists read with the row (a run's load) serve when they reach as far as the refs; else they are read now.
  const held = refs.map((ref) => loaded?.find((list) => list.id === ref.id)?.items)
  if (refs.every((ref, k) => (held[k]?.length ?? -1) >= ref.n)) return { row, refs, items: refs.map((ref, k) => held[k]!.slice(0, ref.n)) }
  return { row, refs, items: await engine.readLists(row.runId, refs) }
}

/** Check a row's shape and digest and return its list refs; any flaw is a corruption error. */
export function checkRow(row: CheckpointRow): ListRef[] {
  assertHeader(row)
  if (typeof row.body !== 'string' || typeof row.lists !== 'string' || typeof row.digest !== 'string') {
    throw corrupt(idsOf(row), 'is missing its body, lists or digest')
  }
  if (isSignature(row.digest)) {
    throw new CheckpointIntegrityError(
      `checkpoint ${row.id} of run ${row.runId} is signed with key ${keyIdOf(row.digest) ?? '?'}, but this store has no keys: open it with its key ring ({ keys } or CAIRN_KEYS)`,
      { ...idsOf(row), keyId: keyIdOf(row.digest) },
    )
  }
  if (!digestMatches(row.digest, checkpointDigest(row))) {
    throw corrupt(idsOf(row), 'does not match its digest: the record was truncated or edited after it was written')
  }
  // Most records hold no list: their refs need no parse.
  if (row.lists === '[]') return []
  const refs = parseJson(row.lists, { ...idsOf(row), what: 'list refs' })
  if (!Array.isArray(refs) || !refs.every(isListRef)) throw corrupt(idsOf(row), 'has malformed list refs')
  return refs
}

/** The writer cache for a checkpoint row {@link checkRow} has checked: its lists as its refs name them. */
export function listCacheOf(row: CheckpointRow, refs: readonly ListRef[]): ListCache {
  if (refs.length === 0) return new Map()
  return cacheFromRefs(parseJson(row.body, { runId: row.runId, checkpointId: row.id, what: 'checkpoint body' }), refs)
}

/** Decode a stored checkpoint into the record callers see, upgrading it through `schemas`. */
export function toRecord(stored: StoredCheckpoint, schemas: SchemaRegistry): CheckpointRecord {
  const { row, refs, items } = stored
  const context = { runId: row.runId, checkpointId: row.id }
  const body = parseJson(row.body, { ...context, what: 'checkpoint body' })
  const payload = decodeValue(decodePayload({ body, refs, items, ...context }), { ...context, what: 'payload' })
  const upgraded = schemas.upgrade({ kind: row.kind, schemaVersion: row.schemaVersion, payload, ...context })
  return { ...decodeCheckedHeader(row), schemaVersion: upgraded.schemaVersion, payload: upgraded.payload }
}

/** Decode and check a header row; a malformed one is a corruption error. */
export function decodeHeader(row: CheckpointHeaderRow): CheckpointInfo {
  assertHeader(row)
  return decodeCheckedHeader(row)
}

/** {@link decodeHeader} of a row whose header {@link checkRow} has checked already. */
export function decodeCheckedHeader(row: CheckpointHeaderRow): CheckpointInfo {
  const { id, runId, parentId, seq, kind, phase, schemaVersion, createdAt, workflowName, terminal } = row
  const metadata = deserialize(row.metadata, { runId, checkpointId: id, what: 'metadata' })
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) throw corrupt({ runId, checkpointId: id }, 'has metadata that is not an object')
  return { id, checkpointId: id, runId, parentId, seq, kind, phase, schemaVersion, createdAt, workflowName, terminal, metadata: metadata as JsonObject }
}

function assertHeader(row: CheckpointHeaderRow): void {
  const ok =
    typeof row.id === 'string' &&
    typeof row.runId === 'string' &&
    (row.parentId === null || typeof row.parentId === 'string') &&
    Number.isSafeInteger(row.seq) &&
    row.seq > 0 &&
    typeof row.kind === 'string' &&
    typeof row.phase === 'string' &&
    Number.isInteger(row.schemaVersion) &&
    Number.isFinite(row.createdAt) &&
    (row.workflowName === null || typeof row.workflowName === 'string') &&
    typeof row.terminal === 'boolean' &&
    typeof row.metadata === 'string'
  if (!ok) throw corrupt(idsOf(row), 'has a malformed header (a field is missing or of the wrong type)')
}

function idsOf(row: CheckpointHeaderRow): { runId: string | undefined; checkpointId: string | undefined } {
  return { runId: typeof row.runId === 'string' ? row.runId : undefined, checkpointId: typeof row.id === 'string' ? row.id : undefined }
}

function isListRef(value: unknown): value is ListRef {
  if (typeof value !== 'object' || value === null) return false
  const ref = value as Record<string, unknown>
  return typeof ref.id === 'string' && Number.isSafeInteger(ref.n) && (ref.n as number) >= 0 && typeof ref.h === 'string'
}

function corrupt(ids: { runId: string | undefined; checkpointId: string | undefined }, problem: string): CheckpointCorruptionError {
  return new CheckpointCorruptionError(`checkpoint ${ids.checkpointId ?? '?'} of run ${ids.runId ?? '?'} ${problem}`, ids)
}
