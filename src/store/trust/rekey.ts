import { CheckpointCorruptionError, EncryptionChangeError, InvalidArgumentError, StoreError } from '../../core/errors.js'
import { listRows, type RewriteRequest } from '../engine/storage-engine.js'
import type { CheckpointRow, EffectRow, ListRef, RunRow } from '../engine/rows.js'
import { aheadOfRun, checkLatestAgainstRun } from '../encoding/rollback.js'
import { chainHash } from '../encoding/payload-lists.js'
import { decodeEffectRow } from '../encoding/effect-rows.js'
import { digestMatches } from '../../core/hash.js'
import { checkpointDigest } from '../encoding/checkpoint-rows.js'
import { checkRunRow, isRunChanged } from '../encoding/run-rows.js'
import { isSignature, keyIdOf, storedCiphertext } from './seal.js'
import type { SealedEngine } from './sealed-engine.js'
import { runFieldsSeal, runSeal, verifyRunFields, verifyRunSeal } from './run-seal.js'

/** Options of `store.rekey()`. */
export interface RekeyOptions {
  /**
   * Also sign (and encrypt) records written before the store had keys. Their SHA-256 digests are
   * checked first; a record that fails them is refused. This is the one step that turns signing on
   * for an existing store: run it once, when nobody can write to the store but you.
   */
  signUnsigned?: boolean
  /**
   * Encrypt the records stored in plaintext. A store opened with `encrypt: true` that holds
   * plaintext records is not rekeyed without it: turning encryption on is never a side effect.
   */
  encrypt?: boolean
  /**
   * Write the encrypted records in plaintext. A store opened without `encrypt` that holds
   * encrypted records is not rekeyed without it (open it with `encrypt: true` to keep them
   * encrypted): turning encryption off is never a side effect.
   */
  decrypt?: boolean
  /** Called after each run, for progress output. */
  onProgress?: (progress: RekeyProgress) => void
}

/** Where a rekey stands after one run. */
export interface RekeyProgress {
  runId: string
  /** Runs done so far, and how many there are. */
  runsDone: number
  runsTotal: number
  /** Records of this run rewritten under the writing key. */
  rewritten: number
}

/**
 * Whether a store's records that can be encrypted (checkpoint bodies, list items, effect
 * outputs) are: `yes` all of them, `no` none (or there are none), `partly` some.
 */
export type EncryptionState = 'yes' | 'no' | 'partly'

/** What a rekey did. */
export interface RekeyResult {
  runs: number
  checkpoints: number
  items: number
  effects: number
  /** Whether the store's records were encrypted before the rekey, and are after it. */
  encrypted: { before: EncryptionState; after: EncryptionState }
}

/** How many of a run's records that can be encrypted are, and are not. */
export interface EncryptionCount {
  encrypted: number
  plain: number
}

/** The state `counts` describe. */
export function encryptionState(counts: EncryptionCount): EncryptionState {
  if (counts.encrypted === 0) return 'no'
  return counts.plain === 0 ? 'yes' : 'partly'
}

/** Refuse options that ask for both, or for the opposite of what the store writes. */
export function checkEncryptionOptions(options: RekeyOptions, encrypt: boolean): void {
  if (options.encrypt === true && options.decrypt === true) {
    throw new InvalidArgumentError('rekey takes encrypt or decrypt, not both: pass encrypt: true to encrypt every record, decrypt: true to write every record in plaintext')
  }
  if (options.encrypt === true && !encrypt) {
    throw new InvalidArgumentError('rekey with encrypt: true needs a store opened with encrypt: true (so that what it writes afterwards is encrypted too)')
  }
  if (options.decrypt === true && encrypt) {
    throw new InvalidArgumentError('rekey with decrypt: true needs a store opened without encrypt (a store opened with encrypt: true encrypts what it writes afterwards)')
  }
}

