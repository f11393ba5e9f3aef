import { createCipheriv, createDecipheriv, createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { CheckpointIntegrityError } from '../../core/errors.js'
import type { KeyRing, RingKey } from './key-ring.js'

/*
 * The two sealing primitives of a keyed store, both from `node:crypto`, each naming the key that
 * made it, so a ring holding old and new keys reads both:
 * - a signature `s1.<keyId>.<mac>`: HMAC-SHA-256 (base64url) over a domain name and the record's
 *   fields, each length-prefixed, so no two different field lists sign the same bytes;
 * - a ciphertext `e1.<keyId>.<data>`: AES-256-GCM with a random 96-bit nonce per record, the
 *   record's identity as associated data; `data` is base64url of nonce, ciphertext and tag.
 */

/** Where a record lives, for the messages of integrity errors. */
export interface SealContext {
  runId?: string | undefined
  checkpointId?: string | undefined
  /** What the record is: `checkpoint ck1 of run r1`, `effect c1 of run r1`, … */
  what: string
}

/** A field of a signed record; any other type (a hand-edited row) signs as its type name. */
export type SealField = string | number | boolean | null | undefined

const SIGNATURE = 's1.'
const CIPHERTEXT = 'e1.'
const NONCE_BYTES = 12
const TAG_BYTES = 16

/** Whether `value` looks like a signature this module wrote (not whether it verifies). */
export function isSignature(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith(SIGNATURE)
}

/** Whether `value` looks like a ciphertext this module wrote. */
export function isCiphertext(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith(CIPHERTEXT)
}

/** The key id a signature or ciphertext names, or undefined when it names none. */
export function keyIdOf(value: unknown): string | undefined {
  if (!isSignature(value) && !isCiphertext(value)) return undefined
  const end = value.indexOf('.', 3)
  return end < 0 ? undefined : value.slice(3, end)
}

/** Sign `fields` under `domain` with the ring's writing key. */
export function sign(ring: KeyRing, domain: string, fields: readonly SealField[]): string {
  return signature(ring.writer(), domain, fields)
}

/**
 * Check that `signature` signs `fields` under `domain` with a key of the ring; anything else (no
 * signature, an unknown key id, a mismatch) is a {@link CheckpointIntegrityError}.
 */
export function verify(ring: KeyRing, signed: unknown, domain: string, fields: readonly SealField[], context: SealContext): void {
  requireSignature(signed, context)
  const key = keyOf(ring, signed, context)
  if (macEquals(key, signed, domain, fields)) return
  throw integrity(context, `does not verify under key ${key.id}: it was edited, forged, moved from another place or replayed after it was written`, key.id)
}

/** Whether `signed` is a signature of `fields` under `domain` by a key of the ring. */
export function verifies(ring: KeyRing, signed: unknown, domain: string, fields: readonly SealField[]): boolean {
  const key = ring.key(keyIdOf(signed) ?? '')
  return isSignature(signed) && key !== undefined && macEquals(key, signed, domain, fields)
}

/** Throw unless `value` is a signature: a record written before the store had keys. */
export function requireSignature(value: unknown, context: SealContext): asserts value is string {
  if (!isSignature(value)) {
    throw integrity(context, 'is not signed, but this store verifies signatures: sign the records written before keys were given with store.rekey({ signUnsigned: true })')
  }
}

/** Encrypt `plaintext` with the writing key, bound to `aad` (the record's identity). */
export function encrypt(ring: KeyRing, plaintext: string, aad: string): string {
  const key = ring.writer()
  const nonce = randomBytes(NONCE_BYTES)
  const cipher = createCipheriv('aes-256-gcm', key.enc, nonce)
  cipher.setAAD(Buffer.from(aad))
  const data = Buffer.concat([nonce, cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()])
  return `${CIPHERTEXT}${key.id}.${data.toString('base64url')}`
}

/** Decrypt what {@link encrypt} wrote for the same `aad`; any failure is a {@link CheckpointIntegrityError}. */
export function decrypt(ring: KeyRing, ciphertext: string, aad: string, context: SealContext): string {
  const key = keyOf(ring, ciphertext, context)
  const data = Buffer.from(ciphertext.slice(CIPHERTEXT.length + key.id.length + 1), 'base64url')
  if (data.length < NONCE_BYTES + TAG_BYTES) throw integrity(context, `has a truncated ciphertext (key ${key.id})`, key.id)
  try {
    const decipher = createDecipheriv('aes-256-gcm', key.enc, data.subarray(0, NONCE_BYTES), { authTagLength: TAG_BYTES })
    decipher.setAAD(Buffer.from(aad))
    decipher.setAuthTag(data.subarray(data.length - TAG_BYTES))
    return Buffer.concat([decipher.update(data.subarray(NONCE_BYTES, data.length - TAG_BYTES)), decipher.final()]).toString('utf8')
  } catch (err) {
    throw integrity(context, `does not decrypt under key ${key.id}: its ciphertext was edited or moved from another record`, key.id, err)
  }
}

/** The ciphertext a stored text holds (a JSON string of one), or undefined for a plain text. */
export function storedCiphertext(text: unknown): string | undefined {
  if (typeof text !== 'string' || !text.startsWith(`"${CIPHERTEXT}`)) return undefined
  try {
    const value: unknown = JSON.parse(text)
    return isCiphertext(value) ? value : undefined
  } catch {
    return undefined
  }
}

/**
 * The check value of a key, which a keyed store keeps once per key id: an HMAC of a fixed label,
 * so a different secret under the same id gives a different value (and the value reveals
 * nothing of the secret).
 */
export function keyCheckValue(key: RingKey): string {
  return `c1.${mac(key, 'cairn key check', [key.id])}`
}

/** A {@link CheckpointIntegrityError} about the record of `context`. */
export function integrity(context: SealContext, problem: string, keyId?: string, cause?: unknown): CheckpointIntegrityError {
  return new CheckpointIntegrityError(`${context.what} ${problem}`, {
    runId: context.runId,
    checkpointId: context.checkpointId,
    keyId,
    ...(cause === undefined ? {} : { cause }),
  })
}

function keyOf(ring: KeyRing, sealed: string, context: SealContext): RingKey {
  const id = keyIdOf(sealed)
  if (id === undefined) throw integrity(context, 'has a malformed signature or ciphertext')
  const key = ring.key(id)
  if (key) return key
  throw integrity(context, `was sealed with key ${id}, which this store's key ring does not hold (it holds ${ring.ids.join(', ')}): add key ${id} to the ring`, id)
}

function signature(key: RingKey, domain: string, fields: readonly SealField[]): string {
  return `${SIGNATURE}${key.id}.${mac(key, domain, fields)}`
}

function macEquals(key: RingKey, signed: string, domain: string, fields: readonly SealField[]): boolean {
  const expected = Buffer.from(signature(key, domain, fields))
  const given = Buffer.from(signed)
  return expected.length === given.length && timingSafeEqual(expected, given)
}

function mac(key: RingKey, domain: string, fields: readonly SealField[]): string {
  const hmac = createHmac('sha256', key.mac)
  hmac.update(`${domain}\n`)
  for (const field of fields) {
    if (typeof field === 'string') {
      // UTF-8 would fold every lone surrogate into U+FFFD; JSON text keeps them apart.
      const text = (field as unknown as { isWellFormed(): boolean }).isWellFormed() ? field : JSON.stringify(field)
      hmac.update(`${text === field ? 's' : 'j'}${text.length}:`).update(text)
    }
    else if (typeof field === 'number') hmac.update(`n${String(field)};`)
    else if (typeof field === 'boolean') hmac.update(field ? 't;' : 'f;')
    else if (field === null) hmac.update('z;')
    else hmac.update(`?${typeof field};`)
  }
  return hmac.digest('base64url')
}
