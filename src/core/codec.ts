import { CheckpointCorruptionError, CheckpointError } from './errors.js'

/** A JSON value as Cairn persists it. */
export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject
/** A JSON object. */
export interface JsonObject {
  [key: string]: JsonValue
}

/**
 * Where a decoded value came from, so errors can name the run and checkpoint.
 */
export interface DecodeContext {
  runId?: string | undefined
  checkpointId?: string | undefined
  /** What the value is, for messages: `payload`, `effect output`, … */
  what?: string | undefined
}

/**
 * The key that marks a tagged value in encoded JSON. A user object that has this key is itself
 * wrapped in an `obj` tag, so tags and user data never collide.
 */
export const TAG = '~'

/**
 * Encode a value for persistence: plain objects, arrays, strings, finite numbers, booleans and
 * null pass through; Date, Map, Set, Uint8Array, BigInt, non-finite numbers, -0 and array holes
 * become tagged objects so they round-trip exactly. Object properties whose value is `undefined`
 * are omitted, as in JSON.
 *
 * Anything that cannot be persisted — a function, a class instance, a cycle, a symbol — is refused
 * with a {@link CheckpointError} (`code: 'unserializable'`) whose message names the path.
 *
 * @example
 * ```ts
 * encodeValue({ at: new Date(0) }, 'payload') // { at: { '~': 'Date', v: '1970-01-01T00:00:00.000Z' } }
 * encodeValue({ client: () => 1 }, 'payload') // throws "payload.client: a function cannot be checkpointed"
 * ```
 */
export function encodeValue(value: unknown, path = 'value'): JsonValue {
  return encodeAt(value, path, new Set())
}

/**
 * Decode what {@link encodeValue} produced (for example the output of `JSON.parse`). The input
 * is consumed: decoding rewrites tagged values in place. It never runs code, and a `__proto__`
 * key is kept as an own data property, never reaching an object's prototype. An unknown or
 * malformed tag is a {@link CheckpointCorruptionError}.
 */
export function decodeValue(json: unknown, context: DecodeContext = {}): unknown {
  return decodeAt(json, context, 'value')
}

/**
 * {@link encodeValue} for a value found inside another that is being encoded: `ancestors` holds
 * the objects on the path from the root, so a cycle through them is still refused.
 */
export function encodeNested(value: unknown, path: string, ancestors: Set<object>): JsonValue {
  return encodeAt(value, path, ancestors)
}

/** `JSON.stringify(encodeValue(value, path))`. */
export function serialize(value: unknown, path = 'value'): string {
  return JSON.stringify(encodeValue(value, path))
}

/** Parse and decode text written by {@link serialize}; bad JSON is a corruption error. */
export function deserialize(text: string, context: DecodeContext = {}): unknown {
  return decodeValue(parseJson(text, context), context)
}

/** `JSON.parse` that reports failure as a {@link CheckpointCorruptionError}. */
export function parseJson(text: string, context: DecodeContext = {}): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch (err) {
    throw new CheckpointCorruptionError(`${describe(context)} is not valid JSON (${(err as Error).message})`, {
      runId: context.runId,
      checkpointId: context.checkpointId,
      cause: err,
    })
  }
}

