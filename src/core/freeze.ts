import { isPlainObject } from './codec.js'

const deeplyFrozen = new WeakSet<object>()

/**
 * Freeze a value and everything inside it, and remember that it is deeply frozen. Stores use
 * this to serialize a frozen message once and reuse its JSON on every later checkpoint, so the
 * cost of a save follows what changed rather than the whole conversation. The agent loop freezes
 * every message it adds.
 *
 * @example
 * ```ts
 * messages.push(freezeDeep({ role: 'user', content: [{ text: 'hi' }] }))
 * ```
 */
export function freezeDeep<T>(value: T): T {
  freezeWithin(value, new Set())
  return value
}

/** Freeze `value` and what it holds; true when all of it is now known to be deeply frozen (and remembered so). */
function freezeWithin(value: unknown, visiting: Set<object>): boolean {
  if (typeof value !== 'object' || value === null || deeplyFrozen.has(value)) return true
  // A cycle: the value is not known to be deeply frozen until its own walk ends.
  if (visiting.has(value)) return false
  // Typed arrays, Dates, Maps and Sets keep mutable internal state even when frozen: a value
  // holding one is frozen as far as possible but never marked, so it is always re-serialized.
  if (!Array.isArray(value) && !isPlainObject(value)) return false
  visiting.add(value)
  let whole = true
  for (const key of Reflect.ownKeys(value)) if (!freezeWithin((value as Record<PropertyKey, unknown>)[key], visiting)) whole = false
  visiting.delete(value)
  Object.freeze(value)
  if (whole) deeplyFrozen.add(value)
  return whole
}

/**
 * {@link freezeDeep} for a value just decoded from stored JSON: a tree, whose objects are plain
 * objects and arrays with string keys (or a Date, Map, Set or bytes, left as they are and never
 * marked, as `freezeDeep` does), with no cycles and no shared parts, so the walk needs no record of
 * where it has been. Only the root is remembered as deeply frozen (what a later save looks up: a
 * list item), which keeps decoding a run's lists, item by item, cheap.
 */
export function freezeTree<T>(value: T): T {
  if (freezeNode(value) && typeof value === 'object' && value !== null) deeplyFrozen.add(value)
  return value
}

/**
 * {@link freezeTree} for what `JSON.parse` made of text that holds no tagged value (so decoding
 * it would change nothing), walked here for the first time: false, and the root not marked, when
 * it nests deeper than `maxDepth` (where decoding stops), so the caller decodes it to report
 * that. All of it is plain data: the root is remembered as deeply frozen.
 */
export function freezeParsed(value: unknown, maxDepth: number): boolean {
  if (!freezeJson(value, 0, maxDepth)) return false
  if (typeof value === 'object' && value !== null) deeplyFrozen.add(value)
  return true
}

/** Freeze parsed JSON bottom up, as far as `maxDepth` (an object or array at that depth or deeper is refused, as `decodeValue` refuses it). */
function freezeJson(value: unknown, depth: number, maxDepth: number): boolean {
  if (typeof value !== 'object' || value === null) return true
  if (depth >= maxDepth) return false
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!freezeJson(value[i], depth + 1, maxDepth)) return false
  } else {
    const keys = Object.keys(value)
    for (let k = 0; k < keys.length; k++) if (!freezeJson((value as Record<string, unknown>)[keys[k]!], depth + 1, maxDepth)) return false
  }
  Object.freeze(value)
  return true
}

/** Freeze a decoded tree bottom up; true when all of it is plain data, now frozen. */
function freezeNode(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return true
  let whole = true
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!freezeNode(value[i])) whole = false
  } else if (isPlainObject(value)) {
    const keys = Object.keys(value)
    for (let k = 0; k < keys.length; k++) if (!freezeNode(value[keys[k]!])) whole = false
  } else {
    return false
  }
  Object.freeze(value)
  return whole
}

/** True when `value` was deeply frozen by {@link freezeDeep}, so it can never change. */
export function isDeepFrozen(value: unknown): boolean {
  return typeof value === 'object' && value !== null && deeplyFrozen.has(value)
}
