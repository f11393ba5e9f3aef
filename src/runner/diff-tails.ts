import type { CheckpointInfo, CheckpointRecord, CheckpointTail, StoreReader } from '../store/checkpoint-store.js'
import { expandPhases, storedIdOf } from './phase-log.js'
import { RUNNER_KIND, type RuntimeSnapshot } from './phases.js'

/** One side of a diff as read for comparing: its checkpoint, and the runtime standing for it. */
export interface DiffSideRead {
  record: CheckpointRecord<Record<string, unknown>>
  /** The checkpoint whose runtime snapshot stands for this one. */
  snapshotId: string
  runtime: RuntimeSnapshot
}

/**
 * Two runner checkpoints of one run read for a diff at the cost of what differs: each side's
 * runtime snapshot is found from the checkpoints' headers, and the two snapshots are read
 * together with `loadTails` after the older one, so the lists they share (the conversation, the
 * tool executions) come as the items after the older snapshot's end only — the shared prefix is
 * the older snapshot's lists, checked by their chain hash. `offsets` gives, by dotted path in
 * the runtime (`messages`, `tool_executions`), the index the sides' arrays start at.
 *
 * Undefined when a diff needs the records whole: a side is not a runner checkpoint with a runtime
 * snapshot found at or before it, the sides are of two runs, or a list of the older snapshot is
 * not a prefix of the newer one's.
 */
export async function readDiffTails(store: StoreReader, fromId: string, toId: string): Promise<{ from: DiffSideRead; to: DiffSideRead; offsets: Map<string, number> } | undefined> {
  const [from, to] = await Promise.all([hollowSide(store, fromId), hollowSide(store, toId)])
  if (!from || !to || from.record.runId !== to.record.runId) return undefined
  const [older, newer] = from.snapshot.seq <= to.snapshot.seq ? [from.snapshot, to.snapshot] : [to.snapshot, from.snapshot]
  const ids = older.id === newer.id ? [older.id] : [older.id, newer.id]
  const tails = await store.loadTails<Record<string, unknown>>(ids, { after: older.id })
  const [olderTail, newerTail] = [tails[0]!, tails.at(-1)!]
  const offsets = new Map<string, number>()
  for (const list of olderTail.lists) {
    const match = newerTail.lists.find((other) => samePath(other.path, list.path))
    // A list inside an array is not named by a dotted path: such a diff reads the records whole.
    if (list.path[0] !== 'runtime' || list.path.some((key) => /^\d+$/.test(key)) || !match || match.skipped !== list.length) return undefined
    offsets.set(list.path.slice(1).join('.'), list.length)
  }
  // A list the newer snapshot holds that the older one does not is read whole: it starts at 0.
  for (const list of newerTail.lists) if (list.skipped !== 0 && !offsets.has(list.path.slice(1).join('.'))) return undefined
  const runtimeOf = (tail: CheckpointTail<Record<string, unknown>>) => runtimeIn(tail.record)
  const olderRuntime = runtimeOf(olderTail)
  const newerRuntime = runtimeOf(newerTail)
  if (!olderRuntime || !newerRuntime) return undefined
  const runtimeAt = (snapshot: SnapshotHeader) => (snapshot.id === older.id ? olderRuntime : newerRuntime)
  return {
    from: { record: from.record, snapshotId: from.snapshot.id, runtime: runtimeAt(from.snapshot) },
    to: { record: to.record, snapshotId: to.snapshot.id, runtime: runtimeAt(to.snapshot) },
    offsets,
  }
}

/** Where a runtime snapshot is. */
interface SnapshotHeader {
  id: string
  seq: number
}

/** Header pages of 64 read at most, looking for a side's snapshot. */
const SEARCH_PAGES = 32

/**
 * A side read without any list item (its stored checkpoint read after itself), and where its
 * runtime snapshot is: itself, the stored checkpoint whose phase log holds it (when the phase
 * came after it), else the newest snapshot stored before it, by the headers.
 */
async function hollowSide(store: StoreReader, checkpointId: string): Promise<{ record: CheckpointRecord<Record<string, unknown>>; snapshot: SnapshotHeader } | undefined> {
  const storedId = storedIdOf(checkpointId)
  const [own] = await store.loadTails<Record<string, unknown>>([storedId], { after: storedId })
  const stored = own!.record
  if (stored.kind !== RUNNER_KIND || own!.lists.some((list) => list.path[0] !== 'runtime')) return undefined
  if (storedId === checkpointId) {
    if (runtimeIn(stored)) return { record: stored, snapshot: { id: stored.id, seq: stored.seq } }
  }
  const phases = expandPhases(stored)
  const at = phases.findIndex((phase) => phase.id === checkpointId)
  if (at < 0) return undefined
  const record = phases[at]!
  if (storedId !== checkpointId && runtimeIn(stored) && at > phases.findIndex((phase) => phase.id === storedId)) return { record, snapshot: { id: stored.id, seq: stored.seq } }
  const found = await snapshotBefore(store, stored)
  return found && { record, snapshot: found }
}

async function snapshotBefore(store: StoreReader, stored: CheckpointInfo): Promise<SnapshotHeader | undefined> {
  let before = stored.id
  for (let page = 0; page < SEARCH_PAGES; page++) {
    const listed = await store.listCheckpoints({ runId: stored.runId, limit: 64, before, verify: false })
    const found = listed.find((info) => info.kind === RUNNER_KIND && info.metadata.snapshot === true)
    if (found) return { id: found.id, seq: found.seq }
    if (listed.length < 64) return undefined
    before = listed.at(-1)!.id
  }
  return undefined
}

function runtimeIn(record: CheckpointRecord<Record<string, unknown>>): RuntimeSnapshot | undefined {
  const runtime = record.payload.runtime
  return typeof runtime === 'object' && runtime !== null && Array.isArray((runtime as { messages?: unknown }).messages) ? (runtime as RuntimeSnapshot) : undefined
}

function samePath(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((key, k) => key === b[k])
}
