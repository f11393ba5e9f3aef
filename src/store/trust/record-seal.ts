import type { CheckpointRow, EffectCompletionRow, EffectRow, ListAppend, ListRef, PendingWriteRow } from '../engine/rows.js'
import { checkpointDigest } from '../encoding/checkpoint-rows.js'
import { RUN_LOG_LIST } from '../engine/list-retention.js'
import type { KeyRing } from './key-ring.js'
import { decrypt, encrypt, integrity, isCiphertext, sign, verify, type SealContext } from './seal.js'

/**
 * How a keyed store seals the records a resume trusts, one record at a time, and opens them
 * again (see `SealedEngine`, which applies it on the way into and out of every engine):
 *
 * - A checkpoint row's `digest` becomes an HMAC over its SHA-256 digest, which covers the run id,
 *   id, seq, parent, header, metadata, body and list refs: an edit, a swap with another row or a
 *   row copied from another run does not verify. With encryption the body and the list refs'
 *   chain hashes are one AES-GCM ciphertext bound to the row's identity; ids, seqs, phases, times
 *   and list lengths stay readable.
 * - List items are covered by the chain hashes in the signed rows that refer to them; with
 *   encryption each item is a ciphertext bound to its run, list and index.
 * - An effect's intent (name, input hash, idempotency key) and its outcome (status, output) are
 *   each signed with its run and call id; the outcome's output is encrypted.
 * - A pending write's value is signed with its key (encrypted when asked).
 */
export class RecordSeal {
  readonly #ring: KeyRing
  readonly #encrypt: boolean

  constructor(ring: KeyRing, encrypt: boolean) {
    this.#ring = ring
    this.#encrypt = encrypt
  }

