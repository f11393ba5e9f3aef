import { expandPhases, storedIdOf } from '../../engine.js'
import { CheckpointNotFoundError, type CheckpointInfo, type CheckpointRecord, type CheckpointTail, type ListTail, type StoreReader } from '../../index.js'

/** One checkpoint as the payload panel shows it: its record, each long list cut to its newest items. */
export interface CheckpointPayload {
  record: CheckpointRecord<Record<string, unknown>>
  /** The lists of the payload that are cut: where each is, the items shown (the newest) and its whole length. */
  cut: { path: string[]; shown: number; length: number }[]
  /** The newest items of each list asked for (a list read from a snapshot nearer than that may show fewer). */
  items: number
}

/** Newest items of each list a payload shows unless asked for more. */
export const PAYLOAD_ITEMS = 50
/** Most items of each list one answer shows. */
export const MAX_PAYLOAD_ITEMS = 100_000
const HEADER_PAGE = 200
/** Header pages read at most while looking for a checkpoint to read a payload's lists after. */
const SEARCH_PAGES = 20
const RUNNER_KIND = 'runner'

/**
 * Reads one checkpoint for the payload panel, at the cost of what it shows. A light phase (kept
 * in a stored checkpoint's phase log) is read from its stored checkpoint without any list item.
 * A stored checkpoint's lists (a long conversation, its tool executions) are read from an older
 * checkpoint of the run on (`loadTails`), far enough back to hold the newest `items` items of
 * each, and cut to them; asking for more reads further back.
 */
export async function readPayload(store: StoreReader, checkpointId: string, items = PAYLOAD_ITEMS): Promise<CheckpointPayload> {
  const storedId = storedIdOf(checkpointId)
  // Read after itself, the stored checkpoint comes without a list item: its header, body and phase log.
  const [own] = await store.loadTails<Record<string, unknown>>([storedId], { after: storedId })
  if (storedId !== checkpointId) return { record: phaseOf(own!.record, checkpointId), cut: [], items }
  const long = own!.lists.filter((list) => list.length > items)
  if (own!.lists.length === 0) return { record: own!.record, cut: [], items }
  const base = long.length === 0 ? undefined : await baseFor(store, own!.record, items)
  const tail = base === undefined ? undefined : (await store.loadTails<Record<string, unknown>>([storedId], { after: base }))[0]
  if (!tail) return whole(await store.load<Record<string, unknown>>(storedId), checkpointId, items)
  return cutLists(tail, items)
}

/** A record read whole, its lists cut to their newest `items` items for the answer. */
function whole(record: CheckpointRecord<Record<string, unknown>>, checkpointId: string, items: number): CheckpointPayload {
  if (record.id !== checkpointId) return { record: phaseOf(record, checkpointId), cut: [], items }
  return cutLists({ record, lists: arraysOf(record.payload, ['payload']) }, items)
}

/** The light phase `checkpointId` of a stored record's phase log. */
function phaseOf(record: CheckpointRecord<Record<string, unknown>>, checkpointId: string): CheckpointRecord<Record<string, unknown>> {
  const found = expandPhases(record).find((phase) => phase.id === checkpointId)
  if (!found) {
    throw new CheckpointNotFoundError(`checkpoint ${checkpointId} is not in the phase log of checkpoint ${record.id} of run ${record.runId}`, { runId: record.runId, checkpointId: record.id })
  }
  return found
}

/**
 * An older checkpoint of the record's run whose lists stop at least `items` items short of the
 * record's: for a runner checkpoint, a runtime snapshot at least `items` steps older (each step
 * adds a message or more); for another kind, one of its kind at least `items` checkpoints older.
 * Undefined when the search reaches the run's start or its bound (the record is then read whole).
 */
async function baseFor(store: StoreReader, record: CheckpointRecord<Record<string, unknown>>, items: number): Promise<string | undefined> {
  const runner = record.kind === RUNNER_KIND
  const step = typeof record.metadata.step === 'number' ? record.metadata.step : undefined
  if (runner && step === undefined) return undefined
  const fits = (info: CheckpointInfo) =>
    info.kind === record.kind && (runner ? info.metadata.snapshot === true && typeof info.metadata.step === 'number' && info.metadata.step <= step! - items : info.seq <= record.seq - items)
  let before = record.id
  for (let page = 0; page < SEARCH_PAGES; page++) {
    const listed = await store.listCheckpoints({ runId: record.runId, limit: HEADER_PAGE, before, verify: false })
    const found = listed.find(fits)
    if (found) return found.id
    if (listed.length < HEADER_PAGE) return undefined
    before = listed.at(-1)!.id
  }
  return undefined
}

/** The record with each list that holds more than `items` items cut to its newest `items`. */
function cutLists(tail: CheckpointTail<Record<string, unknown>>, items: number): CheckpointPayload {
  let record = tail.record
  const cut: CheckpointPayload['cut'] = []
  for (const list of tail.lists) {
    const held = valueAt(record, list.path)
    if (!Array.isArray(held) || (list.length <= items && list.skipped === 0)) continue
    const shown = held.slice(-items)
    if (shown.length === list.length) continue
    record = withValueAt(record, list.path, shown)
    cut.push({ path: list.path, shown: shown.length, length: list.length })
  }
  return { record, cut, items }
}

/** The arrays of a payload read whole, as lists (for a store without `loadTails`). */
function arraysOf(value: unknown, path: string[]): ListTail[] {
  if (Array.isArray(value)) return [{ path: path.slice(1), skipped: 0, length: value.length }]
  if (typeof value !== 'object' || value === null) return []
  return Object.entries(value).flatMap(([key, inner]) => arraysOf(inner, [...path, key]))
}

/** The value at `path` (keys from the record's payload root, the way `ListTail` names them). */
function valueAt(record: CheckpointRecord<Record<string, unknown>>, path: readonly string[]): unknown {
  let node: unknown = record.payload
  for (const key of path) node = typeof node === 'object' && node !== null && Object.hasOwn(node, key) ? (node as Record<string, unknown>)[key] : undefined
  return node
}

/** A copy of the record with `value` at `path`, the objects on the way copied (a read record's values may be frozen). */
function withValueAt(record: CheckpointRecord<Record<string, unknown>>, path: readonly string[], value: unknown): CheckpointRecord<Record<string, unknown>> {
  const put = (node: unknown, k: number): unknown => {
    if (k === path.length) return value
    const copy = { ...(node as Record<string, unknown>) }
    Object.defineProperty(copy, path[k]!, { value: put(copy[path[k]!], k + 1), enumerable: true, writable: true, configurable: true })
    return copy
  }
  return { ...record, payload: put(record.payload, 0) as Record<string, unknown> }
}
