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

/**
 * Whether {@link hashEncoded} of `parsed` is `expected`, where `parsed` is `JSON.parse(text)`.
 * A stored object's text holds its members' canonical texts already, but for their order: when
 * `text` is exactly what `JSON.stringify(parsed)` writes, the canonical text is its members put in
 * order, one of them (the first object or array among them, usually nearly all the text) taken
 * as a slice of `text` rather than written out again. A mismatch takes the full canonical
 * writer, so the answer is always the one `hashEncoded` gives.
 */
export function matchesEncodedHash(parsed: JsonValue, text: string, expected: string): boolean {
  const reordered = reorderedMembers(parsed, text)
  if (reordered !== undefined && sha256(reordered) === expected) return true
  return hashEncoded(parsed) === expected
}

/**
 * The canonical text of the object `parsed` made from `text`, its JSON, when `text` is exactly
 * `{` + its members in `parsed`'s key order + `}`; otherwise undefined. Each member but one (the
 * first holding an object or array) is written with `JSON.stringify` and found where it must be
 * in `text`; the one left is the rest of `text`, taken as it is. The members are then put in key
 * order. A member not in canonical order inside gives a text that is not the canonical one: the
 * caller's hash check fails and takes the full writer.
 */
function reorderedMembers(parsed: JsonValue, text: string): string | undefined {
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return undefined
  const keys = Object.keys(parsed)
  let sliced = 0
  while (sliced < keys.length && (typeof parsed[keys[sliced]!] !== 'object' || parsed[keys[sliced]!] === null)) sliced++
  if (sliced === keys.length || text.charCodeAt(0) !== 123 || text.charCodeAt(text.length - 1) !== 125) return undefined
  const members: string[] = new Array<string>(keys.length)
  let start = 1
  for (let i = 0; i < sliced; i++) {
    const written = `${JSON.stringify(keys[i])}:${JSON.stringify(parsed[keys[i]!])}`
    if (!text.startsWith(written, start) || text.charCodeAt(start + written.length) !== 44) return undefined
    members[i] = written
    start += written.length + 1
  }
  let end = text.length - 1
  for (let i = keys.length - 1; i > sliced; i--) {
    const written = `${JSON.stringify(keys[i])}:${JSON.stringify(parsed[keys[i]!])}`
    end -= written.length
    if (end <= start || !text.startsWith(written, end) || text.charCodeAt(end - 1) !== 44) return undefined
    members[i] = written
    end -= 1
  }
  const head = `${JSON.stringify(keys[sliced])}:`
  if (end - start <= head.length || !text.startsWith(head, start)) return undefined
  members[sliced] = text.slice(start, end)
  // Keys in sorted order, each with its member: a simple insertion sort (objects have few keys).
  const order: number[] = []
  for (let i = 0; i < keys.length; i++) {
    let at = order.length
    while (at > 0 && keys[order[at - 1]!]! > keys[i]!) at--
    order.splice(at, 0, i)
  }
  let canonical = '{'
  for (let i = 0; i < order.length; i++) canonical += `${i === 0 ? '' : ','}${members[order[i]!]!}`
  return `${canonical}}`
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
