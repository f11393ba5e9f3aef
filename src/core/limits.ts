import { InvalidArgumentError } from './errors.js'

/**
 * The sizes Cairn accepts in a value it saves or loads. Anything beyond them is refused with a
 * typed error naming the limit, rather than overflowing the stack, taking seconds to decode, or
 * being written whole into every later checkpoint. Change them with {@link configureLimits}.
 */
export interface CairnLimits {
  /**
   * Deepest nesting of objects, arrays, Maps and Sets in one value (default 256; at most
   * {@link MAX_DEPTH_CEILING}, which keeps every walk well inside the JavaScript stack).
   */
  maxDepth: number
  /** Longest string in a saved or loaded value, in UTF-16 code units (default 32 Mi). */
  maxStringLength: number
  /** Largest stored JSON document (a checkpoint body, a list item, an effect output, run metadata), in characters (default 128 Mi). */
  maxPayloadChars: number
  /** Most digits in a BigInt (default 10,000). */
  maxBigIntDigits: number
  /** Largest tool result, in characters of its JSON, before {@link CairnLimits.toolResultPolicy} applies (default 1 Mi). */
  maxToolResultChars: number
  /**
   * What happens to a tool result larger than `maxToolResultChars`: `'truncate'` (default) gives
   * the model and the journal its first `maxToolResultChars` characters as text with a note
   * saying how much was cut; `'refuse'` gives them an error result saying the result was too large.
   */
  toolResultPolicy: 'truncate' | 'refuse'
}

/** The highest `maxDepth` accepted. */
export const MAX_DEPTH_CEILING = 1000

/** The limits Cairn starts with. */
export const DEFAULT_LIMITS: Readonly<CairnLimits> = Object.freeze({
  maxDepth: 256,
  maxStringLength: 32 * 1024 * 1024,
  maxPayloadChars: 128 * 1024 * 1024,
  maxBigIntDigits: 10_000,
  maxToolResultChars: 1024 * 1024,
  toolResultPolicy: 'truncate',
})

let current: Readonly<CairnLimits> = DEFAULT_LIMITS

/**
 * Change the limits for this process; the fields not given keep their value. Returns the
 * limits now in force. A non-positive, non-integer or too high value is a `CairnError` with
 * code `invalid_argument`.
 *
 * @example
 * ```ts
 * configureLimits({ maxToolResultChars: 256 * 1024, toolResultPolicy: 'refuse' })
 * ```
 */
export function configureLimits(changes: Partial<CairnLimits>): Readonly<CairnLimits> {
  const next = { ...current, ...changes }
  for (const key of ['maxDepth', 'maxStringLength', 'maxPayloadChars', 'maxBigIntDigits', 'maxToolResultChars'] as const) {
    if (!Number.isSafeInteger(next[key]) || next[key] < 1) throw new InvalidArgumentError(`limit ${key} must be a positive integer, got ${String(next[key])}`)
  }
  if (next.maxDepth > MAX_DEPTH_CEILING) {
    throw new InvalidArgumentError(`limit maxDepth may be at most ${MAX_DEPTH_CEILING} (deeper values would overflow the stack), got ${next.maxDepth}`)
  }
  if (next.toolResultPolicy !== 'truncate' && next.toolResultPolicy !== 'refuse') {
    throw new InvalidArgumentError(`toolResultPolicy must be 'truncate' or 'refuse', got ${JSON.stringify(next.toolResultPolicy)}`)
  }
  current = Object.freeze(next)
  return current
}

/** The limits in force. */
export function limits(): Readonly<CairnLimits> {
  return current
}

/**
 * The deepest JSON nesting a stored document may have: a value at `maxDepth` plus the codec's
 * tag wrappers (a Map entry is three JSON levels) and the record's own envelope.
 */
export function maxJsonDepth(): number {
  return current.maxDepth * 3 + 64
}

/**
 * The nesting depth of JSON text, found without parsing it (strings are skipped), stopping as
 * soon as it passes `limit`. Returns the depth reached, or `limit + 1` when it is deeper.
 */
export function jsonTextDepth(text: string, limit: number): number {
  let depth = 0
  let deepest = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92) i++
      else if (c === 34) inString = false
    } else if (c === 34) {
      inString = true
    } else if (c === 123 || c === 91) {
      if (++depth > deepest) {
        deepest = depth
        if (deepest > limit) return limit + 1
      }
    } else if (c === 125 || c === 93) {
      depth--
    }
  }
  return deepest
}

/**
 * Where an in-memory value (objects and arrays) nests deeper than `limit`, found without
 * recursion: the path of the first place that does, or undefined when none does.
 */
export function valueDepthBeyond(value: unknown, limit: number): string | undefined {
  const stack: Frame[] = [{ node: value, depth: 0, parent: undefined, key: '' }]
  const seen = new Set<object>()
  while (stack.length > 0) {
    const frame = stack.pop()!
    const { node, depth } = frame
    if (typeof node !== 'object' || node === null || seen.has(node)) continue
    if (depth >= limit) return pathOf(frame)
    seen.add(node)
    if (ArrayBuffer.isView(node)) continue
    const keys = Array.isArray(node) ? null : Object.keys(node)
    const count = keys === null ? (node as unknown[]).length : keys.length
    for (let i = count - 1; i >= 0; i--) {
      const key = keys === null ? i : keys[i]!
      stack.push({ node: (node as Record<string | number, unknown>)[key], depth: depth + 1, parent: frame, key })
    }
  }
  return undefined
}

interface Frame {
  node: unknown
  depth: number
  parent: Frame | undefined
  key: string | number
}

function pathOf(frame: Frame): string {
  const parts: string[] = []
  for (let at: Frame | undefined = frame; at?.parent !== undefined; at = at.parent) {
    parts.push(typeof at.key === 'number' ? `[${at.key}]` : `.${at.key}`)
  }
  return parts.reverse().join('') || '(root)'
}
