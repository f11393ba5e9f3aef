import { decodeValue, deserialize, holdsNoTag, parseJson, setOwn } from '../../core/codec.js'
import { CheckpointCorruptionError, CheckpointNotFoundError } from '../../core/errors.js'
import { freezeParsed, freezeTree } from '../../core/freeze.js'
import { limits } from '../../core/limits.js'
import { sha256 } from '../../core/hash.js'
import type { SchemaRegistry } from '../../core/schema.js'
import type { CheckpointRecord, CheckpointTail, ListTail } from '../checkpoint-store.js'
import { listRows, type StorageEngine } from '../engine/storage-engine.js'
import type { CheckpointRow, ListRef } from '../engine/rows.js'
import { parseItems, replaceRefs, unmatchedList, walkRefs } from './payload-lists.js'
import { checkRow, decodeCheckedHeader, readStoredCheckpoint, toRecord } from './checkpoint-rows.js'

/** One list of a run, read once for every checkpoint that refers to a prefix of it. */
interface SharedList {
  items: string[]
  /** `hashes[k]`: the chain hash of the first k items, computed as far as a ref needs. */
  hashes: string[]
  /** Each item decoded once and deeply frozen: the records share them. */
  decoded?: unknown[]
}

/** Where a ref's value goes back after the codec has decoded the body around it. */
const SPLICE = Symbol('cairn.splice')

/**
 * Decode many checkpoints in one pass: each list of a run is read once (as far as its longest
 * ref), its chain hash checked once per prefix, and each item parsed and decoded once, shared by
 * every record that holds it. Loading a run's whole history this way costs what the run stored,
 * where loading its records one by one costs the square of it. Every check of `load` applies: a
 * flaw in any record is a `CheckpointCorruptionError` naming it.
 *
 * The records' list items are the same deeply frozen objects: treat the payloads as read-only.
 */
export async function decodeMany(rows: readonly CheckpointRow[], engine: StorageEngine, schemas: SchemaRegistry): Promise<CheckpointRecord[]> {
  return (await decodeTails(rows, undefined, engine, schemas)).map((tail) => tail.record)
}

/**
 * {@link decodeMany}, where a list that `base` (a checked row of the same run) also refers to is
 * read from the item after the last one `base` holds, and checked from `base`'s chain hash on, so
 * the read costs the items added since `base`, not the list. Other lists are read whole; so are
 * those of a record of an older schema version, which migrates whole.
 */
export async function decodeTails(rows: readonly CheckpointRow[], base: CheckpointRow | undefined, engine: StorageEngine, schemas: SchemaRegistry): Promise<CheckpointTail[]> {
  const baseRefs = new Map((base ? checkRow(base) : []).map((ref) => [ref.id, ref]))
  const checked = rows.map((row) => ({ row, refs: checkRow(row) }))
  // A list is read from where `base` ends when every record here holds at least as much of it.
  const starts = new Map<string, ListRef>()
  for (const { row, refs } of checked) {
    for (const ref of refs) {
      const key = listKey(row.runId, ref.id)
      const known = row.runId === base?.runId ? baseRefs.get(ref.id) : undefined
      const start = known && known.n <= ref.n ? known : { id: ref.id, n: 0, h: '' }
      if (!starts.has(key) || starts.get(key)!.n > start.n) starts.set(key, start)
    }
  }
  const startOf = (row: CheckpointRow, ref: ListRef): ListRef => starts.get(listKey(row.runId, ref.id))!
  const lists = await readTails(checked, startOf, engine)
  return Promise.all(
    checked.map(async ({ row, refs }): Promise<CheckpointTail> => {
      const current = schemas.currentVersion(row.kind)
      const paths = base && refs.length > 0 ? listPaths(row) : []
      if (current !== undefined && current !== row.schemaVersion) {
        // A migration may change the payload in place: this record gets items of its own.
        const whole = refs.every((ref) => startOf(row, ref).n === 0)
        const items = whole ? refs.map((ref) => lists.get(listKey(row.runId, ref.id))!.items.slice(0, ref.n)) : undefined
        const record = toRecord(items ? { row, refs, items } : await readStoredCheckpoint(row, engine), schemas)
        return { record, lists: base ? refs.map((ref, i) => ({ path: paths[i] ?? [], skipped: 0, length: ref.n })) : [] }
      }
      // Most records of a run hold no list (runner phases between snapshots): their body is the
      // whole payload, decoded in one walk, which refuses a list ref there as a bad tag. Past the
      // check above, the row is at its kind's current version (or its kind has none): no upgrade applies.
      if (refs.length === 0) return { record: { ...decodeCheckedHeader(row), payload: deserialize(row.body, { runId: row.runId, checkpointId: row.id, what: 'payload' }) }, lists: [] }
      const context = { runId: row.runId, checkpointId: row.id }
      const corrupt = (problem: string) => new CheckpointCorruptionError(`checkpoint ${row.id} of run ${row.runId}: ${problem}`, context)
      const tails: ListTail[] = []
      const views = refs.map((ref, i) => {
        const start = startOf(row, ref)
        const list = verified(lists.get(listKey(row.runId, ref.id))!, start, ref, corrupt)
        if (base) tails.push({ path: paths[i] ?? [], skipped: start.n, length: ref.n })
        return () => ({ [SPLICE]: decodedItems(list, { ...context, listId: ref.id }).slice(0, ref.n - start.n) })
      })
      const spliced = replaceRefs(parseJson(row.body, { ...context, what: 'checkpoint body' }), views, corrupt)
      return { record: { ...decodeCheckedHeader(row), payload: splice(decodeValue(spliced, { ...context, what: 'payload' })) }, lists: tails }
    }),
  )
}

