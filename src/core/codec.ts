import { CheckpointCorruptionError, CheckpointError } from './errors.js'
import { jsonTextDepth, limits, maxJsonDepth, type CairnLimits } from './limits.js'

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
 * Anything that cannot be persisted — a function, a class instance, a cycle, a symbol, or a value
 * beyond the {@link CairnLimits} (nesting deeper than `maxDepth`, a string longer than
 * `maxStringLength`, a BigInt of more than `maxBigIntDigits` digits) — is refused with a
 * {@link CheckpointError} (`code: 'unserializable'`) whose message names the path.
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
 * malformed tag, or a value beyond the {@link CairnLimits}, is a {@link CheckpointCorruptionError}
 * naming the path.
 */
export function decodeValue(json: unknown, context: DecodeContext = {}): unknown {
  return decodeAt(json, decoderOf(context, 'value'), 0)
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
  return serializeNested(value, path, new Set())
}

/**
 * {@link serialize} for a value found inside another that is being encoded (see
 * {@link encodeNested}). Plain JSON, which the codec passes through unchanged, is stringified
 * as it is, without building its encoded copy first; the text is the same either way.
 */
export function serializeNested(value: unknown, path: string | (() => string), ancestors: Set<object>): string {
  if (isPassThrough(value, ancestors.size)) {
    const text = JSON.stringify(value)
    // The path is only spelled out for an error message.
    return text.length > limits().maxPayloadChars ? stringifyEncoded(value as JsonValue, pathText(path)) : text
  }
  const where = pathText(path)
  return stringifyEncoded(encodeAt(value, where, ancestors), where)
}

function pathText(path: string | (() => string)): string {
  return typeof path === 'string' ? path : path()
}

/**
 * True when {@link encodeValue} would return a copy of `value` equal to it, key order included:
 * only plain objects (no `~` key, no symbol keys) and arrays (no holes), strings within
 * `maxStringLength`, finite numbers other than -0, booleans and null, nested less deep than
 * `maxDepth` below `depth`. Object properties holding `undefined` are allowed: the codec and
 * `JSON.stringify` both leave them out. Anything else, errors included, takes the full encoder.
 */
export function isPassThrough(value: unknown, depth = 0): boolean {
  return passesThrough(value, depth, limits(), { left: Number.POSITIVE_INFINITY, path: [] })
}

/**
 * {@link isPassThrough} for a value whose JSON is also shorter than `maxChars` (at `depth`
 * objects below the root) and holds no object `refuse` rejects. The walk stops as soon as the
 * answer is no.
 */
export function isShortPassThrough(value: unknown, params: { maxChars: number; depth: number; refuse?: (object: object) => boolean }): boolean {
  return passesThrough(value, params.depth, limits(), { left: params.maxChars, path: [], ...(params.refuse ? { refuse: params.refuse } : {}) })
}

/**
 * The JSON text of `value` when it passes through the codec unchanged (see
 * {@link isPassThrough}) and that text is shorter than `maxChars`; otherwise undefined. The walk
 * gives up as soon as the value is known to be too long, so asking costs little either way.
 */
export function shortPlainJson(value: unknown, maxChars: number): string | undefined {
  if (!passesThrough(value, 0, limits(), { left: maxChars, path: [] })) return undefined
  const text = JSON.stringify(value)
  return text.length < maxChars ? text : undefined
}

function objectPassesThrough(value: object, depth: number, bounds: Readonly<CairnLimits>, budget: Budget): boolean {
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) return false
    for (let i = 0; i < value.length; i++) if (!(i in value) || !passesThrough(value[i], depth + 1, bounds, budget)) return false
    return true
  }
  const proto = Object.getPrototypeOf(value) as unknown
  if ((proto !== Object.prototype && proto !== null) || Object.getOwnPropertySymbols(value).length > 0) return false
  const object = value as Record<string, unknown>
  for (const key of Object.keys(object)) {
    const item = object[key]
    if (key === TAG || (item !== undefined && !passesThrough(item, depth + 1, bounds, budget))) return false
  }
  return true
}

