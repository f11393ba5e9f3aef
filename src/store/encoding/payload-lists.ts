import { sha256 } from '../../core/hash.js'
import { assertJsonText, encodeNested, isPassThrough, isShortPassThrough, serializeNested, shortPlainJson, stringifyEncoded, isPlainObject, setOwn, TAG, type JsonObject, type JsonValue } from '../../core/codec.js'
import { isDeepFrozen } from '../../core/freeze.js'
import { CheckpointCorruptionError } from '../../core/errors.js'
import { limits } from '../../core/limits.js'
import type { ListAppend, ListRef } from '../engine/rows.js'

/**
 * The append-only list encoding that keeps a run's storage linear.
 *
 * An agent's payload carries a message list that grows by appending. Stored whole at every
 * checkpoint, n checkpoints would cost O(n²) bytes. Instead every array of an encoded payload
 * whose items add up to at least {@link LIST_MIN_BYTES} becomes an append-only *list* of the run:
 * its items are stored once, and the checkpoint body holds only a ref `{"~":"list","i":k}` into
 * its `lists` (`{ id, n, h }`: the first n items of list `id`, whose chain hash is `h`). When the
 * next checkpoint's array at the same place starts with the same items, only the new items are
 * appended; when it does not (a conversation was trimmed or edited), a new list is started.
 */
export const LIST_MIN_BYTES = 1024

/** A list as the writer last saved it at one place of a payload: its ref, and the values its leading items were made from. */
export interface CachedList extends ListRef {
  /** Total characters of the list's items (0 when not known: a list read back from its ref). */
  bytes: number
  /**
   * The values the items were made from, while deeply frozen: the first `frozen` entries (later
   * saves may push onto the array; entries past `frozen` are theirs, or of one not kept). A save
   * that finds the very same values there extends the list without serializing or hashing them.
   */
  sources: unknown[]
  frozen: number
}

/** The lists of a run's last saved payload, by place (a path of keys). */
export type ListCache = Map<string, CachedList>

/** A payload split into body and list writes. */
export interface EncodedPayload {
  body: string
  refs: ListRef[]
  appends: ListAppend[]
  /** The cache to keep if the commit succeeds. */
  lists: ListCache
}

/**
 * Encode a payload through the codec and split it into a body and list appends, reusing the
 * lists of `previous` wherever the new array extends them. A list item that was deeply frozen
 * (`freezeDeep`) is serialized once and its JSON reused on every later save, so a save costs
 * what changed, not the whole conversation.
 */
export function encodePayload(value: unknown, previous: ListCache | undefined, newListId: () => string): EncodedPayload {
  // A payload whose whole JSON is shorter than a list can be holds no list: its body is its plain encoding.
  const short = shortPlainJson(value, LIST_MIN_BYTES)
  const out: EncodedPayload = { body: short ?? '', refs: [], appends: [], lists: new Map() }
  if (short === undefined) out.body = stringifyEncoded(splitValue(value, { parent: undefined, key: 'payload' }, new Set(), { previous, newListId, out }), 'payload')
  return out
}

/**
 * Rebuild the payload tree from a body and the items of its lists. Verifies every list's item
 * count and chain hash; a mismatch is a {@link CheckpointCorruptionError}.
 */
export function decodePayload(params: { body: unknown; refs: readonly ListRef[]; items: readonly (readonly string[])[]; runId: string; checkpointId: string }): unknown {
  const { refs, items, runId, checkpointId } = params
  const corrupt = (problem: string) => new CheckpointCorruptionError(`checkpoint ${checkpointId} of run ${runId}: ${problem}`, { runId, checkpointId })
  const lists = refs.map((ref, k) => {
    const listItems = items[k] ?? []
    if (listItems.length !== ref.n || chainHash('', listItems) !== ref.h) throw corrupt(unmatchedList(ref, listItems.length))
    const parsed = parseItems(listItems, { runId, checkpointId, listId: ref.id })
    return () => parsed
  })
  return replaceRefs(params.body, lists, corrupt)
}

/** Replace every list ref of a parsed body by what `lists` (one per ref) gives; a ref to a list the record does not have is corrupt. */
export function replaceRefs(body: unknown, lists: readonly (() => unknown)[], corrupt: (problem: string) => Error): unknown {
  return visitRefs(body, undefined, (i) => {
    if (lists[i] === undefined) throw corrupt(`its body refers to list #${i}, which it does not have`)
    return lists[i]()
  })
}

/** The problem with a list whose items do not match the ref to it. */
export function unmatchedList(ref: ListRef, returned: number): string {
  return `list ${ref.id} should hold ${ref.n} items with hash ${ref.h.slice(0, 12)}…, but the store returned ${returned} items that do not match`
}

