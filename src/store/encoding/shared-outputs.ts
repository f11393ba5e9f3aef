import { setOwn, TAG } from '../../core/codec.js'
import { CheckpointCorruptionError } from '../../core/errors.js'
import type { StorageEngine } from '../engine/storage-engine.js'
import type { EffectCompletionRow, EffectRow } from '../engine/rows.js'
import { checkedOutputJson } from './effect-rows.js'

/**
 * Tool results stored once. A tool's result is the effect journal's output of its call and,
 * a moment later, a part of the tool-result message the conversation appends. The list item that
 * holds it stores, in its place, a ref `{"~":"effect","c":<callId>}` to the effect's output, so
 * the text is stored in the effect row alone.
 *
 * A ref is written only to an outcome already stored or stored by the same commit, and effects
 * are never rewritten once they hold an outcome (`prune` keeps those a list still refers to). A
 * list's chain hash covers its items as stored (refs included); the effect's own output hash
 * covers the text a ref stands for, so an edit of either is a corruption error on read.
 */
export const SHARE_MIN_CHARS = 256
/** How many leading characters of an output an item is first matched on. */
const START_CHARS = 32

const MARKER_PREFIX = `{"${TAG}":"effect","c":`
/** Outcomes kept to share with the items that follow (a shared one is dropped): most entries, and most characters in all. */
const KEPT_OUTPUTS = 256
const KEPT_CHARS = 64 * 1024 * 1024
/**
 * Later writes of checkpoints of its run an outcome is kept for. The item that holds a tool's result follows its
 * outcome in the same write or the next ones; one never found by then is not searched for again.
 */
const KEPT_WRITES = 4

interface KeptOutput {
  runId: string
  callId: string
  output: string
  /** Writes of the run since this outcome was stored. */
  age: number
}

/** The writer side: recent outcomes of the runs written, and the items rewritten to refer to them. */
export class SharedOutputs {
  /** Oldest first; the key is run id and call id. */
  readonly #kept = new Map<string, KeptOutput>()
  /** Call ids an item of the write being encoded now refers to, by run (writes of one run take turns). */
  readonly #sharing = new Map<string, Set<string>>()
  #chars = 0

