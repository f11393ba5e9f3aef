import { createSecretKey, hkdfSync, type KeyObject } from 'node:crypto'
import { InvalidArgumentError } from '../../core/errors.js'

/**
 * One named key of a {@link KeyRing}. `secret` is at least 32 random bytes, given as bytes or as
 * base64 text (`openssl rand -base64 32`).
 */
export interface KeyInput {
  /** 1-64 letters, digits or `_ - .`; stored beside every record it signs, never the secret. */
  id: string
  secret: string | Uint8Array
}

/** A key of the ring with the two subkeys derived from its secret: HMAC-SHA-256 `mac`, AES-256-GCM `enc`. */
export interface RingKey {
  readonly id: string
  readonly mac: KeyObject
  readonly enc: KeyObject
}

const KEY_ID = /^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$/
const MIN_SECRET_BYTES = 32

/**
 * The named keys a store signs and encrypts its records with. The **first** key writes; every
 * key of the ring is accepted to read, so a rotation is: put a new key first, keep the old one
 * after it, run `store.rekey()`, then drop the old key.
 *
 * Each secret is never used directly: two subkeys are derived from it with HKDF-SHA-256, one for
 * HMAC-SHA-256 signatures and one for AES-256-GCM encryption.
 *
 * @example
 * ```ts
 * const keys = new KeyRing([{ id: '2026-11', secret: process.env.CAIRN_SECRET! }])
 * const store = new SqliteStore({ path: 'cairn.db', keys, encrypt: true })
 * // or, from CAIRN_KEYS="2026-11:<base64>,2026-05:<base64>":
 * const fromEnv = KeyRing.fromEnv()
 * ```
 */
export class KeyRing {
  readonly #keys = new Map<string, RingKey>()
  readonly #writer: RingKey

  constructor(keys: readonly KeyInput[]) {
    const given: unknown = keys
    if (!Array.isArray(given) || keys.length === 0) {
      throw new InvalidArgumentError('a key ring needs at least one key { id, secret }; the first key writes')
    }
    for (const key of keys as readonly (KeyInput | undefined)[]) {
      if (key === undefined || typeof key.id !== 'string' || !KEY_ID.test(key.id)) {
        throw new InvalidArgumentError(`key id ${JSON.stringify(key?.id)} is not valid: use 1-64 letters, digits or _ - . (not starting with .)`)
      }
      if (this.#keys.has(key.id)) throw new InvalidArgumentError(`key id ${key.id} appears twice in the key ring`)
      this.#keys.set(key.id, deriveKey(key))
    }
    this.#writer = this.#keys.get(keys[0]!.id)!
  }

  /**
   * Parse `id1:base64,id2:base64` (the `CAIRN_KEYS` format; the first key writes). Whitespace
   * around entries is ignored.
   */
  static parse(text: string): KeyRing {
    if (typeof text !== 'string' || text.trim() === '') throw new InvalidArgumentError('the key list is empty: expected id1:base64secret,id2:base64secret')
    return new KeyRing(text.split(',').map((entry, k) => {
      const trimmed = entry.trim()
      const colon = trimmed.indexOf(':')
      if (colon <= 0) throw new InvalidArgumentError(`key entry ${k + 1} has no id: expected id:base64secret`)
      return { id: trimmed.slice(0, colon), secret: trimmed.slice(colon + 1) }
    }))
  }

  /** The ring in `CAIRN_KEYS` (or the given text), or `undefined` when it is unset or empty. */
  static fromEnv(value: string | undefined = process.env.CAIRN_KEYS): KeyRing | undefined {
    return value === undefined || value.trim() === '' ? undefined : KeyRing.parse(value)
  }

  /** The id of the key new records are written with. */
  get writeKeyId(): string {
    return this.#writer.id
  }

  /** Every key id of the ring, the writing key first. */
  get ids(): string[] {
    return [...this.#keys.keys()]
  }

  /** @internal The writing key. */
  writer(): RingKey {
    return this.#writer
  }

  /** @internal The key named `id`, or undefined when the ring does not hold it. */
  key(id: string): RingKey | undefined {
    return this.#keys.get(id)
  }
}

/** A key ring from a ring or a list of keys. */
export function toKeyRing(keys: KeyRing | readonly KeyInput[]): KeyRing {
  return keys instanceof KeyRing ? keys : new KeyRing(keys)
}

function deriveKey({ id, secret }: KeyInput): RingKey {
  let bytes: Buffer
  if (typeof secret === 'string') {
    const text = secret.trim()
    if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) throw new InvalidArgumentError(`the secret of key ${id} is not base64 text`)
    bytes = Buffer.from(text, text.includes('-') || text.includes('_') ? 'base64url' : 'base64')
  } else if (secret instanceof Uint8Array) {
    bytes = Buffer.from(secret)
  } else {
    throw new InvalidArgumentError(`the secret of key ${id} must be bytes or base64 text`)
  }
  if (bytes.length < MIN_SECRET_BYTES) {
    throw new InvalidArgumentError(`the secret of key ${id} has ${bytes.length} bytes; use at least ${MIN_SECRET_BYTES} random bytes (openssl rand -base64 32)`)
  }
  const derive = (info: string) => createSecretKey(Buffer.from(hkdfSync('sha256', bytes, 'cairn', info, 32)))
  return { id, mac: derive('cairn/mac/v1'), enc: derive('cairn/enc/v1') }
}
