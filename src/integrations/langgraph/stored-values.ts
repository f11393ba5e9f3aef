import type { SerializerProtocol } from '@langchain/langgraph-checkpoint'
import type { JsonValue } from '../../core/codec.js'
import { freezeDeep, freezeTree } from '../../core/freeze.js'

/**
 * A value as a `CairnSaver` stores it: the JSON text the saver's serde made of it (`s`), or its
 * bytes when the serde wrote something else. An array is stored item by item (`items`): the
 * store keeps a growing array as an append-only list, each item once. Keeping the serde's text
 * as it is spares a parse and a stringify of every message on each save and load.
 */
export type StoredValue = { t: string; s: string } | { t: string; j: JsonValue } | { t: string; b: Uint8Array } | { t: 'items'; items: StoredValue[] }

/**
 * The stored form of each array item object a saver has put, by the object itself. LangGraph
 * hands the same message objects to every put of a thread while they stay in the conversation,
 * so a put serializes only the items that are new or were replaced (a `RemoveMessage`, a reducer
 * that rewrites history: both make new arrays of new or fewer objects, and a new object is always
 * serialized). Weakly held: an item the graph dropped is forgotten with it.
 */
export type StoredItemMemo = WeakMap<object, StoredValue>

/**
 * The stored form of each array item object of a pending write, with the values of its own fields
 * when it was serialized. A node's new message reaches its checkpoint as the same object it wrote,
 * so the put that stores it takes the form the write made instead of serializing it again, but only
 * while those fields are unchanged: LangGraph's message reducer gives a message without an id one
 * in place (`id`, `lc_kwargs.id`) between the write and the checkpoint.
 */
export type WrittenItemMemo = WeakMap<object, { stored: StoredValue; fields: unknown[] }>

/**
 * The values revived from stored items during one read, by stored item: a listing of a whole
 * thread revives each message once and gives every state that holds it the same object.
 */
export type RevivedItemMemo = WeakMap<StoredValue, unknown>

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/**
 * An array channel as a saver stored it last: its stored form, and the items it was made from
 * (item `k` of `stored.items` is the stored form of `sources[k]`; `sources` may run longer).
 */
export interface StoredArray {
  stored: { t: 'items'; items: StoredValue[] }
  sources: readonly unknown[]
}

/**
 * Serialize a value through `serde`; an array item by item. An item that is the very value at the
 * same place of `previous.sources` (LangGraph's reducers build each step's array from the last
 * one's objects) takes the stored form it had there; an item object found in `memo` (an array
 * rebuilt or reordered, a value revived from the store) takes the form remembered for it; neither
 * is serialized again. Their stored forms are frozen objects the store recognises as items it
 * already holds. Any other item is serialized, and when it is not an object, compared with the
 * item at the same place of `previous`: an equal one keeps that item's stored form.
 */
export async function storeValue(serde: SerializerProtocol, value: unknown, options: StoreOptions = {}): Promise<StoredValue> {
  return Array.isArray(value) ? { t: 'items', items: (await storeItems(serde, value as unknown[], options)).items } : storeItem(serde, value)
}

/**
 * An array stored as {@link storeValue} stores it, with what the next put at the same place
 * reuses. When the array starts with every item `previous` was made from, those `sources` are
 * extended in place rather than copied, so a put costs what was appended, not the length of the
 * conversation. The sources are the saver's own array, never the graph's (a reducer may change
 * its array in place after the put); entries past the length of `previous.stored.items`, pushed
 * by a put that then failed or by one that branched off, are never read.
 */
export async function storeArray(serde: SerializerProtocol, array: readonly unknown[], options: StoreOptions = {}): Promise<StoredArray> {
  const { items, reused } = await storeItems(serde, array, options)
  const before = options.previous?.stored.items ?? []
  const sources = options.previous?.sources
  // The whole previous array heads this one (checked after the serde's awaits: another put may
  // have extended the same sources meanwhile): its sources are extended rather than copied.
  const extended = reused > 0 && reused === before.length && sources?.length === reused ? (sources as unknown[]) : undefined
  if (extended) for (let k = reused; k < array.length; k++) extended.push(array[k])
  return { stored: { t: 'items', items }, sources: extended ?? array.slice() }
}