  /** A write of the run was stored: remember its outcomes, but those an item of the same write already refers to. */
  remember(runId: string, rows: readonly Pick<EffectCompletionRow, 'callId' | 'output'>[]): void {
    const shared = this.#sharing.get(runId)
    this.#sharing.delete(runId)
    for (const row of rows) {
      if (!isSharable(row.output) || shared?.has(row.callId) === true) continue
      this.#drop(keyOf(runId, row.callId))
      this.#kept.set(keyOf(runId, row.callId), { runId, callId: row.callId, output: row.output, age: 0 })
      this.#chars += row.output.length
    }
    // The newest stays even when it alone is over the budget: it is about to be shared.
    for (const key of this.#kept.keys()) {
      if (this.#kept.size <= 1 || (this.#kept.size <= KEPT_OUTPUTS && this.#chars <= KEPT_CHARS)) break
      this.#drop(key)
    }
  }

  forget(runId: string): void {
    this.#sharing.delete(runId)
    for (const [key, entry] of this.#kept) if (entry.runId === runId) this.#drop(key)
  }

  /**
   * The item as stored: each known output of the run found in it replaced by a ref to its
   * effect. `extra` are outcomes of the commit being made. Called once for each write of
   * checkpoints: the outcomes kept from earlier writes age by one.
   */
  sharer(runId: string, extra: readonly Pick<EffectCompletionRow, 'callId' | 'output'>[]): ((item: string) => string) | undefined {
    this.#sharing.delete(runId)
    for (const [key, entry] of this.#kept) if (entry.runId === runId && ++entry.age > KEPT_WRITES) this.#drop(key)
    // Candidates by their first characters: an item is searched only where an object starts
    // (`{"`), and only for the outputs that begin there, longest first.
    const byStart = new Map<string, { callId: string; output: string }[]>()
    const add = (callId: string, output: string) => {
      const start = output.slice(0, START_CHARS)
      const same = byStart.get(start)
      if (same === undefined) byStart.set(start, [{ callId, output }])
      else same.splice(same.findIndex((other) => other.output.length < output.length) >>> 0, 0, { callId, output })
    }
    for (const entry of this.#kept.values()) if (entry.runId === runId) add(entry.callId, entry.output)
    for (const row of extra) if (isSharable(row.output)) add(row.callId, row.output)
    if (byStart.size === 0) return undefined
    const shared = new Set<string>()
    this.#sharing.set(runId, shared)
    return (item) => {
      let stored = ''
      let copied = 0
      for (let at = item.indexOf('{"'); at >= 0 && item.length - at >= SHARE_MIN_CHARS; at = item.indexOf('{"', at + 1)) {
        const found = byStart.get(item.slice(at, at + START_CHARS))?.find(({ output }) => item.startsWith(output, at))
        if (found === undefined) continue
        stored += `${item.slice(copied, at)}${MARKER_PREFIX}${JSON.stringify(found.callId)}}`
        copied = at + found.output.length
        at = copied - 1
        shared.add(found.callId)
        this.#drop(keyOf(runId, found.callId))
      }
      return copied === 0 ? item : stored + item.slice(copied)
    }
  }

  #drop(key: string): void {
    const entry = this.#kept.get(key)
    if (entry === undefined) return
    this.#kept.delete(key)
    this.#chars -= entry.output.length
  }
}

function keyOf(runId: string, callId: string): string {
  return `${runId}\u0000${callId}`
}

/**
 * An output is shared only when its JSON text is an object that is not a tagged value: such a
 * text, found in an item's JSON, is always one whole value there (`{"` never occurs inside a
 * JSON string, and an untagged object cannot be the fields of an escaped `{"~":"obj"}` one).
 */
function isSharable(output: string | null): output is string {
  return output !== null && output.length >= SHARE_MIN_CHARS && output.startsWith('{"') && !output.startsWith(`{"${TAG}"`)
}

/** Whether any of `items` (as stored) may refer to an effect's output. */
export function mayShare(items: readonly string[]): boolean {
  return items.some((item) => item.includes(MARKER_PREFIX))
}

/** The call ids of the effects that items (as stored) may refer to. */
export function sharedRefs(items: readonly string[]): Set<string> {
  const callIds = new Set<string>()
  const pattern = /\{"~":"effect","c":("(?:[^"\\]|\\.)*")\}/g
  for (let k = 0; k < items.length; k++) {
    const item = items[k]!
    if (!item.includes(MARKER_PREFIX)) continue
    for (const match of item.matchAll(pattern)) callIds.add(JSON.parse(match[1]!) as string)
  }
  return callIds
}

/**
 * The checked outputs of the effects that stored items refer to, by call id, as
 * {@link readSharedOutputs} read them: each parsed once to check it, and that parse handed to
 * the first ref that takes it.
 */
export class CheckedOutputs {
  readonly #texts = new Map<string, string>()
  readonly #parsed = new Map<string, unknown>()

  /** An output whose row was checked: its text, and its JSON parsed from it (encoded, tags not decoded). */
  add(callId: string, text: string, parsed: unknown): void {
    this.#texts.set(callId, text)
    this.#parsed.set(callId, parsed)
  }

  has(callId: string): boolean {
    return this.#texts.has(callId)
  }

  /** The output's parsed JSON, the caller's own to change: a fresh parse after the first taker. */
  take(callId: string): unknown {
    if (this.#parsed.has(callId)) {
      const parsed = this.#parsed.get(callId)
      this.#parsed.delete(callId)
      return parsed
    }
    return JSON.parse(this.#texts.get(callId)!) as unknown
  }
}

/**
 * The checked outputs of the effects that stored items of `runId` refer to, by call id.
 * One read of the run's journal when several are needed; an effect the store does not hold is
 * left out (an item that truly refers to it is reported when it is resolved).
 */
export async function readSharedOutputs(engine: StorageEngine, runId: string, items: readonly string[]): Promise<CheckedOutputs> {
  const callIds = sharedRefs(items)
  const outputs = new CheckedOutputs()
  if (callIds.size === 0) return outputs
  const rows: (EffectRow | undefined)[] = callIds.size <= 4 ? await Promise.all([...callIds].map((callId) => engine.getEffect(runId, callId))) : await engine.listEffects(runId)
  for (let k = 0; k < rows.length; k++) {
    const row = rows[k]
    if (row === undefined || !callIds.has(row.callId) || row.output === null) continue
    // Every check of the effect's record (the output against its hash above all): an altered one is never handed on.
    outputs.add(row.callId, row.output, checkedOutputJson(row as EffectRow & { output: string }))
  }
  return outputs
}

/**
 * Items as written: each ref to an effect's output replaced by that output. `outputs` comes from
 * {@link readSharedOutputs}; a ref to an effect it lacks is a corruption error.
 */
export function resolveShared(items: readonly string[], outputs: CheckedOutputs, where: { runId: string; checkpointId: string; listId: string }): string[] {
  return items.map((item, k) => resolveSharedItem(item, k, outputs, where))
}

/** Item `k` of a list (`item`, as stored) as written: see {@link resolveShared}. */
export function resolveSharedItem(item: string, k: number, outputs: CheckedOutputs, where: { runId: string; checkpointId: string; listId: string }): string {
  if (!item.includes(MARKER_PREFIX)) return item
  let tree: unknown
  try {
    tree = JSON.parse(item)
  } catch (err) {
    throw new CheckpointCorruptionError(`checkpoint ${where.checkpointId} of run ${where.runId}: list ${where.listId} holds an item that is not valid JSON`, { ...where, cause: err })
  }
  return JSON.stringify(resolveParsed(tree, k, outputs, where))
}

/**
 * Parsed items as written: `parsed` are the stored items parsed (refs included); each one whose
 * stored text holds a ref gets its refs replaced, in place, by the parsed outputs they stand for.
 * The same result as parsing {@link resolveShared}'s texts, without writing and parsing them again.
 */
export function resolveSharedParsed(items: readonly string[], parsed: unknown[], outputs: CheckedOutputs, where: { runId: string; checkpointId: string; listId: string }): unknown[] {
  for (let k = 0; k < items.length; k++) if (items[k]!.includes(MARKER_PREFIX)) parsed[k] = resolveParsed(parsed[k], k, outputs, where)
  return parsed
}

/** One parsed item with every effect ref replaced by the output it stands for; a ref to an effect `outputs` lacks is a corruption error. */
function resolveParsed(tree: unknown, k: number, outputs: CheckedOutputs, where: { runId: string; checkpointId: string; listId: string }): unknown {
  return replaceMarkers(tree, (callId) => {
    if (!outputs.has(callId)) {
      throw new CheckpointCorruptionError(
        `checkpoint ${where.checkpointId} of run ${where.runId}: item ${k} of list ${where.listId} holds the result of effect ${callId}, whose outcome the store does not hold (the effect row was deleted or altered)`,
        { runId: where.runId, checkpointId: where.checkpointId },
      )
    }
    return outputs.take(callId)
  })
}

/** Replace every effect ref of a parsed item; the fields of an escaped `{"~":"obj"}` object are not a ref. */
function replaceMarkers(node: unknown, output: (callId: string) => unknown): unknown {
  if (node === null || typeof node !== 'object') return node
  if (Array.isArray(node)) {
    for (let i = 0; i < node.length; i++) node[i] = replaceMarkers(node[i], output)
    return node
  }
  const obj = node as Record<string, unknown>
  if (obj[TAG] === 'effect' && typeof obj.c === 'string' && Object.keys(obj).length === 2) return output(obj.c)
  const fields = obj[TAG] === 'obj' && typeof obj.v === 'object' && obj.v !== null && !Array.isArray(obj.v) ? (obj.v as Record<string, unknown>) : obj
  const keys = Object.keys(fields)
  for (let k = 0; k < keys.length; k++) {
    const key = keys[k]!
    const child = fields[key]
    if (child === null || typeof child !== 'object') continue
    const replaced = replaceMarkers(child, output)
    if (replaced !== child) setOwn(fields, key, replaced)
  }
  return obj
}
