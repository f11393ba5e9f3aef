/**
 * The id of the list every run keeps whole whatever its checkpoints refer to: the run's log of
 * state transitions, the evidence its rows are checked against (see `RunLog`).
 */
export const RUN_LOG_LIST = 'run-log'

/**
 * How many items of each list the remaining checkpoints of a run still need (and the whole run
 * log): what an engine keeps in `deleteCheckpoints`. `undefined` when a row's refs cannot be
 * read: keep every item.
 *
 * @example
 * ```ts
 * const keep = retainedListLengths(remainingRows)
 * if (keep) for (const [listId, items] of lists) items.length = Math.min(items.length, keep.get(listId) ?? 0)
 * ```
 */
export function retainedListLengths(rows: Iterable<{ lists: string }>): Map<string, number> | undefined {
  const lengths = new Map<string, number>([[RUN_LOG_LIST, Number.MAX_SAFE_INTEGER]])
  for (const row of rows) {
    let refs: unknown
    try {
      refs = JSON.parse(row.lists)
    } catch {
      return undefined
    }
    if (!Array.isArray(refs)) return undefined
    for (const ref of refs as { id?: unknown; n?: unknown }[]) {
      if (typeof ref?.id !== 'string' || typeof ref.n !== 'number') return undefined
      lengths.set(ref.id, Math.max(lengths.get(ref.id) ?? 0, ref.n))
    }
  }
  return lengths
}
