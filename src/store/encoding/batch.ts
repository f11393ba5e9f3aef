import { InvalidArgumentError } from '../../core/errors.js'
import { newId, newShortId } from '../../core/ids.js'
import type { SchemaRegistry } from '../../core/schema.js'
import type { CheckpointInput } from '../checkpoint-store.js'
import type { CheckpointRow, ListAppend, RunRow } from '../engine/rows.js'
import { encodePayload, type ListCache } from './payload-lists.js'
import { storedDigest } from './checkpoint-rows.js'
import { encodeMetadata } from './run-rows.js'

/** What a writer remembers of a run between saves: its seq, newest checkpoint and list refs. */
export interface WriterState {
  lastSeq: number
  lastId: string | null
  lists: ListCache
  /** The run row as this store last read or wrote it: what a change of the run's fields is computed from (a compare-and-set on its digest). */
  run?: RunRow | undefined
}

/** The rows of a batch of checkpoints, ready to commit, and the writer state after it. */
export interface EncodedBatch {
  rows: CheckpointRow[]
  appends: ListAppend[]
  next: WriterState
}

/**
 * Encode checkpoints of one run for one commit. Each record's lists extend the previous
 * record's, and appends to the same list are merged, so the engine sees one append per list.
 * Seqs follow the run's latest (or are checked against it when given); a record's parent
 * defaults to the record before it.
 */
export function encodeBatch(inputs: readonly CheckpointInput<unknown>[], state: WriterState, schemas: SchemaRegistry): EncodedBatch {
  const rows: CheckpointRow[] = []
  const appends: ListAppend[] = []
  let { lastSeq, lastId, lists } = state
  const ids = new Set<string>()
  for (const input of inputs) {
    const seq = input.seq ?? lastSeq + 1
    if (rows.length > 0 && seq <= lastSeq) {
      throw new InvalidArgumentError(`checkpoints of one write must have increasing seqs; seq ${seq} follows ${lastSeq}`, { runId: input.runId })
    }
    if (input.id !== undefined) {
      if (ids.has(input.id)) throw new InvalidArgumentError(`checkpoint id ${input.id} appears twice in one write`, { runId: input.runId })
      ids.add(input.id)
    }
    // Refuses an unserializable payload before anything is written.
    const encoded = encodePayload(input.payload, lists, newShortId)
    const row: CheckpointRow = {
      id: input.id ?? newId(),
      runId: input.runId,
      parentId: input.parentId === undefined ? lastId : input.parentId,
      seq,
      kind: input.kind,
      phase: input.phase,
      schemaVersion: input.schemaVersion ?? schemas.currentVersion(input.kind) ?? 1,
      createdAt: input.createdAt ?? Date.now(),
      workflowName: input.workflowName ?? null,
      terminal: input.terminal ?? false,
      metadata: encodeMetadata(input.metadata),
      body: encoded.body,
      lists: JSON.stringify(encoded.refs),
      digest: '',
    }
    row.digest = storedDigest(row)
    rows.push(row)
    for (const append of encoded.appends) mergeAppend(appends, append)
    lastSeq = seq
    lastId = row.id
    // A record without some list (a light phase record) must not make the next record that has
    // it start over: keep the lists it did not touch.
    if (encoded.lists.size > 0) lists = new Map([...lists, ...encoded.lists])
  }
  return { rows, appends, next: { lastSeq, lastId, lists } }
}

function mergeAppend(appends: ListAppend[], append: ListAppend): void {
  const k = appends.findIndex((a) => a.listId === append.listId)
  const earlier = appends[k]
  const chained = earlier !== undefined && earlier.expectedLength + earlier.items.length === append.expectedLength
  if (chained) appends[k] = { ...earlier, items: [...earlier.items, ...append.items] }
  else appends.push(append)
}
