import { describe, expect, it } from 'vitest'
import { CheckpointCorruptionError, CheckpointError, deserialize, serialize } from '../src/index.js'
import { decodeValue, encodeValue } from '../src/engine.js'

const roundTrip = (value: unknown): unknown => deserialize(JSON.stringify(JSON.parse(serialize(value))))

describe('codec', () => {
  it('round-trips Date, Map, Set, Uint8Array and BigInt exactly', () => {
    const value = {
      at: new Date('2026-01-02T03:04:05.678Z'),
      invalid: new Date(Number.NaN),
      index: new Map<unknown, unknown>([
        ['a', 1],
        [2, new Set(['x', 'y'])],
      ]),
      tags: new Set([1, 'two', null]),
      bytes: new Uint8Array([0, 1, 254, 255]),
      big: 12345678901234567890123n,
      negative: -42n,
      nested: [{ when: new Date(0) }],
    }
    const back = roundTrip(value) as typeof value
    expect(back).toEqual(value)
    expect(back.at).toBeInstanceOf(Date)
    expect(back.index).toBeInstanceOf(Map)
    expect(back.tags).toBeInstanceOf(Set)
    expect(back.bytes).toBeInstanceOf(Uint8Array)
    expect(typeof back.big).toBe('bigint')
    expect(Number.isNaN(back.invalid.getTime())).toBe(true)
  })

  it('round-trips non-finite numbers, negative zero and array holes', () => {
    const back = roundTrip([Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0, undefined]) as unknown[]
    expect(back[0]).toBeNaN()
    expect(back[1]).toBe(Number.POSITIVE_INFINITY)
    expect(back[2]).toBe(Number.NEGATIVE_INFINITY)
    expect(Object.is(back[3], -0)).toBe(true)
    expect(back).toHaveLength(5)
    expect(back[4]).toBeUndefined()
  })

  it('encodes Node Buffers as bytes', () => {
    const back = roundTrip({ b: Buffer.from('hi') }) as { b: Uint8Array }
    expect([...back.b]).toEqual([104, 105])
  })

  it('keeps user objects that look like tags as plain data', () => {
    const value = { '~': 'Date', v: 'not a date', inner: { '~': 'list', i: 0 } }
    expect(roundTrip(value)).toEqual(value)
  })

  it('refuses a function and names its path', () => {
    expect(() => encodeValue({ state: { client: () => 1 } }, 'payload')).toThrow('payload.state.client: a function cannot be checkpointed')
  })

  it('refuses class instances, cycles and symbols with the path', () => {
    class Client {}
    const cyclic: Record<string, unknown> = { a: {} }
    ;(cyclic.a as Record<string, unknown>).self = cyclic
    const cases: [unknown, string][] = [
      [{ x: [1, new Client()] }, 'payload.x[1]: a class instance (Client) cannot be checkpointed'],
      [cyclic, 'payload.a.self: a cycle'],
      [{ s: Symbol('x') }, 'payload.s: a symbol cannot be checkpointed'],
      [{ [Symbol('k')]: 1 }, 'payload: a symbol-keyed property cannot be checkpointed'],
      [{ m: new Map([['k', () => 1]]) }, 'payload.m.get("k"): a function'],
      [{ 'odd key': { f: () => 1 } }, 'payload["odd key"].f: a function'],
    ]
    for (const [value, message] of cases) {
      let error: unknown
      try {
        encodeValue(value, 'payload')
      } catch (err) {
        error = err
      }
      expect(error).toBeInstanceOf(CheckpointError)
      expect((error as CheckpointError).code).toBe('unserializable')
      expect((error as Error).message).toContain(message)
    }
  })

  it('allows shared references that are not cycles', () => {
    const shared = { n: 1 }
    expect(roundTrip({ a: shared, b: shared })).toEqual({ a: { n: 1 }, b: { n: 1 } })
  })

  it('never lets __proto__ or constructor reach a prototype when decoding', () => {
    const hostile = '{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}},"nested":{"__proto__":{"isAdmin":true}}}'
    const value = deserialize(hostile) as Record<string, unknown>
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype)
    expect((value.nested as Record<string, unknown>).isAdmin).toBeUndefined()
    expect(Object.getOwnPropertyNames(value)).toContain('__proto__')
    expect(Object.getPrototypeOf(value.nested)).toBe(Object.prototype)
  })

  it('keeps a __proto__ key through encode and decode as plain data', () => {
    const original = JSON.parse('{"__proto__":{"x":1},"ok":true}') as unknown
    const back = roundTrip(original) as Record<string, unknown>
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype)
    expect(Object.getOwnPropertyDescriptor(back, '__proto__')?.value).toEqual({ x: 1 })
  })

  it('rejects unknown and malformed tags as corruption, without running anything', () => {
    expect(() => decodeValue({ '~': 'Function', v: 'process.exit(1)' })).toThrow(CheckpointCorruptionError)
    expect(() => decodeValue({ '~': 'BigInt', v: '12abc' })).toThrow(CheckpointCorruptionError)
    expect(() => decodeValue({ '~': 'Date', v: 'yesterday' })).toThrow(CheckpointCorruptionError)
    expect(() => deserialize('{"a":')).toThrow(CheckpointCorruptionError)
  })
})
