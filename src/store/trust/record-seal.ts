import type { CheckpointRow, EffectCompletionRow, EffectRow, ListAppend, ListRef, PendingWriteRow } from '../engine/rows.js'
import { checkpointDigest } from '../encoding/checkpoint-rows.js'
import { RUN_LOG_LIST } from '../engine/list-retention.js'
import type { KeyRing } from './key-ring.js'
import { decrypt, encrypt, integrity, sign, storedCiphertext, verify, type SealContext, type SealField } from './seal.js'

/**
 * How a keyed store seals the records a resume trusts, one record at a time, and opens them
 * again (`SealedEngine` applies it on the way into and out of every engine):
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
 *
 * A signed effect or write carries its signature after its value: `value|s1.…`.
 */
export class RecordSeal {
  constructor(private readonly ring: KeyRing, private readonly encrypts: boolean) {}

  /** The id of the key this engine writes with, and whether it encrypts. */
  get sealing(): { keyId: string; encrypt: boolean } {
    return { keyId: this.ring.writeKeyId, encrypt: this.encrypts }
  }

  /** A checkpoint row as it is stored: encrypted when asked, signed always. */
  sealCheckpoint(row: CheckpointRow): CheckpointRow {
    let stored = row
    if (this.encrypts) {
      const refs = JSON.parse(row.lists) as ListRef[]
      const body = this.#sealText(JSON.stringify([row.body, row.lists]), checkpointAad(row))
      stored = { ...row, body, lists: JSON.stringify(refs.map((ref) => ({ id: ref.id, n: ref.n, h: '' }))) }
    }
    return { ...stored, digest: sign(this.ring, 'checkpoint', [checkpointDigest(stored)]) }
  }

  /** Verify (and decrypt) a stored checkpoint row into the plain row the store decodes. */
  openCheckpoint(row: CheckpointRow): CheckpointRow {
    const context: SealContext = { runId: stringOr(row.runId), checkpointId: stringOr(row.id), what: `checkpoint ${String(row.id)} of run ${String(row.runId)}` }
    const digest = checkpointDigest(row)
    verify(this.ring, row.digest, 'checkpoint', [digest], context)
    const sealed = storedCiphertext(row.body)
    if (sealed === undefined) return { ...row, digest }
    let pair: unknown
    try {
      pair = JSON.parse(decrypt(this.ring, sealed, checkpointAad(row), context))
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err
    }
    if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') {
      throw integrity(context, 'holds a ciphertext that is not a checkpoint body')
    }
    const plain = { ...row, body: pair[0], lists: pair[1] }
    return { ...plain, digest: checkpointDigest(plain) }
  }

  /** An effect intent row as stored: its input hash carries the intent's signature. */
  sealIntent(row: EffectRow): EffectRow {
    return { ...row, inputHash: this.#signed(row.inputHash, 'effect-intent', intentFields(row, row.inputHash)) }
  }

  /** An effect outcome as stored: output encrypted when asked, output hash carrying the outcome's signature. */
  sealCompletion(row: EffectCompletionRow): EffectCompletionRow {
    const output = this.#sealText(row.output, effectAad(row.runId, row.callId, row.status))
    return { ...row, output, outputHash: this.#signed(row.outputHash, 'effect-outcome', [row.runId, row.callId, row.status, output, row.outputHash]) }
  }

  /** Verify (and decrypt) a stored effect row. */
  openEffect(row: EffectRow): EffectRow {
    const context: SealContext = { runId: stringOr(row.runId), what: `effect ${String(row.callId)} of run ${String(row.runId)}` }
    const inputHash = this.#unsigned(row.inputHash, 'effect-intent', (hash) => intentFields(row, hash), context, 'input hash')
    if (row.status !== 'succeeded' && row.status !== 'failed') {
      if (row.output !== null || row.outputHash !== null) throw integrity(context, `is marked ${String(row.status)} but holds an outcome: its status was rolled back`)
      return { ...row, inputHash }
    }
    const outputHash = this.#unsigned(row.outputHash, 'effect-outcome', (hash) => [row.runId, row.callId, row.status, row.output, hash], context, 'output')
    if (typeof row.output !== 'string') throw integrity(context, 'has no output')
    return { ...row, inputHash, output: this.#openText(row.output, effectAad(row.runId, row.callId, row.status), context), outputHash }
  }

  /** A list append as stored: its items sealed (the run's log as it is). */
  sealAppend(runId: string, append: ListAppend): ListAppend {
    // The run's log holds call ids and statuses, nothing secret, and is checked without a key.
    if (append.listId === RUN_LOG_LIST) return append
    return { ...append, items: append.items.map((item, k) => this.sealItem(runId, append.listId, append.expectedLength + k, item)) }
  }

  /** A list item as stored: a ciphertext bound to its place when encrypting, else as is. */
  sealItem(runId: string, listId: string, idx: number, item: string): string {
    return this.#sealText(item, JSON.stringify(['item', runId, listId, idx]))
  }

  /** A stored list item decrypted (a plain item is returned as is: the chain hashes of signed rows cover it). */
  openItem(runId: string, listId: string, idx: number, item: string): string {
    return this.#openText(item, JSON.stringify(['item', runId, listId, idx]), { runId, what: `item ${idx} of list ${listId} of run ${runId}` })
  }

  /** A pending write as stored: its value encrypted when asked, then signed with its key. */
  sealWrite(row: PendingWriteRow): PendingWriteRow {
    const value = this.#sealText(row.value, writeAad(row))
    return { ...row, value: this.#signed(value, 'pending-write', writeFields(row, value)) }
  }

  /** Verify (and decrypt) a stored pending write. */
  openWrite(row: PendingWriteRow): PendingWriteRow {
    const context: SealContext = { runId: stringOr(row.runId), checkpointId: stringOr(row.checkpointId), what: `a pending write (task ${String(row.taskId)}, index ${String(row.idx)}) of checkpoint ${String(row.checkpointId)}` }
    const value = this.#unsigned(row.value, 'pending-write', (text) => writeFields(row, text), context, 'value')
    return { ...row, value: this.#openText(value, writeAad(row), context) }
  }

  #sealText(text: string, aad: string): string {
    return this.encrypts ? JSON.stringify(encrypt(this.ring, text, aad)) : text
  }

  #openText(text: string, aad: string, context: SealContext): string {
    const sealed = storedCiphertext(text)
    return sealed === undefined ? text : decrypt(this.ring, sealed, aad, context)
  }

  #signed(value: string, domain: string, fields: readonly SealField[]): string {
    return `${value}|${sign(this.ring, domain, fields)}`
  }

  /** The value of a stored `value|signature`, once the signature verifies over `fields(value)`. */
  #unsigned(stored: unknown, domain: string, fields: (value: string | undefined) => readonly SealField[], context: SealContext, what: string): string {
    const text = stringOr(stored)
    const at = text?.lastIndexOf('|s1.') ?? -1
    const value = at < 0 ? text : text?.slice(0, at)
    verify(this.ring, at < 0 ? undefined : text?.slice(at + 1), domain, fields(value), context)
    // A signature over strings verified: the fields are strings.
    if (value === undefined) throw integrity(context, `has no ${what}`)
    return value
  }
}

function checkpointAad(row: CheckpointRow): string {
  return JSON.stringify(['checkpoint', row.runId, row.id, row.seq])
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
  return [row.runId, row.callId, row.name, inputHash, row.idempotencyKey].map(stringOr)
}

/** A field of a hand-edited row that is not a string signs as `undefined`. */
export function stringOr(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined
}
