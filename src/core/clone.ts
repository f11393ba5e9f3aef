/**
 * A deep copy of `value`, as `structuredClone` makes it, made by hand for the plain data agents
 * keep (plain objects, arrays, strings, numbers, booleans, null): a snapshot copies its small
 * state objects several times a step, and `structuredClone`'s own cost is mostly fixed. A part
 * that is anything else (a Date, a Map, a typed array, an object with a prototype), a value
 * nested very deep (a cycle, say) or one holding the same object twice is left to
 * `structuredClone`, whole, so the copy is the same either way.
 */
export function cloneData<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value
  const seen = new Set<object>()
  const copy = copyPlain(value, 0, seen)
  return copy === NOT_PLAIN ? structuredClone(value) : (copy as T)
}

const NOT_PLAIN = Symbol('not plain')
/** Deeper than this is left to `structuredClone`. */
const MAX_DEPTH = 32

function copyPlain(value: unknown, depth: number, seen: Set<object>): unknown {
  if (typeof value !== 'object' || value === null) return typeof value === 'function' || typeof value === 'symbol' || typeof value === 'bigint' ? NOT_PLAIN : value
  if (depth > MAX_DEPTH || seen.has(value)) return NOT_PLAIN
  seen.add(value)
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) return NOT_PLAIN
    const out: unknown[] = new Array(value.length)
    for (let i = 0; i < value.length; i++) {
      if (!(i in value)) return NOT_PLAIN
      const item = copyPlain(value[i], depth + 1, seen)
      if (item === NOT_PLAIN) return NOT_PLAIN
      out[i] = item
    }
    return out
  }
  const proto = Object.getPrototypeOf(value) as unknown
  if (proto !== Object.prototype && proto !== null) return NOT_PLAIN
  const out: Record<string, unknown> = {}
  for (const key of Object.keys(value)) {
    const item = copyPlain((value as Record<string, unknown>)[key], depth + 1, seen)
    if (item === NOT_PLAIN) return NOT_PLAIN
    if (key === '__proto__') Object.defineProperty(out, key, { value: item, writable: true, enumerable: true, configurable: true })
    else out[key] = item
  }
  return out
}
