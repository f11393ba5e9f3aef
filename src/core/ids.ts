import { randomFillSync } from 'node:crypto'

let lastMs = -1
let counter = 0

/** Random bytes drawn from the OS in blocks: one system call per 512 ids instead of two per id. */
const POOL_BYTES = 5120
const pool = Buffer.alloc(POOL_BYTES)
let poolOffset = POOL_BYTES

/** Offset in `pool` of `n` fresh random bytes (read them before the next call). */
function randomOffset(n: number): number {
  if (poolOffset + n > POOL_BYTES) {
    randomFillSync(pool)
    poolOffset = 0
  }
  const at = poolOffset
  poolOffset += n
  return at
}

/** Two lowercase hex digits of every byte value. */
const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'))

/**
 * A new UUIDv7: 48 bits of Unix milliseconds, then a 12-bit counter that keeps ids created in
 * the same millisecond (in this process) strictly increasing, then 62 random bits. Ids sort by
 * creation time as plain strings.
 *
 * @example
 * ```ts
 * const runId = newId() // '0193a1b2-7c4d-7e3f-9a21-5b6c7d8e9f00'
 * ```
 */
export function newId(now: number = Date.now()): string {
  let ms = now
  if (ms <= lastMs) {
    ms = lastMs
    counter++
    if (counter > 0xfff) {
      ms = lastMs + 1
      counter = 0
    }
  } else {
    counter = pool.readUInt16BE(randomOffset(2)) & 0x1ff
  }
  lastMs = ms
  const at = randomOffset(8)
  const hex = ms.toString(16).padStart(12, '0')
  const a = (0x7000 | counter).toString(16)
  const b = (pool[at]! & 0x3f) | 0x80
  const tail = HEX[b]! + HEX[pool[at + 1]!]! + '-' + HEX[pool[at + 2]!]! + HEX[pool[at + 3]!]! + HEX[pool[at + 4]!]! + HEX[pool[at + 5]!]! + HEX[pool[at + 6]!]! + HEX[pool[at + 7]!]!
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${a}-${tail}`
}

/**
 * A new id for something only Cairn refers to (a list of a run): 80 random bits as 16 lowercase
 * base32 characters, a third of a UUID's length. Safe in file names as it is.
 */
export function newShortId(): string {
  const at = randomOffset(10)
  let bits = 0
  let value = 0
  let out = ''
  for (let k = at; k < at + 10; k++) {
    value = (value << 8) | pool[k]!
    bits += 8
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31]
      bits -= 5
    }
  }
  return out
}

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567'

/** Milliseconds since the Unix epoch encoded in a UUIDv7, or `undefined` for another string. */
export function idTimestamp(id: string): number | undefined {
  if (!UUID_V7.test(id)) return undefined
  return Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16)
}

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
