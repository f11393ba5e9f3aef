import { createHash } from 'node:crypto'
import { encodeNested, isPlainObject, TAG, type JsonObject, type JsonValue } from '../core/codec.js'
import { isDeepFrozen } from '../core/freeze.js'
import { CheckpointCorruptionError } from '../core/errors.js'
import type { ListAppend, ListRef } from './engine.js'

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

/** A list as the writer last saved it at one place of a payload. */
export interface CachedList {
  id: string
  items: string[]
  /** Chain hash of `items`. */
  h: string
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
  const out: EncodedPayload = { body: '', refs: [], appends: [], lists: new Map() }
  const root = splitValue(value, { codecPath: 'payload', listPath: '' }, new Set(), (items, listPath) => {
    const list = extendOrStart(previous?.get(listPath), items, newListId, out.appends)
    out.lists.set(listPath, list)
    out.refs.push({ id: list.id, n: list.items.length, h: list.h })
    return { [TAG]: 'list', i: out.refs.length - 1 }
  })
  out.body = JSON.stringify(root)
  return out
}

/**
 * Rebuild the payload tree from a body and the items of its lists. Verifies every list's item
 * count and chain hash; a mismatch is a {@link CheckpointCorruptionError}.
 */
export function decodePayload(params: {
  body: unknown
  refs: readonly ListRef[]
  items: readonly (readonly string[])[]
  runId: string
  checkpointId: string
}): unknown {
  const { refs, items, runId, checkpointId } = params
  const arrays = refs.map((ref, k) => {
    const listItems = items[k] ?? []
    if (listItems.length !== ref.n || chainHash('', listItems) !== ref.h) {
      throw new CheckpointCorruptionError(
        `checkpoint ${checkpointId} of run ${runId}: list ${ref.id} should hold ${ref.n} items with hash ${ref.h.slice(0, 12)}…, but the store returned ${listItems.length} items that do not match`,
        { runId, checkpointId },
      )
    }
    const parsed = parseItems(listItems, { runId, checkpointId, listId: ref.id })
    return parsed
  })
  return visitRefs(params.body, (i) => {
    const array = arrays[i]
    if (array === undefined) {
      throw new CheckpointCorruptionError(`checkpoint ${checkpointId} of run ${runId}: its body refers to list #${i}, which it does not have`, {
        runId,
        checkpointId,
      })
    }
    return array
  })
}

/**
 * Rebuild a writer cache from a stored body and its lists' items, so a fresh process extends
 * the lists of the latest checkpoint instead of starting new ones.
 */
export function cacheFromStored(body: unknown, refs: readonly ListRef[], items: readonly (readonly string[])[]): ListCache {
  const cache: ListCache = new Map()
  walkRefs(body, '', (i, path) => {
    const ref = refs[i]
    const listItems = items[i]
    if (ref && listItems) cache.set(path, { id: ref.id, items: [...listItems], h: ref.h })
  })
  return cache
}

/** Chain hash: h(k) = sha256(h(k-1) + "\n" + item(k)), starting from `from`. */
export function chainHash(from: string, items: readonly string[]): string {
  let h = from
  for (const item of items) h = createHash('sha256').update(h).update('\n').update(item).digest('hex')
  return h
}

function extendOrStart(cached: CachedList | undefined, items: string[], newListId: () => string, appends: ListAppend[]): CachedList {
  if (cached && startsWith(items, cached.items)) {
    const added = items.slice(cached.items.length)
    if (added.length > 0) appends.push({ listId: cached.id, expectedLength: cached.items.length, items: added })
    return { id: cached.id, items, h: chainHash(cached.h, added) }
  }
  const id = newListId()
  appends.push({ listId: id, expectedLength: 0, items })
  return { id, items, h: chainHash('', items) }
}

function startsWith(items: readonly string[], prefix: readonly string[]): boolean {
  if (prefix.length > items.length) return false
  for (let i = 0; i < prefix.length; i++) if (items[i] !== prefix[i]) return false
  return true
}

const frozenJson = new WeakMap<object, string>()

interface Where {
  /** Path for codec error messages (`payload.messages[3]`). */
  codecPath: string
  /** Key path that identifies "the same array" across saves (`/messages`). */
  listPath: string
}

/**
 * Encode `value` like the codec, but turn every plain array (outside other lists) whose items'
 * JSON adds up to at least {@link LIST_MIN_BYTES} into what `toRef` returns.
 */
