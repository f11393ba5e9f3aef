import type { SerializerProtocol } from '@langchain/langgraph-checkpoint'
import type { JsonValue } from '../../core/codec.js'
import { freezeDeep } from '../../core/freeze.js'

/**
 * A value as a `CairnSaver` stores it: the JSON text the saver's serde made of it (`s`), or its
 * bytes when the serde wrote something else. An array is stored item by item (`items`): the
 * store keeps a growing array as an append-only list, each item once. Keeping the serde's text
 * as it is spares a parse and a stringify of every message on each save and load.
 */
export type StoredValue = { t: string; s: string } | { t: string; j: JsonValue } | { t: string; b: Uint8Array } | { t: 'items'; items: StoredValue[] }

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/**
 * Serialize a value through `serde`; an array item by item. An item whose serialization equals
 * the item at the same place of `previous` (the array as stored last time) is that very frozen
 * object, so the store takes its stored JSON as it is instead of encoding it again.
 */
export async function storeValue(serde: SerializerProtocol, value: unknown, previous?: StoredValue): Promise<StoredValue> {
  if (Array.isArray(value)) {
    const before = previous !== undefined && 'items' in previous ? previous.items : []
    const items: StoredValue[] = []
    for (const item of value as unknown[]) {
      const stored = await storeItem(serde, item)
      const same = before[items.length]
      items.push(same !== undefined && sameStored(same, stored) ? same : freezeDeep(stored))
    }
    return { t: 'items', items }
  }
  return storeItem(serde, value)
}

/** The value a {@link StoredValue} was made from, through `serde`. */
export async function loadValue(serde: SerializerProtocol, stored: StoredValue): Promise<unknown> {
  if ('items' in stored) {
    // One item at a time: a thousand revivals in flight at once cost more in garbage than they save.
    const items: unknown[] = []
    for (const item of stored.items) items.push(await loadValue(serde, item))
    return items
  }
  if ('s' in stored) return serde.loadsTyped(stored.t, stored.s)
  if ('j' in stored) return serde.loadsTyped(stored.t, JSON.stringify(stored.j))
  return serde.loadsTyped(stored.t, stored.b)
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
