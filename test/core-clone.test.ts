import { describe, expect, it } from 'vitest'
import { cloneData } from '../src/core/clone.js'

describe('cloneData', () => {
  const shared = { n: 1 }
  const cyclic: Record<string, unknown> = { a: 1 }
  cyclic.self = cyclic
  const values: [string, unknown][] = [
    ['plain data', { pending: [], completed: [{ id: 'x', at: 1.5 }], responses: { a: null, b: true }, cycleIndex: 0, none: undefined, neg: -0, nan: Number.NaN }],
    ['an array of arrays', [[1, [2, [3]]], 'text']],
    ['a null-prototype object', Object.assign(Object.create(null) as object, { k: 'v' })],
    ['a Date and a Map inside', { when: new Date(0), map: new Map([['k', { v: 1 }]]), set: new Set([1]) }],
    ['bytes inside', { bytes: new Uint8Array([1, 2, 3]) }],
    // eslint-disable-next-line no-sparse-arrays -- a hole is what is tested
    ['a sparse array', [1, , 3]],
    ['the same object twice', { left: shared, right: shared }],
    ['a cycle', cyclic],
    ['a __proto__ key', JSON.parse('{"__proto__": {"polluted": true}, "ok": 1}')],
    ['deep nesting', JSON.parse(`${'{"a":'.repeat(60)}1${'}'.repeat(60)}`)],
    ['an empty object', {}],
    ['a primitive', 'text'],
  ]

  it.each(values)('copies %s as structuredClone does', (_, value) => {
    const copy = cloneData(value)
    expect(copy).toStrictEqual(structuredClone(value))
    if (typeof value === 'object' && value !== null) expect(copy).not.toBe(value)
  })

  it('keeps shared parts shared and a cycle a cycle, as structuredClone does', () => {
    const copy = cloneData({ left: shared, right: shared })
    expect(copy.left).toBe(copy.right)
    const loop = cloneData(cyclic)
    expect(loop.self).toBe(loop)
  })

  it('leaves nothing of the copy shared with the original', () => {
    const value = { list: [{ a: 1 }], inner: { b: [2] } }
    const copy = cloneData(value)
    copy.list[0]!.a = 9
    copy.inner.b.push(3)
    expect(value).toEqual({ list: [{ a: 1 }], inner: { b: [2] } })
  })

  it('refuses a function as structuredClone does', () => {
    expect(() => cloneData({ f: () => 1 })).toThrow(/could not be cloned/)
  })
})