/**
 * How far a pass-through check may go: `left`, characters the value's JSON may still take (a
 * lower bound is counted: one per value, and each string's length); `path`, the objects being
 * walked; `refuse`, objects that do not pass.
 */
interface Budget {
  left: number
  path: object[]
  refuse?: (object: object) => boolean
}

function passesThrough(value: unknown, depth: number, bounds: Readonly<CairnLimits>, budget: Budget): boolean {
  if (--budget.left < 0) return false
  switch (typeof value) {
    case 'string':
      budget.left -= value.length
      return value.length <= bounds.maxStringLength && budget.left >= 0
    case 'boolean':
      return true
    case 'number':
      return Number.isFinite(value) && !Object.is(value, -0)
    case 'object': {
      if (value === null) return true
      // A cycle is left to the full encoder, which names it.
      if (depth >= bounds.maxDepth || budget.refuse?.(value) === true || budget.path.includes(value)) return false
      budget.path.push(value)
      const passes = objectPassesThrough(value, depth, bounds, budget)
      budget.path.pop()
      return passes
    }
    default:
      return false
  }
}

/**
 * `JSON.stringify` of what {@link encodeValue} returned, refusing (as `unserializable`) a text
 * longer than the `maxPayloadChars` limit, which could never be loaded back.
 */
export function stringifyEncoded(json: JsonValue, path: string): string {
  const text = JSON.stringify(json)
  const { maxPayloadChars } = limits()
  if (text.length > maxPayloadChars) {
    throw unserializable(path, `its JSON is ${text.length} characters long, more than the limit maxPayloadChars (${maxPayloadChars}); store less, or raise the limit with configureLimits`)
  }
  return text
}

/** Parse and decode text written by {@link serialize}; bad JSON is a corruption error. */
export function deserialize(text: string, context: DecodeContext = {}): unknown {
  // Decoding is the first walk of the parsed value and stops at maxDepth itself, so the text
  // needs only its length checked, not a scan for depth.
  const parsed = parseText(text, context, false)
  return isPlainText(text) ? parsed : decodeValue(parsed, context)
}

/**
 * Whether decoding the parse of `text` could neither change it nor refuse it, so the walk can be
 * left out (most stored bodies and metadata are small and plain): the text is too short to nest
 * `maxDepth` levels or to hold a string over `maxStringLength`, and holds no tag (a key `"~"` is
 * written as `"~"` or with a `\u` escape; a text with either is decoded as ever).
 */
function isPlainText(text: string): boolean {
  return text.length <= 2 * limits().maxDepth && holdsNoTag(text)
}

/**
 * Whether decoding the parse of `text` could change nothing in it, and refuse it only for its
 * depth: the text holds no tag (a key `"~"` is written as `"~"` or with a `\u` escape; a text
 * with either may hold one) and is too short to hold a string over `maxStringLength`. The parse
 * of such a text is already its decoded value, once its depth is checked.
 */
export function holdsNoTag(text: string): boolean {
  return text.length <= limits().maxStringLength && !text.includes(`"${TAG}"`) && !text.includes('\\u')
}

/**
 * `JSON.parse` that reports failure as a {@link CheckpointCorruptionError}: text that is not
 * JSON, longer than `maxPayloadChars`, or nested deeper than the limits allow (checked before
 * parsing, so no later walk of the value can overflow the stack).
 */
export function parseJson(text: string, context: DecodeContext = {}): unknown {
  return parseText(text, context, true)
}

/**
 * Check stored JSON text against the limits without parsing it: longer than `maxPayloadChars`
 * or (unless `checkDepth` is false, for text whose first walk is {@link decodeValue}) nested
 * deeper than the codec could ever have written is a {@link CheckpointCorruptionError}.
 */
export function assertJsonText(text: string, context: DecodeContext = {}, checkDepth = true): void {
  const { maxPayloadChars } = limits()
  if (text.length > maxPayloadChars) {
    throw corruption(context, 'value', `is ${text.length} characters long, more than the limit maxPayloadChars (${maxPayloadChars}); raise it with configureLimits if this is expected`)
  }
  const deepest = maxJsonDepth()
  if (checkDepth && text.length > 2 * deepest && jsonTextDepth(text, deepest) > deepest) {
    throw corruption(context, 'value', `nests deeper than ${deepest} levels, which Cairn never writes (limit maxDepth: ${limits().maxDepth})`)
  }
}