/** The stored form of each item of `array` (see {@link storeValue}), and how many leading items were the previous put's by identity. */
async function storeItems(serde: SerializerProtocol, array: readonly unknown[], options: StoreOptions): Promise<{ items: StoredValue[]; reused: number }> {
  const { previous, memo, written, writing } = options
  const before = previous?.stored.items ?? []
  const sources = previous?.sources ?? []
  // The leading items the last put stored already, found by identity alone and taken in one copy:
  // a put costs what was appended.
  const common = Math.min(array.length, sources.length, before.length)
  let i = 0
  while (i < common && array[i] === sources[i]) i++
  const items: StoredValue[] = i === 0 ? [] : before.slice(0, i)
  for (let k = i; k < array.length; k++) {
    const item = array[k]
    const object = typeof item === 'object' && item !== null ? item : undefined
    const known = object && (memo?.get(object) ?? unchangedSince(object, written))
    if (known) {
      if (memo) memo.set(object, known)
      items.push(known)
      continue
    }
    // Its fields before it is serialized: a change made while the serde works is seen by the put.
    const fields = object && writing ? fieldsOf(object) : undefined
    const stored = await storeItem(serde, item)
    const same = before[k]
    // A stored form is a tree of strings (or bytes): frozen in one walk, as the store freezes what it decodes.
    const kept = same !== undefined && sameStored(same, stored) ? same : freezeTree(stored)
    if (object && memo) memo.set(object, kept)
    if (object && fields) writing!.set(object, { stored: kept, fields })
    items.push(kept)
  }
  return { items, reused: i }
}

/**
 * The value a {@link StoredValue} was made from, through `serde`. With `memos.revived`, an array
 * item already revived in the same read is that same object; with `memos.stored`, each revived
 * item object is remembered with its stored form, so putting it back costs no serialization.
 */
export async function loadValue(serde: SerializerProtocol, stored: StoredValue, memos: { revived?: RevivedItemMemo | undefined; stored?: StoredItemMemo | undefined } = {}): Promise<unknown> {
  if ('items' in stored) {
    // One item at a time: a thousand revivals in flight at once cost more in garbage than they save.
    const items: unknown[] = []
    for (const item of stored.items) {
      if (memos.revived?.has(item)) {
        items.push(memos.revived.get(item))
        continue
      }
      const revived = await loadValue(serde, item)
      memos.revived?.set(item, revived)
      // The graph puts this object back unchanged while it stays in the state: its stored form is known.
      if (memos.stored && typeof revived === 'object' && revived !== null) memos.stored.set(revived, freezeDeep(item))
      items.push(revived)
    }
    return items
  }
  if ('s' in stored) return serde.loadsTyped(stored.t, stored.s)
  if ('j' in stored) return serde.loadsTyped(stored.t, JSON.stringify(stored.j))
  return serde.loadsTyped(stored.t, stored.b)
}

/** How {@link storeValue} reuses stored forms, and remembers the ones it makes. */
interface StoreOptions {
  /** The array the last put stored at this place. */
  previous?: StoredArray | undefined
  /** Item objects already stored by a put; the new ones are added. */
  memo?: StoredItemMemo | undefined
  /** Item objects stored by a pending write, taken while unchanged. */
  written?: WrittenItemMemo | undefined
  /** Where a pending write remembers the item objects it stores. */
  writing?: WrittenItemMemo | undefined
}

/** The stored form a pending write made of `object`, when none of its own fields has changed since. */
function unchangedSince(object: object, written: WrittenItemMemo | undefined): StoredValue | undefined {
  const entry = written?.get(object)
  if (!entry) return undefined
  const fields = fieldsOf(object)
  return fields.length === entry.fields.length && fields.every((value, k) => value === entry.fields[k]) ? entry.stored : undefined
}

/** The keys and values of an object's own enumerable fields, in order. */
function fieldsOf(object: object): unknown[] {
  const fields: unknown[] = []
  for (const key of Object.keys(object)) fields.push(key, (object as Record<string, unknown>)[key])
  return fields
}

function sameStored(a: StoredValue, b: StoredValue): boolean {
  return a.t === b.t && 's' in a && 's' in b && a.s === b.s
}

async function storeItem(serde: SerializerProtocol, value: unknown): Promise<StoredValue> {
  const [type, bytes] = await serde.dumpsTyped(value)
  const given: unknown = bytes
  if (type === 'json') return { t: type, s: typeof given === 'string' ? given : decoder.decode(bytes) }
  return { t: type, b: typeof given === 'string' ? encoder.encode(given) : bytes }
}