/**
 * Re-seal every record of one run under the engine's writing key (and encryption setting):
 * each record is verified (or, with `signUnsigned`, checked against its plain digest) and opened
 * first, so nothing unverified is ever signed. Records already sealed as they should be are left
 * alone, so a rekey that stopped half way is simply run again.
 */
export async function rekeyRun(engine: SealedEngine, runId: string, options: RekeyOptions): Promise<{ request: RewriteRequest; before: EncryptionCount }> {
  const { inner, records } = engine
  const { keyId, encrypt } = records.sealing
  const stored = await listRows(inner, { runId })
  const storedEffects = await inner.listEffects(runId)
  const lists = [...refsByList(stored)].map(([id, refs]) => ({ id, n: Math.max(...refs.map((ref) => ref.n)) }))
  const storedItems = lists.length === 0 ? [] : await inner.readLists(runId, lists)
  // How many checkpoint bodies, list items and effect outputs are encrypted, and how many are not.
  const before: EncryptionCount = { encrypted: 0, plain: 0 }
  const count = (text: string) => (storedCiphertext(text) === undefined ? before.plain++ : before.encrypted++)
  stored.forEach((row) => count(row.body))
  storedItems.forEach((items) => items.forEach(count))
  storedEffects.forEach((row) => row.output !== null && count(row.output))
  refuseUnaskedChange(runId, before, encrypt, options)
  const plain = stored.map((row) => openRow(engine, row, options))
  const rows = stored.flatMap((row, k) => (keyIdOf(row.digest) === keyId && row.body.startsWith('"e1.') === encrypt ? [] : [records.sealCheckpoint(plain[k]!)]))
  // Every item of the run's lists, checked against the signed chain hashes, re-sealed where needed.
  const items = [...refsByList(plain)].flatMap(([listId, refs], k) => {
    const listItems = storedItems[k] ?? []
    const opened = listItems.map((item, idx) => records.openItem(runId, listId, idx, item))
    if (refs.some((ref) => opened.length < ref.n || chainHash('', opened.slice(0, ref.n)) !== ref.h)) {
      throw new CheckpointCorruptionError(`list ${listId} of run ${runId} does not match the checkpoints that refer to it; it is not re-sealed`, { runId })
    }
    return listItems.flatMap((item, idx) => {
      const sealed = storedCiphertext(item)
      const wanted = encrypt ? sealed !== undefined && keyIdOf(sealed) === keyId : sealed === undefined
      return wanted ? [] : [{ listId, idx, item: records.sealItem(runId, listId, idx, opened[idx]!) }]
    })
  })
  const signedBy = (value: string | null) => (value === null ? undefined : keyIdOf(value.slice(value.lastIndexOf('|') + 1)))
  const effects = storedEffects.flatMap((row) => {
    const outcomeSealed = row.output === null || (signedBy(row.outputHash) === keyId && row.output.startsWith('"e1.') === encrypt)
    if (signedBy(row.inputHash) === keyId && outcomeSealed) return []
    const open = openEffect(engine, row, options)
    const outcome = open.status === 'succeeded' || open.status === 'failed'
      ? records.sealCompletion({ runId, callId: open.callId, status: open.status, output: open.output!, outputHash: open.outputHash!, completedAt: open.completedAt ?? 0 })
      : undefined
    return [{ callId: row.callId, inputHash: records.sealIntent(open).inputHash, output: outcome?.output ?? null, outputHash: outcome?.outputHash ?? null }]
  })
  const request = { runId, checkpoints: rows.map(({ id, body, lists, digest }) => ({ id, body, lists, digest })), items, effects }
  return { request, before }
}

/**
 * The run row as it stands before a rekey, checked: a signed row must verify; a row without a
 * seal (written before keys were given, or before run rows were signed) must at least have its
 * newest checkpoint at its last seq, the check an unkeyed store makes.
 */