/** The rows of `checkpointIds`, in that order, in one engine call; an unknown id is a `CheckpointNotFoundError`. */
export async function readRows(engine: StorageEngine, checkpointIds: readonly string[]): Promise<CheckpointRow[]> {
  const found = new Map<string, CheckpointRow>()
  for (const row of await engine.getCheckpoints(checkpointIds)) found.set(row.id, row)
  return checkpointIds.map((checkpointId) => {
    const row = found.get(checkpointId)
    if (!row) throw new CheckpointNotFoundError(`checkpoint ${checkpointId} does not exist`, { checkpointId })
    return row
  })
}

/** Every checkpoint row of a run, oldest first, in one engine call. */
export async function readRunRows(engine: StorageEngine, runId: string): Promise<CheckpointRow[]> {
  return (await listRows(engine, { runId })).reverse()
}

/** Each list's tail, read once from where `startOf` puts it (the same start for every ref of a list) as far as its longest ref. */
async function readTails(checked: readonly { row: CheckpointRow; refs: ListRef[] }[], startOf: (row: CheckpointRow, ref: ListRef) => ListRef, engine: StorageEngine): Promise<Map<string, SharedList>> {
  const ranges = new Map<string, Map<string, { id: string; from: number; n: number; h: string }>>()
  for (const { row, refs } of checked) {
    for (const ref of refs) {
      const ofRun = ranges.get(row.runId) ?? new Map<string, { id: string; from: number; n: number; h: string }>()
      ranges.set(row.runId, ofRun)
      const start = startOf(row, ref)
      ofRun.set(ref.id, { id: ref.id, from: start.n, n: Math.max(ofRun.get(ref.id)?.n ?? 0, ref.n), h: start.h })
    }
  }
  const lists = new Map<string, SharedList>()
  for (const [runId, ofRun] of ranges) {
    const wanted = [...ofRun.values()]
    const items = await engine.readLists(runId, wanted)
    wanted.forEach((range, k) => lists.set(listKey(runId, range.id), { items: items[k] ?? [], hashes: [range.h] }))
  }
  return lists
}

/** The tail, after checking that its items carry the chain hash from `start`'s to `ref`'s. */
function verified(list: SharedList, start: ListRef, ref: ListRef, corrupt: (problem: string) => Error): SharedList {
  const count = ref.n - start.n
  if (list.items.length >= count) {
    for (let k = list.hashes.length; k <= count; k++) list.hashes[k] = sha256(`${list.hashes[k - 1]!}\n${list.items[k - 1]!}`)
    if (list.hashes[count] === ref.h) return list
  }
  throw corrupt(unmatchedList(ref, Math.min(list.items.length + start.n, ref.n)))
}

/** The key path of each list ref of a row's body, in ref order. */
function listPaths(row: CheckpointRow): string[][] {
  const paths: string[][] = []
  walkRefs(parseJson(row.body, { runId: row.runId, checkpointId: row.id, what: 'checkpoint body' }), (i, path) => {
    paths[i] = path.split('/').slice(1)
  })
  return paths
}

function decodedItems(list: SharedList, where: { runId: string; checkpointId: string; listId: string }): unknown[] {
  if (list.decoded) return list.decoded
  const items = parseItems(list.items, where)
  const { maxDepth } = limits()
  // One context for every item: its name is spelled out only for an error's message.
  let k = 0
  const context = { runId: where.runId, checkpointId: where.checkpointId, get what() { return `item ${k} of list ${where.listId}` } }
  for (; k < items.length; k++) {
    // An item without tags is frozen in the walk that checks its depth, not decoded first;
    // one too deep is decoded, which refuses it.
    if (holdsNoTag(list.items[k]!) && freezeParsed(items[k], maxDepth)) continue
    items[k] = freezeTree(decodeValue(items[k], context))
  }
  list.decoded = items
  return items
}

/** Put the spliced values back where their refs were (outside lists: in plain objects and arrays of the body). */
function splice(node: unknown): unknown {
  if (typeof node !== 'object' || node === null) return node
  if (Object.prototype.hasOwnProperty.call(node, SPLICE)) return (node as { [SPLICE]: unknown })[SPLICE]
  if (Array.isArray(node)) {
    for (let i = 0; i < node.length; i++) node[i] = splice(node[i])
    return node
  }
  if (Object.getPrototypeOf(node) !== Object.prototype && Object.getPrototypeOf(node) !== null) return node
  const obj = node as Record<string, unknown>
  for (const key of Object.keys(obj)) {
    const replaced = splice(obj[key])
    if (replaced !== obj[key]) setOwn(obj, key, replaced)
  }
  return obj
}

function listKey(runId: string, listId: string): string {
  return `${runId}\u0000${listId}`
}
