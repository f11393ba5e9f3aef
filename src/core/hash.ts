import * as crypto from 'node:crypto'
import { encodeValue, isPassThrough, type JsonValue } from './codec.js'

/**
 * Canonical JSON: the codec's encoding with object keys sorted at every level and no
 * whitespace, so equal values always produce the same text whatever their key order.
 *
 * @example
 * ```ts
 * canonicalJson({ b: 1, a: [true, null] }) // '{"a":[true,null],"b":1}'
 * ```
 */
export function canonicalJson(value: unknown): string {
  // Plain JSON is its own encoding: sort it as it is, without an encoded copy.
  return writeCanonical(isPassThrough(value) ? (value as JsonValue) : encodeValue(value, 'value'))
}

/**
 * SHA-256 (hex) of {@link canonicalJson}: the input hash of a tool call, the signature of a
 * configuration. Values that differ only in key order hash the same.
 */
export function hashValue(value: unknown): string {
  return sha256(canonicalJson(value))
}

/**
 * {@link hashValue} of a value given in its encoded form (what `encodeValue` returns, or the
 * parse of its JSON text): checks a stored value against its hash without decoding it first.
 */
export function hashEncoded(encoded: JsonValue): string {
  return sha256(writeCanonical(encoded))
}

/** SHA-256 of a string, as lowercase hex. */
export function sha256(text: string): string {
  return oneShot ? oneShot('sha256', text, 'hex') : crypto.createHash('sha256').update(text).digest('hex')
}

/**
 * `crypto.hash` (Node ≥ 20.12): a one-shot digest without a Hash object, about a third faster
 * for the short texts hashed at every checkpoint. Older Node 20 releases use `createHash`.
 */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'hex') => string }).hash

/** Canonical text of an encoded value; a property holding `undefined` (plain JSON passed as it is) is left out, as the codec would. */
function writeCanonical(value: JsonValue): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value)
  if (Array.isArray(value)) return `[${value.map(writeCanonical).join(',')}]`
  const keys = Object.keys(value).sort()
  let text = ''
  for (const k of keys) {
    const item = value[k]
    if (item === undefined) continue
    text += `${text === '' ? '' : ','}${JSON.stringify(k)}:${writeCanonical(item)}`
  }
  return `{${text}}`
}

/**
 * Hex characters of a digest as stored: SHA-256 cut to 128 bits. An unkeyed digest detects
 * damage and naive edits (anyone can recompute it; a keyed store signs the full one), for which
 * 128 bits are as good as 256 at half the bytes. Rows written with the full 64 still verify.
 */
export const STORED_DIGEST_CHARS = 32

/** Whether a stored digest is `full` or its stored prefix. */
export function digestMatches(stored: string, full: string): boolean {
  return stored === full || (stored.length === STORED_DIGEST_CHARS && full.startsWith(stored))
}