/**
 * The writer cache of a stored checkpoint, from its body and list refs alone: a fresh process
 * extends the lists of the latest checkpoint instead of starting new ones, once the first save
 * finds the refs' chain hashes at the head of its arrays.
 */
export function cacheFromRefs(body: unknown, refs: readonly ListRef[]): ListCache {
  const cache: ListCache = new Map()
  walkRefs(body, (i, path) => {
    const ref = refs[i]
    if (ref) cache.set(path, { id: ref.id, n: ref.n, h: ref.h, bytes: 0, sources: [], frozen: 0 })
  })
  return cache
}

/** Chain hash: h(k) = sha256(h(k-1) + "\n" + item(k)), starting from `from`. */
export function chainHash(from: string, items: readonly string[]): string {
  let h = from
  for (let k = 0; k < items.length; k++) h = sha256(`${h}\n${items[k]!}`)
  return h
}

/** An array about to become a list: the JSON of its items from `start` on (the leading `start` items being the whole previous list's, the same frozen values, or 0). */
interface SplitArray extends Omit<CachedList, 'id' | 'h'> {
  items: string[]
  start: number
}

/**
 * The list an array is stored as: the cached one extended when the array starts with its items
 * (the same frozen values, or items whose chain hash is the list's), else a new one.
 */
function extendOrStart(cached: CachedList | undefined, split: SplitArray, newListId: () => string, appends: ListAppend[]): CachedList {
  const { items, start, n, bytes, sources, frozen } = split
  const extending = cached !== undefined && (start > 0 ? start === cached.n : n >= cached.n && chainHash('', items.slice(0, cached.n)) === cached.h)
  if (extending) {
    const added = items.slice(cached.n - start)
    if (added.length > 0) appends.push({ listId: cached.id, expectedLength: cached.n, items: added })
    return { id: cached.id, n, h: chainHash(cached.h, added), bytes, sources, frozen }
  }
  const id = newListId()
  appends.push({ listId: id, expectedLength: 0, items })
  return { id, n, h: chainHash('', items), bytes, sources, frozen }
}

/**
 * JSON of each item of `array`. When its leading items are the very same deeply frozen values the
 * whole previous list was made from, only the items after them are serialized (and later hashed):
 * a save of a long conversation costs what was appended.
 */
function splitArray(array: unknown[], where: PayloadPlace, ancestors: Set<object>, previous: CachedList | undefined): SplitArray {
  let reused = 0
  if (previous) {
    const known = previous.sources
    const limit = Math.min(previous.frozen, previous.n, array.length)
    while (reused < limit && array[reused] === known[reused]) reused++
  }
  // All of the previous list is kept: its items need no JSON, and its sources array is pushed onto when no other save did.
  const start = previous !== undefined && reused === previous.n && previous.bytes > 0 ? reused : 0
  const sources = start > 0 && previous!.sources.length === start ? previous!.sources : (previous?.sources.slice(0, start) ?? [])
  const items: string[] = []
  let bytes = start > 0 ? previous!.bytes : 0
  let frozenRun = true
  for (let i = start; i < array.length; i++) {
    const value = array[i]
    const item = i in array ? itemJson(value, () => `${codecPathOf(where)}[${i}]`, ancestors) : UNDEFINED_JSON
    items.push(item)
    bytes += item.length
    if (frozenRun && isDeepFrozen(value)) sources.push(value)
    else frozenRun = false
  }
  return { items, start, n: array.length, bytes, sources, frozen: sources.length }
}

const frozenJson = new WeakMap<object, string>()

/** What a split reads (the lists of the last save, by place) and adds to (this save's). */
interface Splitter {
  previous: ListCache | undefined
  newListId: () => string
  out: EncodedPayload
}

/**
 * Encode `value` like the codec, but turn every plain array (outside other lists) whose items'
 * JSON adds up to at least {@link LIST_MIN_BYTES} into a list ref.
 */