  /** A checkpoint row as it is stored: encrypted when asked, signed always. */
  sealCheckpoint(row: CheckpointRow): CheckpointRow {
    if (!this.#encrypt) return { ...row, digest: sign(this.#ring, 'checkpoint', [checkpointDigest(row)]) }
    const refs = JSON.parse(row.lists) as ListRef[]
    const stored = {
      ...row,
      body: JSON.stringify(encrypt(this.#ring, JSON.stringify([row.body, row.lists]), checkpointAad(row))),
      lists: JSON.stringify(refs.map((ref) => ({ id: ref.id, n: ref.n, h: '' }))),
    }
    return { ...stored, digest: sign(this.#ring, 'checkpoint', [checkpointDigest(stored)]) }
  }

  /** Verify (and decrypt) a stored checkpoint row into the plain row the store decodes. */
  openCheckpoint(row: CheckpointRow): CheckpointRow {
    const context = checkpointContext(row)
    const digest = checkpointDigest(row)
    verify(this.#ring, row.digest, 'checkpoint', [digest], context)
    if (typeof row.body !== 'string' || !row.body.startsWith('"e1.')) return { ...row, digest }
    const opened = parseSealedPair(decrypt(this.#ring, JSON.parse(row.body) as string, checkpointAad(row), context), context)
    const plain = { ...row, body: opened[0], lists: opened[1] }
    return { ...plain, digest: checkpointDigest(plain) }
  }

  /** An effect intent row as stored: its input hash carries the intent's signature. */
  sealIntent(row: EffectRow): EffectRow {
    return { ...row, inputHash: `${row.inputHash}|${sign(this.#ring, 'effect-intent', intentFields(row, row.inputHash))}` }
  }

  /** An effect outcome as stored: output encrypted when asked, output hash carrying the outcome's signature. */
  sealCompletion(row: EffectCompletionRow): EffectCompletionRow {
    const output = this.#encrypt ? JSON.stringify(encrypt(this.#ring, row.output, effectAad(row.runId, row.callId, row.status))) : row.output
    const signature = sign(this.#ring, 'effect-outcome', [row.runId, row.callId, row.status, output, row.outputHash])
    return { ...row, output, outputHash: `${row.outputHash}|${signature}` }
  }

  /** Verify (and decrypt) a stored effect row. */
  openEffect(row: EffectRow): EffectRow {
    const context: SealContext = { runId: stringOr(row.runId), what: `effect ${String(row.callId)} of run ${String(row.runId)}` }
    const [inputHash, intentSignature] = splitSealed(row.inputHash)
    verify(this.#ring, intentSignature, 'effect-intent', intentFields(row, inputHash), context)
    // A signature over strings verified: the fields are strings.
    if (inputHash === undefined) throw integrity(context, 'has no input hash')
    const done = row.status === 'succeeded' || row.status === 'failed'
    if (!done) {
      if (row.output !== null || row.outputHash !== null) throw integrity(context, `is marked ${String(row.status)} but holds an outcome: its status was rolled back`)
      return { ...row, inputHash }
    }
    const [outputHash, outcomeSignature] = splitSealed(row.outputHash)
    verify(this.#ring, outcomeSignature, 'effect-outcome', [row.runId, row.callId, row.status, row.output, outputHash], context)
    if (outputHash === undefined || typeof row.output !== 'string') throw integrity(context, 'has no output')
    const output = typeof row.output === 'string' && row.output.startsWith('"e1.') ? decrypt(this.#ring, JSON.parse(row.output) as string, effectAad(row.runId, row.callId, row.status), context) : row.output
    return { ...row, inputHash, output, outputHash }
  }

  /** The id of the key this engine writes with, and whether it encrypts. */
  get sealing(): { keyId: string; encrypt: boolean } {
    return { keyId: this.#ring.writeKeyId, encrypt: this.#encrypt }
  }

  /** A list append as stored: its items sealed (the run's log as it is). */
  sealAppend(runId: string, append: ListAppend): ListAppend {
    // The run's log holds call ids and statuses, nothing secret, and is checked without a key.
    if (append.listId === RUN_LOG_LIST) return append
    return { ...append, items: append.items.map((item, k) => this.sealItem(runId, append.listId, append.expectedLength + k, item)) }
  }

  /** A list item as stored: a ciphertext bound to its place when encrypting, else as is. */
  sealItem(runId: string, listId: string, idx: number, item: string): string {
    return this.#encrypt ? JSON.stringify(encrypt(this.#ring, item, itemAad(runId, listId, idx))) : item
  }

  /** A stored list item decrypted (a plain item is returned as is: the chain hashes of signed rows cover it). */
  openItem(runId: string, listId: string, idx: number, item: string): string {
    if (typeof item !== 'string' || !item.startsWith('"e1.')) return item
    let sealed: unknown
    try {
      sealed = JSON.parse(item)
    } catch {
      return item
    }
    if (!isCiphertext(sealed)) return item
    return decrypt(this.#ring, sealed, itemAad(runId, listId, idx), { runId, what: `item ${idx} of list ${listId} of run ${runId}` })
  }

  /** A pending write as stored: its value encrypted when asked, then signed with its key. */
  sealWrite(row: PendingWriteRow): PendingWriteRow {
    const value = this.#encrypt ? JSON.stringify(encrypt(this.#ring, row.value, writeAad(row))) : row.value
    return { ...row, value: `${value}|${sign(this.#ring, 'pending-write', writeFields(row, value))}` }
  }

  /** Verify (and decrypt) a stored pending write. */
  openWrite(row: PendingWriteRow): PendingWriteRow {
    const context: SealContext = { runId: stringOr(row.runId), checkpointId: stringOr(row.checkpointId), what: `a pending write (task ${String(row.taskId)}, index ${String(row.idx)}) of checkpoint ${String(row.checkpointId)}` }
    const [value, signature] = splitSealed(row.value)
    verify(this.#ring, signature, 'pending-write', writeFields(row, value), context)
    if (value === undefined) throw integrity(context, 'has no value')
    const plain = value.startsWith('"e1.') ? decrypt(this.#ring, JSON.parse(value) as string, writeAad(row), context) : value
    return { ...row, value: plain }
  }
}

function checkpointAad(row: CheckpointRow): string {
  return JSON.stringify(['checkpoint', row.runId, row.id, row.seq])
}

function itemAad(runId: string, listId: string, idx: number): string {
  return JSON.stringify(['item', runId, listId, idx])
}

function effectAad(runId: string, callId: string, status: string): string {
  return JSON.stringify(['effect', runId, callId, status])
}

function writeAad(row: PendingWriteRow): string {
  return JSON.stringify(['write', row.runId, row.checkpointId, row.taskId, row.idx])
}

function writeFields(row: PendingWriteRow, value: string | undefined): (string | undefined)[] {
  return [row.runId, row.checkpointId, row.taskId, String(row.idx), row.channel, row.taskPath, value].map(stringOr)
}

function intentFields(row: EffectRow, inputHash: unknown): (string | undefined)[] {
  return [row.runId, row.callId, row.name, stringOr(inputHash), row.idempotencyKey].map(stringOr)
}

function checkpointContext(row: CheckpointRow): SealContext {
  return { runId: stringOr(row.runId), checkpointId: stringOr(row.id), what: `checkpoint ${String(row.id)} of run ${String(row.runId)}` }
}

/** `original|signature` → [original, signature]; a value without one yields no signature. */
function splitSealed(value: unknown): [string | undefined, string | undefined] {
  if (typeof value !== 'string') return [undefined, undefined]
  const at = value.lastIndexOf('|s1.')
  return at < 0 ? [value, undefined] : [value.slice(0, at), value.slice(at + 1)]
}

function parseSealedPair(text: string, context: SealContext): [string, string] {
  let pair: unknown
  try {
    pair = JSON.parse(text)
  } catch {
    pair = undefined
  }
  if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') {
    throw integrity(context, 'holds a ciphertext that is not a checkpoint body')
  }
  return [pair[0], pair[1]]
}

function stringOr(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined
}