function splitValue(value: unknown, where: Where, ancestors: Set<object>, toRef: (items: string[], listPath: string) => JsonObject): JsonValue {
  const isArray = Array.isArray(value) && Object.getPrototypeOf(value) === Array.prototype
  if ((!isArray && !isPlainObject(value)) || ancestors.has(value as object) || Object.getOwnPropertySymbols(value).length > 0) {
    return encodeNested(value, where.codecPath, ancestors)
  }
  const object = value as Record<string, unknown>
  ancestors.add(object)
  try {
    if (isArray) {
      const array = value as unknown[]
      const items: string[] = new Array<string>(array.length)
      let bytes = 0
      for (let i = 0; i < array.length; i++) {
        const item = i in array ? itemJson(array[i], `${where.codecPath}[${i}]`, ancestors) : UNDEFINED_JSON
        items[i] = item
        bytes += item.length
      }
      return bytes >= LIST_MIN_BYTES ? toRef(items, where.listPath) : (JSON.parse(`[${items.join(',')}]`) as JsonValue[])
    }
    const out: JsonObject = {}
    let escaped = false
    for (const key of Object.keys(object)) {
      const child = object[key]
      if (child === undefined) continue
      if (key === TAG) escaped = true
      const codecPath = /^[A-Za-z_$][\w$]*$/.test(key) ? `${where.codecPath}.${key}` : `${where.codecPath}[${JSON.stringify(key)}]`
      const encoded = splitValue(child, { codecPath, listPath: `${where.listPath}/${key}` }, ancestors, toRef)
      Object.defineProperty(out, key, { value: encoded, writable: true, enumerable: true, configurable: true })
    }
    return escaped ? { [TAG]: 'obj', v: out } : out
  } finally {
    ancestors.delete(object)
  }
}

const UNDEFINED_JSON = JSON.stringify({ [TAG]: 'undef' })

function itemJson(item: unknown, codecPath: string, ancestors: Set<object>): string {
  if (!isDeepFrozen(item)) return JSON.stringify(encodeNested(item, codecPath, ancestors))
  const known = frozenJson.get(item as object)
  if (known !== undefined) return known
  const json = JSON.stringify(encodeNested(item, codecPath, ancestors))
  frozenJson.set(item as object, json)
  return json
}

/** Replace each list ref in a parsed body with `resolve(i)`; the same walk as `splitValue`. */
function visitRefs(node: unknown, resolve: (i: number) => unknown): unknown {
  if (node === null || typeof node !== 'object' || Array.isArray(node)) return node
  const obj = node as Record<string, unknown>
  if (obj[TAG] === 'list') return resolve(refIndex(obj))
  const fields = obj[TAG] === 'obj' && isObject(obj.v) ? (obj.v as Record<string, unknown>) : obj
  for (const key of Object.keys(fields)) {
    const child = fields[key]
    if (child !== null && typeof child === 'object') {
      const replaced = visitRefs(child, resolve)
      if (replaced !== child) Object.defineProperty(fields, key, { value: replaced, writable: true, enumerable: true, configurable: true })
    }
  }
  return node
}

function walkRefs(node: unknown, path: string, onRef: (i: number, path: string) => void): void {
  if (node === null || typeof node !== 'object' || Array.isArray(node)) return
  const obj = node as Record<string, unknown>
  if (obj[TAG] === 'list') return onRef(refIndex(obj), path)
  const fields = obj[TAG] === 'obj' && isObject(obj.v) ? (obj.v as Record<string, unknown>) : obj
  for (const key of Object.keys(fields)) walkRefs(fields[key], `${path}/${key}`, onRef)
}

function refIndex(ref: Record<string, unknown>): number {
  const i = ref.i
  return typeof i === 'number' && Number.isInteger(i) && i >= 0 ? i : -1
}

function parseItems(items: readonly string[], where: { runId: string; checkpointId: string; listId: string }): unknown[] {
  try {
    const parsed = JSON.parse(`[${items.join(',')}]`) as unknown[]
    if (parsed.length === items.length) return parsed
  } catch (err) {
    throw new CheckpointCorruptionError(`checkpoint ${where.checkpointId} of run ${where.runId}: list ${where.listId} holds an item that is not valid JSON`, {
      runId: where.runId,
      checkpointId: where.checkpointId,
      cause: err,
    })
  }
  throw new CheckpointCorruptionError(`checkpoint ${where.checkpointId} of run ${where.runId}: list ${where.listId} holds malformed items`, {
    runId: where.runId,
    checkpointId: where.checkpointId,
  })
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