/** True for an object literal or `Object.create(null)`: the only objects Cairn persists as objects. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false
  const proto = Object.getPrototypeOf(value) as unknown
  return proto === Object.prototype || proto === null
}

function encodeAt(value: unknown, path: string, ancestors: Set<object>): JsonValue {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value
    case 'number':
      if (Number.isFinite(value) && !Object.is(value, -0)) return value
      return { [TAG]: 'num', v: String(Object.is(value, -0) ? '-0' : value) }
    case 'bigint':
      return { [TAG]: 'BigInt', v: value.toString() }
    case 'undefined':
      return { [TAG]: 'undef' }
    case 'function':
      throw unserializable(path, 'a function cannot be checkpointed')
    case 'symbol':
      throw unserializable(path, 'a symbol cannot be checkpointed')
    case 'object':
      if (value === null) return null
      return encodeObject(value, path, ancestors)
  }
  throw unserializable(path, `a value of type ${typeof value} cannot be checkpointed`)
}

function encodeObject(value: object, path: string, ancestors: Set<object>): JsonValue {
  if (ancestors.has(value)) {
    throw unserializable(path, 'a cycle (a value that contains itself) cannot be checkpointed; break the cycle or store ids instead')
  }
  if (value instanceof Date) {
    const time = value.getTime()
    return { [TAG]: 'Date', v: Number.isNaN(time) ? null : value.toISOString() }
  }
  if (value instanceof Uint8Array) return { [TAG]: 'Bytes', v: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64') }
  ancestors.add(value)
  try {
    if (Array.isArray(value) && Object.getPrototypeOf(value) === Array.prototype) return encodeArray(value, path, ancestors)
    if (value instanceof Map) {
      const entries: JsonValue[] = []
      let i = 0
      for (const [k, v] of value as Map<unknown, unknown>) {
        entries.push([encodeAt(k, `${path}.<key ${i}>`, ancestors), encodeAt(v, `${path}.get(${keyLabel(k)})`, ancestors)])
        i++
      }
      return { [TAG]: 'Map', v: entries }
    }
    if (value instanceof Set) {
      const items: JsonValue[] = []
      let i = 0
      for (const item of value as Set<unknown>) items.push(encodeAt(item, `${path}.<item ${i++}>`, ancestors))
      return { [TAG]: 'Set', v: items }
    }
    if (!isPlainObject(value)) {
      const name = (value as { constructor?: { name?: unknown } }).constructor?.name
      const label = typeof name === 'string' && name !== '' ? ` (${name})` : ''
      throw unserializable(path, `a class instance${label} cannot be checkpointed; convert it to plain data (objects, arrays, Map, Set, Date)`)
    }
    return encodePlain(value, path, ancestors)
  } finally {
    ancestors.delete(value)
  }
}

function encodeArray(value: readonly unknown[], path: string, ancestors: Set<object>): JsonValue[] {
  const out: JsonValue[] = new Array<JsonValue>(value.length)
  for (let i = 0; i < value.length; i++) {
    out[i] = i in value ? encodeAt(value[i], `${path}[${i}]`, ancestors) : { [TAG]: 'undef' }
  }
  return out
}

function encodePlain(value: Record<string, unknown>, path: string, ancestors: Set<object>): JsonObject {
  if (Object.getOwnPropertySymbols(value).length > 0) {
    throw unserializable(path, 'a symbol-keyed property cannot be checkpointed')
  }
  const out: JsonObject = {}
  let escaped = false
  for (const key of Object.keys(value)) {
    const item = value[key]
    if (item === undefined) continue
    if (key === TAG) escaped = true
    setOwn(out, key, encodeAt(item, childPath(path, key), ancestors))
  }
  return escaped ? { [TAG]: 'obj', v: out } : out
}

function decodeAt(json: unknown, context: DecodeContext, path: string): unknown {
  if (typeof json !== 'object' || json === null) return json
  if (Array.isArray(json)) {
    for (let i = 0; i < json.length; i++) {
      const item: unknown = json[i]
      if (typeof item === 'object' && item !== null) json[i] = decodeAt(item, context, `${path}[${i}]`)
    }
    return json
  }
  const obj = json as Record<string, unknown>
  if (Object.prototype.hasOwnProperty.call(obj, TAG)) return decodeTag(obj, context, path)
  for (const key of Object.keys(obj)) {
    const item = obj[key]
    if (typeof item === 'object' && item !== null) {
      const decoded = decodeAt(item, context, childPath(path, key))
      if (decoded !== item) setOwn(obj, key, decoded)
    }
  }
  return obj
}

function decodeTag(obj: Record<string, unknown>, context: DecodeContext, path: string): unknown {
  const tag = obj[TAG]
  const v = obj.v
  switch (tag) {
    case 'Date':
      if (v === null) return new Date(Number.NaN)
      if (typeof v === 'string' && !Number.isNaN(Date.parse(v))) return new Date(v)
      break
    case 'BigInt':
      if (typeof v === 'string' && /^-?\d+$/.test(v)) return BigInt(v)
      break
    case 'num':
      if (v === 'NaN') return Number.NaN
      if (v === 'Infinity') return Number.POSITIVE_INFINITY
      if (v === '-Infinity') return Number.NEGATIVE_INFINITY
      if (v === '-0') return -0
      break
    case 'undef':
      return undefined
    case 'Bytes':
      if (typeof v === 'string' && /^[A-Za-z0-9+/]*={0,2}$/.test(v)) return new Uint8Array(Buffer.from(v, 'base64'))
      break
    case 'Map':
      if (Array.isArray(v) && v.every((e) => Array.isArray(e) && e.length === 2)) {
        return new Map((v as [unknown, unknown][]).map(([k, val], i) => [decodeAt(k, context, `${path}.<key ${i}>`), decodeAt(val, context, `${path}.<value ${i}>`)]))
      }
      break
    case 'Set':
      if (Array.isArray(v)) return new Set(v.map((item, i) => decodeAt(item, context, `${path}.<item ${i}>`)))
      break
    case 'obj':
      if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
        const inner = v as Record<string, unknown>
        for (const key of Object.keys(inner)) {
          const item = inner[key]
          if (typeof item === 'object' && item !== null) setOwn(inner, key, decodeAt(item, context, childPath(path, key)))
        }
        return inner
      }
      break
  }
  throw new CheckpointCorruptionError(`${describe(context)}: ${path} holds an unknown or malformed tagged value (${JSON.stringify(tag)})`, {
    runId: context.runId,
    checkpointId: context.checkpointId,
    path,
  })
}

/** Assign an own data property, even for `__proto__`, without touching any prototype. */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true })
  } else {
    target[key] = value
  }
}

function childPath(path: string, key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`
}

function keyLabel(key: unknown): string {
  return typeof key === 'string' ? JSON.stringify(key) : typeof key === 'number' || typeof key === 'boolean' ? String(key) : typeof key
}

function unserializable(path: string, reason: string): CheckpointError {
  return new CheckpointError('unserializable', `${path}: ${reason}`, { path })
}

function describe(context: DecodeContext): string {
  const what = context.what ?? 'stored value'
  const ids = [context.runId && `run ${context.runId}`, context.checkpointId && `checkpoint ${context.checkpointId}`].filter(Boolean)
  return ids.length > 0 ? `${what} of ${ids.join(', ')}` : what
}
