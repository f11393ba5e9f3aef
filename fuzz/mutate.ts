import fc from 'fast-check'

/**
 * Mutations of a stored or handed-over JSON text, as fast-check arbitraries: each yields the
 * mutated text and the class of mutation that made it.
 */
export interface Mutation {
  kind: MutationKind
  text: string
}

export type MutationKind = 'bit flip' | 'truncation' | 'type swap' | 'huge number' | 'deep nesting' | 'long string' | 'prototype key' | 'wrong tag'

const DEEP = 100_000
const PLACEHOLDER = '\u0000cairn-fuzz-placeholder\u0000'

/** Every path to a value inside `value` (the root included). */
export function pathsOf(value: unknown, limit = 5_000): (string | number)[][] {
  const out: (string | number)[][] = []
  const walk = (node: unknown, path: (string | number)[]) => {
    if (out.length >= limit) return
    out.push(path)
    if (Array.isArray(node)) node.forEach((item, i) => walk(item, [...path, i]))
    else if (typeof node === 'object' && node !== null) for (const key of Object.keys(node)) walk((node as Record<string, unknown>)[key], [...path, key])
  }
  walk(value, [])
  return out
}

/** A copy of `root` with the value at `path` replaced (the root itself when the path is empty). */
function replaceAt(root: unknown, path: readonly (string | number)[], value: unknown): unknown {
  if (path.length === 0) return value
  const copy = JSON.parse(JSON.stringify(root)) as unknown
  let node = copy as Record<string | number, unknown>
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>
  Object.defineProperty(node, path[path.length - 1]!, { value, enumerable: true, writable: true, configurable: true })
  return copy
}

/** Serialize a value that may hold the placeholder for a 100,000-deep nesting. */
function textOf(value: unknown, deep?: 'array' | 'object'): string {
  const text = JSON.stringify(value)
  if (deep === undefined) return text
  const nested = deep === 'array' ? '['.repeat(DEEP) + ']'.repeat(DEEP) : '{"a":'.repeat(DEEP) + '1' + '}'.repeat(DEEP)
  return text.replace(JSON.stringify(PLACEHOLDER), nested)
}

const oddValues = fc.constantFrom<unknown>(null, true, false, 0, -1, 1.5, '', 'x', [], {}, [null], { '~': 'undef' }, '1970-01-01T00:00:00.000Z')
const hugeNumbers = fc.constantFrom(1e308, -1e308, Number.MAX_SAFE_INTEGER + 2, -(2 ** 53) - 2, 2 ** 64, -1, -(2 ** 31), 1e-320, 4294967296)
const tags = fc.constantFrom('BigInt', 'Date', 'Map', 'Set', 'Bytes', 'num', 'obj', 'undef', 'list', 'item', 'nope', '')
const tagValues = fc.oneof(
  oddValues,
  fc.constantFrom<unknown>('9'.repeat(50_000), '-', 'not a date', [[1]], [1, 2, 3], [[1, 2, 3]], { a: 1 }, 'AAA=====', 'Infinity', -5, 1e308, { i: -1, n: 1e9 }),
)

/**
 * The arbitrary of mutations of `text` (a JSON document). `structural` mutations edit the
 * parsed value at a random path; `textual` ones (bit flips, truncation) edit the text itself.
 */
export function mutations(text: string): fc.Arbitrary<Mutation> {
  const value = JSON.parse(text) as unknown
  const paths = pathsOf(value)
  const path = fc.constantFrom(...paths)
  const bitFlip = fc.tuple(fc.nat({ max: Math.max(0, text.length - 1) }), fc.nat({ max: 7 })).map(([at, bit]): Mutation => ({
    kind: 'bit flip',
    text: text.slice(0, at) + String.fromCharCode(text.charCodeAt(at) ^ (1 << bit)) + text.slice(at + 1),
  }))
  const truncation = fc.nat({ max: Math.max(0, text.length - 1) }).map((at): Mutation => ({ kind: 'truncation', text: text.slice(0, at) }))
  const typeSwap = fc.tuple(path, oddValues).map(([p, v]): Mutation => ({ kind: 'type swap', text: textOf(replaceAt(value, p, v)) }))
  const huge = fc.tuple(path, hugeNumbers).map(([p, v]): Mutation => ({ kind: 'huge number', text: textOf(replaceAt(value, p, v)) }))
  const deep = fc.tuple(path, fc.constantFrom<'array' | 'object'>('array', 'object')).map(([p, shape]): Mutation => ({
    kind: 'deep nesting',
    text: textOf(replaceAt(value, p, PLACEHOLDER), shape),
  }))
  const long = fc.tuple(path, fc.constantFrom(100_000, 1_000_000, 4_000_000)).map(([p, n]): Mutation => ({ kind: 'long string', text: textOf(replaceAt(value, p, 'x'.repeat(n))) }))
  const proto = fc.tuple(path, fc.constantFrom('__proto__', 'constructor', 'prototype'), fc.constantFrom<unknown>({ polluted: true }, { toString: 1 }, 'x', null)).map(
    ([p, key, v]): Mutation => {
      const holder = Object.defineProperty({}, key, { value: v, enumerable: true, writable: true, configurable: true })
      const target = paths.some((q) => q.length === p.length + 1 && q.every((k, i) => k === p[i])) ? p : []
      const base = lookup(value, target)
      const merged = typeof base === 'object' && base !== null && !Array.isArray(base) ? Object.defineProperty({ ...base }, key, { value: v, enumerable: true, writable: true, configurable: true }) : holder
      return { kind: 'prototype key', text: textOf(replaceAt(value, target, merged)) }
    },
  )
  const wrongTag = fc.tuple(path, tags, tagValues).map(([p, tag, v]): Mutation => ({ kind: 'wrong tag', text: textOf(replaceAt(value, p, { '~': tag, v })) }))
  return fc.oneof(bitFlip, truncation, typeSwap, huge, deep, long, proto, wrongTag)
}

function lookup(root: unknown, path: readonly (string | number)[]): unknown {
  let node = root
  for (const key of path) node = (node as Record<string | number, unknown>)[key]
  return node
}