/** True for an object literal or `Object.create(null)`: the only objects Cairn persists as objects. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false
  const proto = Object.getPrototypeOf(value) as unknown
  return proto === Object.prototype || proto === null
}

function parseText(text: string, context: DecodeContext, checkDepth: boolean): unknown {
  if (typeof text !== 'string') throw corruption(context, 'value', `is a ${text === null ? 'null' : typeof text}, not JSON text`)
  assertJsonText(text, context, checkDepth)
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

function encodeAt(value: unknown, path: string, ancestors: Set<object>): JsonValue {
  switch (typeof value) {
    case 'string':
      if (value.length > limits().maxStringLength) throw unserializable(path, `a string of ${value.length} characters is longer than the limit maxStringLength (${limits().maxStringLength}); store it elsewhere or raise the limit with configureLimits`)
      return value
    case 'boolean':
      return value
    case 'number':
      if (Number.isFinite(value) && !Object.is(value, -0)) return value
      return { [TAG]: 'num', v: String(Object.is(value, -0) ? '-0' : value) }
    case 'bigint': {
      const digits = value.toString()
      if (digits.length > limits().maxBigIntDigits + 1) throw unserializable(path, `a BigInt of ${digits.length} digits has more than the limit maxBigIntDigits (${limits().maxBigIntDigits})`)
      return { [TAG]: 'BigInt', v: digits }
    }
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
  if (ancestors.size >= limits().maxDepth) {
    throw unserializable(path, `the value nests deeper than the limit maxDepth (${limits().maxDepth} levels); flatten it or raise the limit with configureLimits`)
  }
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

/**
 * One decode: the limits it checks, read once, and the trail from the root to the value being
 * decoded (object keys, array indexes, and labels inside a Map or Set). The trail is spelled out
 * as a path only for an error: most decodes never need it.
 */
interface Decoder {
  context: DecodeContext
  root: string
  maxDepth: number
  maxStringLength: number
  maxBigIntDigits: number
  trail: Segment[]
}

/** A step of a decode's trail: an object key, an array index, or a label such as `<key 0>`. */
type Segment = string | number | { label: string }

function decoderOf(context: DecodeContext, root: string): Decoder {
  const { maxDepth, maxStringLength, maxBigIntDigits } = limits()
  return { context, root, maxDepth, maxStringLength, maxBigIntDigits, trail: [] }
}

/** The path of the value being decoded, as the messages spell it (`value.messages[3].content`). */
function trailPath(decoder: Decoder): string {
  let path = decoder.root
  for (const segment of decoder.trail) {
    if (typeof segment === 'number') path = `${path}[${segment}]`
    else if (typeof segment === 'string') path = childPath(path, segment)
    else path = `${path}.${segment.label}`
  }
  return path
}

function decodeAt(json: unknown, decoder: Decoder, depth: number): unknown {
  if (typeof json !== 'object' || json === null) return checkScalar(json, decoder)
  if (depth >= decoder.maxDepth) throw corruption(decoder.context, trailPath(decoder), `nests deeper than the limit maxDepth (${decoder.maxDepth} levels)`)
  if (Array.isArray(json)) {
    const trail = decoder.trail
    for (let i = 0; i < json.length; i++) {
      const item: unknown = json[i]
      if (typeof item === 'object' && item !== null) {
        trail.push(i)
        json[i] = decodeAt(item, decoder, depth + 1)
        trail.pop()
      } else if (typeof item === 'string' && item.length > decoder.maxStringLength) checkScalar(item, decoder)
    }
    return json
  }
  const obj = json as Record<string, unknown>
  if (Object.prototype.hasOwnProperty.call(obj, TAG)) return decodeTag(obj, decoder, depth)
  decodeFields(obj, decoder, depth)
  return obj
}