function splitValue(value: unknown, where: PayloadPlace, ancestors: Set<object>, split: Splitter): JsonValue {
  const isArray = Array.isArray(value) && Object.getPrototypeOf(value) === Array.prototype
  if ((!isArray && !isPlainObject(value)) || ancestors.has(value as object) || Object.getOwnPropertySymbols(value).length > 0) {
    return typeof value !== 'object' && isPassThrough(value) ? (value as JsonValue) : encodeNested(value, codecPathOf(where), ancestors)
  }
  // Far too short to hold a list (the check counts less than the JSON's length: keys and quotes
  // are left out): plain JSON is its own encoding, kept as it is.
  if (isShortPassThrough(value, { maxChars: LIST_MIN_BYTES / 4, depth: ancestors.size })) return value as JsonValue
  const object = value as Record<string, unknown>
  ancestors.add(object)
  try {
    if (isArray) {
      const listPath = listPathOf(where)
      const previous = split.previous?.get(listPath)
      const array = splitArray(value as unknown[], where, ancestors, previous)
      if (array.bytes < LIST_MIN_BYTES) return JSON.parse(`[${array.items.join(',')}]`) as JsonValue[]
      const { out } = split
      const list = extendOrStart(previous, array, split.newListId, out.appends)
      out.lists.set(listPath, list)
      out.refs.push({ id: list.id, n: list.n, h: list.h })
      return { [TAG]: 'list', i: out.refs.length - 1 }
    }
    const out: JsonObject = {}
    let escaped = false
    for (const key of Object.keys(object)) {
      const child = object[key]
      if (child === undefined) continue
      if (key === TAG) escaped = true
      const encoded = splitValue(child, { parent: where, key }, ancestors, split)
      if (key === '__proto__') Object.defineProperty(out, key, { value: encoded, writable: true, enumerable: true, configurable: true })
      else out[key] = encoded
    }
    return escaped ? { [TAG]: 'obj', v: out } : out
  } finally {
    ancestors.delete(object)
  }
}

/**
 * Where a value sits in a payload being split: a chain of keys up to the root (`payload`),
 * spelled out only when needed, as the codec's path for an error message
 * (`payload.runtime.messages[3]`) or as the key path that names "the same list" across saves
 * (`/runtime/messages`).
 */
interface PayloadPlace {
  parent: PayloadPlace | undefined
  key: string
}

function codecPathOf(place: PayloadPlace): string {
  if (place.parent === undefined) return place.key
  const key = place.key
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${codecPathOf(place.parent)}.${key}` : `${codecPathOf(place.parent)}[${JSON.stringify(key)}]`
}

function listPathOf(place: PayloadPlace): string {
  return place.parent === undefined ? '' : `${listPathOf(place.parent)}/${place.key}`
}

const UNDEFINED_JSON = JSON.stringify({ [TAG]: 'undef' })

function itemJson(item: unknown, codecPath: () => string, ancestors: Set<object>): string {
  if (!isDeepFrozen(item)) return serializeNested(item, codecPath, ancestors)
  const known = frozenJson.get(item as object)
  if (known !== undefined) return known
  const json = serializeNested(item, codecPath, ancestors)
  frozenJson.set(item as object, json)
  return json
}

/** Call `onRef` with the index and key path (`/runtime/messages`) of every list ref of a parsed body. */
export function walkRefs(body: unknown, onRef: (i: number, path: string) => void): void {
  visitRefs(body, '', (i, path, ref) => {
    onRef(i, path)
    return ref
  })
}

/** Replace each list ref in a parsed body (outside lists, as `splitValue` puts them) with what `resolve` returns. */
function visitRefs(node: unknown, path: string | undefined, resolve: (i: number, path: string, ref: object) => unknown): unknown {
  if (node === null || typeof node !== 'object' || Array.isArray(node)) return node
  const obj = node as Record<string, unknown>
  if (obj[TAG] === 'list') return resolve(typeof obj.i === 'number' && Number.isInteger(obj.i) && obj.i >= 0 ? obj.i : -1, path ?? '', obj)
  const v = obj[TAG] === 'obj' ? obj.v : undefined
  const fields = typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : obj
  for (const key of Object.keys(fields)) {
    const child = fields[key]
    if (child === null || typeof child !== 'object') continue
    // Only a walk that reports paths builds them: replacing refs on a read builds none.
    const replaced = visitRefs(child, path === undefined ? undefined : `${path}/${key}`, resolve)
    if (replaced !== child) setOwn(fields, key, replaced)
  }
  return node
}

/** A list's items parsed (not decoded); an item that is not JSON is a {@link CheckpointCorruptionError}. */
export function parseItems(items: readonly string[], where: { runId: string; checkpointId: string; listId: string }): unknown[] {
  // Each item is decoded (which stops at maxDepth) before anything else walks it: only lengths are checked here.
  const { maxPayloadChars } = limits()
  for (let k = 0; k < items.length; k++) {
    const item = items[k]!
    if (item.length > maxPayloadChars) assertJsonText(item, { ...where, what: `item ${k} of list ${where.listId}` }, false)
  }
  // Item by item: parsing the items joined into one array text costs several times as much.
  const parsed = new Array<unknown>(items.length)
  let k = 0
  try {
    for (; k < items.length; k++) parsed[k] = JSON.parse(items[k]!)
    return parsed
  } catch (cause) {
    const { runId, checkpointId, listId } = where
    throw new CheckpointCorruptionError(`checkpoint ${checkpointId} of run ${runId}: item ${k} of list ${listId} is not valid JSON`, { runId, checkpointId, cause })
  }
}
