import { deserialize, serialize } from '../../core/codec.js'
import { InvalidArgumentError } from '../../core/errors.js'
import type { PendingWriteRecord, PutPendingWritesInput } from '../checkpoint-store.js'
import type { PendingWriteRow } from '../engine/rows.js'
import { assertId } from './validate.js'

/**
 * The engine rows of pending writes, checked and encoded. Within one call, a key written twice
 * keeps its first value for a regular write and its last for a special one (negative index), as
 * if the writes had been stored one by one.
 */
export function writeRows(input: PutPendingWritesInput, now: number): PendingWriteRow[] {
  const { runId, checkpointId } = input
  assertId(runId, 'runId')
  assertId(checkpointId, 'checkpointId')
  const given: unknown = input.writes
  if (!Array.isArray(given)) throw new InvalidArgumentError('putPendingWrites needs an array of writes', { runId })
  const rows = new Map<string, PendingWriteRow>()
  for (const write of input.writes) {
    for (const key of ['taskId', 'channel'] as const) {
      if (typeof write[key] !== 'string' || write[key] === '' || write[key].includes('\u0000')) {
        throw new InvalidArgumentError(`a pending write needs a non-empty ${key} without NUL characters`, { runId, checkpointId })
      }
    }
    if (!Number.isSafeInteger(write.index)) throw new InvalidArgumentError(`a pending write's index must be an integer, got ${String(write.index)}`, { runId, checkpointId })
    const taskPath = write.taskPath ?? ''
    if (typeof taskPath !== 'string' || taskPath.includes('\u0000')) throw new InvalidArgumentError('a pending write task path must be a string without NUL characters', { runId, checkpointId })
    const key = JSON.stringify([write.taskId, write.index])
    if (write.index >= 0 && rows.has(key)) continue
    const value = serialize(write.value, `pending write ${write.channel}`)
    rows.set(key, { runId, checkpointId, taskId: write.taskId, idx: write.index, channel: write.channel, taskPath, value, createdAt: now })
  }
  return [...rows.values()]
}

/** A stored row decoded into the record callers see. */
export function decodeWriteRow(row: PendingWriteRow): PendingWriteRecord {
  const context = { runId: row.runId, checkpointId: row.checkpointId, what: `pending write ${row.taskId}/${row.idx} of checkpoint ${row.checkpointId}` }
  return {
    runId: row.runId,
    checkpointId: row.checkpointId,
    taskId: row.taskId,
    index: Number(row.idx),
    channel: row.channel,
    taskPath: row.taskPath,
    value: deserialize(row.value, context),
    createdAt: Number(row.createdAt),
  }
}

/** Group by checkpoint in the order of `checkpointIds`, then by task path, task id and index. */
export function orderWrites(records: PendingWriteRecord[], checkpointIds: readonly string[]): PendingWriteRecord[] {
  const position = new Map(checkpointIds.map((id, k) => [id, k]))
  return records.sort(
    (a, b) =>
      (position.get(a.checkpointId) ?? 0) - (position.get(b.checkpointId) ?? 0) ||
      compareCodePoints(a.taskPath, b.taskPath) ||
      compareCodePoints(a.taskId, b.taskId) ||
      a.index - b.index,
  )
}

/** Compare strings by Unicode code point (not by UTF-16 unit, which misorders astral characters). */
export function compareCodePoints(a: string, b: string): number {
  if (a === b) return 0
  const left = a[Symbol.iterator]()
  const right = b[Symbol.iterator]()
  for (;;) {
    const x = left.next()
    const y = right.next()
    if (x.done === true || y.done === true) return x.done === true ? (y.done === true ? 0 : -1) : 1
    const diff = x.value.codePointAt(0)! - y.value.codePointAt(0)!
    if (diff !== 0) return diff
  }
}