function decodeFields(obj: Record<string, unknown>, decoder: Decoder, depth: number): void {
  const trail = decoder.trail
  // Indexed loops, here and in the other walks of a read: a fresh process runs them before they
  // are optimized, when a for-of allocates an iterator result at every step.
  const keys = Object.keys(obj)
  for (let k = 0; k < keys.length; k++) {
    const key = keys[k]!
    const item = obj[key]
    if (typeof item === 'object' && item !== null) {
      trail.push(key)
      const decoded = decodeAt(item, decoder, depth + 1)
      trail.pop()
      if (decoded !== item) setOwn(obj, key, decoded)
    } else if (typeof item === 'string' && item.length > decoder.maxStringLength) checkScalar(item, decoder)
  }
}

/** A scalar, refused when it is a string over the limit; the error names the path of the object or array holding it. */
function checkScalar(value: unknown, decoder: Decoder): unknown {
  if (typeof value === 'string' && value.length > decoder.maxStringLength) {
    throw corruption(decoder.context, trailPath(decoder), `holds a string of ${value.length} characters, longer than the limit maxStringLength (${decoder.maxStringLength})`)
  }
  return value
}

/** Decode `json` one level below the current trail, under `label`. */
function decodeLabelled(json: unknown, decoder: Decoder, depth: number, label: string): unknown {
  decoder.trail.push({ label })
  const decoded = decodeAt(json, decoder, depth)
  decoder.trail.pop()
  return decoded
}

function decodeTag(obj: Record<string, unknown>, decoder: Decoder, depth: number): unknown {
  const tag = obj[TAG]
  const v = obj.v
  switch (tag) {
    case 'Date':
      if (v === null) return new Date(Number.NaN)
      if (typeof v === 'string' && v.length <= 64 && !Number.isNaN(Date.parse(v))) return new Date(v)
      break
    case 'BigInt':
      if (typeof v === 'string' && v.length > decoder.maxBigIntDigits + 1) {
        throw corruption(decoder.context, trailPath(decoder), `holds a BigInt of ${v.length} digits, more than the limit maxBigIntDigits (${decoder.maxBigIntDigits})`)
      }
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
      if (typeof v === 'string' && checkScalar(v, decoder) === v && /^[A-Za-z0-9+/]*={0,2}$/.test(v)) return new Uint8Array(Buffer.from(v, 'base64'))
      break
    case 'Map':
      if (Array.isArray(v) && v.every((e) => Array.isArray(e) && e.length === 2)) {
        return new Map((v as [unknown, unknown][]).map(([k, val], i) => [decodeLabelled(k, decoder, depth + 1, `<key ${i}>`), decodeLabelled(val, decoder, depth + 1, `<value ${i}>`)]))
      }
      break
    case 'Set':
      if (Array.isArray(v)) return new Set(v.map((item, i) => decodeLabelled(item, decoder, depth + 1, `<item ${i}>`)))
      break
    case 'obj':
      if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
        decodeFields(v as Record<string, unknown>, decoder, depth)
        return v
      }
      break
  }
  throw corruption(decoder.context, trailPath(decoder), `holds an unknown or malformed tagged value (${JSON.stringify(typeof tag === 'string' ? tag.slice(0, 40) : typeof tag)})`)
}

/** Assign an own data property, even for `__proto__`, without touching any prototype. */
export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
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
  return new CheckpointError('unserializable', `${shortPath(path)}: ${reason}`, { path })
}

function corruption(context: DecodeContext, path: string, problem: string): CheckpointCorruptionError {
  return new CheckpointCorruptionError(`${describe(context)}: ${shortPath(path)} ${problem}`, { runId: context.runId, checkpointId: context.checkpointId, path })
}

/** A path short enough for a message (the error's `path` field keeps it whole). */
function shortPath(path: string): string {
  return path.length <= 160 ? path : `${path.slice(0, 80)}…${path.slice(-60)}`
}

function describe(context: DecodeContext): string {
  const what = context.what ?? 'stored value'
  const ids = [context.runId && `run ${context.runId}`, context.checkpointId && `checkpoint ${context.checkpointId}`].filter(Boolean)
  return ids.length > 0 ? `${what} of ${ids.join(', ')}` : what
}
