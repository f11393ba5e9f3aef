import { describe, expect, it } from 'vitest'
import { encodeValue, isPassThrough, serialize, shortPlainJson, stringifyEncoded } from '../src/core/codec.js'
import { canonicalJson, hashValue, sha256 } from '../src/core/hash.js'
import { encodePayload, LIST_MIN_BYTES } from '../src/store/encoding/payload-lists.js'

/** Values the codec passes through as they are, and values it must rewrite. */
const plain: unknown[] = [
  null,
  true,
  0,
  -12.5,
  'text with "quotes" and \u2028',
  [],
  {},
  { b: 1, a: [1, 'two', null, { c: false }], optional: undefined },
  Object.assign(Object.create(null) as object, { z: 1 }),
  JSON.parse('{"__proto__": {"polluted": true}, "x": 1}') as unknown,
  { nested: { deeper: { deepest: ['x'] } } },
]
const special: unknown[] = [
  -0,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  new Date(0),
  new Map([[1, 2]]),
  new Set([1]),
  new Uint8Array([1]),
  10n,
  [1, undefined, 3],
  // eslint-disable-next-line no-sparse-arrays
  [1, , 3],
  { '~': 'looks like a tag' },
  { inside: { at: new Date(0) } },
  { list: [{ n: -0 }] },
  { [Symbol('s')]: 1 },
]

describe('codec: plain JSON passes through unencoded', () => {
  it('tells plain JSON from values the codec rewrites', () => {
    for (const value of plain) expect(isPassThrough(value)).toBe(true)
    for (const value of special) expect(isPassThrough(value)).toBe(false)
  })

  it('serializes plain JSON to the very text the full encoding gives', () => {
    for (const value of plain) expect(serialize(value)).toBe(stringifyEncoded(encodeValue(value), 'value'))
    for (const value of special.filter((v) => !(typeof v === 'object' && v !== null && Object.getOwnPropertySymbols(v).length > 0))) {
      expect(serialize(value)).toBe(stringifyEncoded(encodeValue(value), 'value'))
    }
  })

  it('hashes plain JSON as its encoding, leaving out properties that hold undefined', () => {
    expect(canonicalJson({ b: 1, a: undefined, c: [{ y: 2, x: undefined }] })).toBe('{"b":1,"c":[{"y":2}]}')
    expect(hashValue({ b: 1, a: { d: undefined, c: 'x' } })).toBe(sha256('{"a":{"c":"x"},"b":1}'))
    expect(canonicalJson({ at: new Date(0), n: -0 })).toBe('{"at":{"v":"1970-01-01T00:00:00.000Z","~":"Date"},"n":{"v":"-0","~":"num"}}')
  })

  it('gives the short JSON of a small plain value, and nothing for a long or special one', () => {
    expect(shortPlainJson({ step: 3, snapshot: false }, 100)).toBe('{"step":3,"snapshot":false}')
    expect(shortPlainJson({ text: 'x'.repeat(100) }, 100)).toBeUndefined()
    expect(shortPlainJson({ many: Array.from({ length: 200 }, (_, i) => i) }, 100)).toBeUndefined()
    expect(shortPlainJson({ at: new Date(0) }, 100)).toBeUndefined()
  })

  it('still refuses what cannot be checkpointed, with the path', () => {
    expect(() => serialize({ fn: () => 1 })).toThrow(/value\.fn: a function cannot be checkpointed/)
    const cycle: Record<string, unknown> = {}
    cycle.self = cycle
    expect(() => serialize({ cycle })).toThrow(/cycle/)
  })

  it('stores a short payload as its plain JSON body, and a long list still as a list', () => {
    const short = encodePayload({ step: 1, usage: { inputTokens: 2, outputTokens: undefined }, ids: ['a', 'b'] }, undefined, () => 'list-1')
    expect(short).toEqual({ body: '{"step":1,"usage":{"inputTokens":2},"ids":["a","b"]}', refs: [], appends: [], lists: new Map() })
    const items = Array.from({ length: 40 }, (_, i) => `item ${i} ${'x'.repeat(40)}`)
    const long = encodePayload({ items }, undefined, () => 'list-1')
    expect(JSON.stringify(items).length).toBeGreaterThan(LIST_MIN_BYTES)
    expect(long.body).toBe('{"items":{"~":"list","i":0}}')
    expect(long.appends).toEqual([{ listId: 'list-1', expectedLength: 0, items: items.map((item) => JSON.stringify(item)) }])
  })
})

describe('codec: pass-through checks stay bounded', () => {
  it('refuses a value that reaches itself through many paths at once, naming the cycle', () => {
    const knot: Record<string, unknown> = {}
    for (const key of ['a', 'b', 'c', 'd', 'e', 'f']) knot[key] = knot
    expect(isPassThrough(knot)).toBe(false)
    expect(() => serialize({ knot })).toThrow(/cycle/)
    expect(() => hashValue([knot])).toThrow(/cycle/)
  })
})
