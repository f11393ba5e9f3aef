/**
 * Where a value sits in a payload being split into lists (see `payload-lists.ts`): a chain of
 * keys up to the root, spelled out only when needed, as the codec's path for an error message
 * (`payload.runtime.messages[3]`) or as the key path that names "the same list" across saves
 * (`/runtime/messages`). Most values of a save need neither.
 */
export interface PayloadPlace {
  parent: PayloadPlace | undefined
  /** The object key of this place (the root's is `payload`). */
  key: string
}

/** The root of a payload. */
export const PAYLOAD_ROOT: PayloadPlace = { parent: undefined, key: 'payload' }

/** The place of property `key` of the object at `parent`. */
export function childPlace(parent: PayloadPlace, key: string): PayloadPlace {
  return { parent, key }
}

/** The codec's path of a place, as its error messages name it. */
export function codecPathOf(place: PayloadPlace): string {
  if (place.parent === undefined) return place.key
  const key = place.key
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${codecPathOf(place.parent)}.${key}` : `${codecPathOf(place.parent)}[${JSON.stringify(key)}]`
}

/** The key path of a place, which identifies its list across saves (`''` for the root). */
export function listPathOf(place: PayloadPlace): string {
  return place.parent === undefined ? '' : `${listPathOf(place.parent)}/${place.key}`
}