export async function checkRunForRekey(engine: SealedEngine, runId: string): Promise<RunRow | undefined> {
  const row = await engine.inner.getRun(runId)
  if (!row) return undefined
  const newest = await engine.inner.getLatest({ runId })
  if (isSignature(row.seal)) verifyRunSeal(engine.ring, row, newest)
  else if (checkLatestAgainstRun(row, newest, runId) === 'ahead') throw aheadOfRun(row, newest!, runId)
  // Fields signed are verified; an unkeyed digest must match; a row without one predates both.
  if (isSignature(row.digest)) verifyRunFields(engine.ring, row)
  else checkRunRow({ ...row, seal: null })
  return row
}

/** Sign the run row under the writing key, over its newest checkpoint as rewritten. */
export async function resealRun(engine: SealedEngine, runId: string, before: RunRow | undefined): Promise<void> {
  if (!before) return
  const newest = await engine.inner.getLatest({ runId })
  const seal = runSeal(engine.ring, runId, before.lastSeq, newest)
  const digest = runFieldsSeal(engine.ring, before)
  if (seal === before.seal && digest === before.digest) return
  // The fields signed are those checked before: a row changed since then is not signed.
  const changed = await engine.inner.updateRun(runId, { seal, updatedAt: before.updatedAt, swap: { ifDigest: before.digest ?? null, digest } })
  if (isRunChanged(changed)) {
    throw new StoreError(`run ${runId} changed while it was rekeyed, so its row was not signed; run rekey again`, { runId })
  }
}

function openRow(engine: SealedEngine, row: CheckpointRow, options: RekeyOptions): CheckpointRow {
  if (isSignature(row.digest) || options.signUnsigned !== true) return engine.records.openCheckpoint(row)
  if (!digestMatches(row.digest, checkpointDigest(row))) {
    const message = `checkpoint ${row.id} of run ${row.runId} does not match its digest; it is not signed until it is repaired or deleted`
    throw new CheckpointCorruptionError(message, { runId: row.runId, checkpointId: row.id })
  }
  return row
}

function openEffect(engine: SealedEngine, row: EffectRow, options: RekeyOptions): EffectRow {
  if (row.inputHash.includes('|s1.') || options.signUnsigned !== true) return engine.records.openEffect(row)
  try {
    // Its output hash and digests checked as an unkeyed store reads it.
    decodeEffectRow(row)
  } catch (err) {
    if (!(err instanceof CheckpointCorruptionError)) throw err
    throw new CheckpointCorruptionError(`${err.message}; it is not signed until it is repaired or deleted`, { runId: row.runId, cause: err })
  }
  return row
}

/**
 * Refuse a rekey that would encrypt plaintext records, or write encrypted ones in plaintext,
 * without `encrypt` or `decrypt` asking for it; nothing of the run is written then.
 */
function refuseUnaskedChange(runId: string, before: EncryptionCount, encrypt: boolean, options: RekeyOptions): void {
  if (encrypt && before.plain > 0 && options.encrypt !== true) {
    const message = `run ${runId} holds ${before.plain} records in plaintext, and this store is opened with encrypt: true, so a rekey would encrypt them; `
    throw new EncryptionChangeError({ runId, change: 'encrypt', message: `${message}pass encrypt: true to encrypt them, or open the store without encrypt to keep them in plaintext` })
  }
  if (!encrypt && before.encrypted > 0 && options.decrypt !== true) {
    const message = `run ${runId} holds ${before.encrypted} encrypted records, and this store is opened without encrypt, so a rekey would write them in plaintext; `
    throw new EncryptionChangeError({ runId, change: 'decrypt', message: `${message}open the store with encrypt: true to keep them encrypted, or pass decrypt: true to decrypt them` })
  }
}

/** The refs of the run's checkpoints, by list. */
function refsByList(rows: readonly CheckpointRow[]): Map<string, ListRef[]> {
  const refs = new Map<string, ListRef[]>()
  for (const row of rows) for (const ref of JSON.parse(row.lists) as ListRef[]) refs.set(ref.id, [...(refs.get(ref.id) ?? []), ref])
  return refs
}
