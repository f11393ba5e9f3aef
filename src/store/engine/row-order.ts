import type { CheckpointHeaderRow, RunRow } from './rows.js'

/** Newest run first: by createdAt, then runId (the order the SQL engines use, for engines that sort in JavaScript). */
export function compareRunsNewestFirst(a: RunRow, b: RunRow): number {
  return b.createdAt - a.createdAt || (a.runId < b.runId ? 1 : a.runId > b.runId ? -1 : 0)
}

/**
 * Newest checkpoint first across runs: by createdAt, then seq, then id (a total order, the same
 * the SQL engines use). Listings of one run order by seq alone instead.
 */
export function compareCheckpointsNewestFirst(a: CheckpointHeaderRow, b: CheckpointHeaderRow): number {
  return b.createdAt - a.createdAt || b.seq - a.seq || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)
}

/** The rows after the one whose key is `before` (exclusive), up to `limit`. Unknown cursor: none. */
export function page<T>(sorted: readonly T[], key: (row: T) => string, before: string | undefined, limit: number | undefined): T[] {
  let start = 0
  if (before !== undefined) {
    const index = sorted.findIndex((row) => key(row) === before)
    if (index < 0) return []
    start = index + 1
  }
  return sorted.slice(start, limit === undefined ? undefined : start + limit)
}

/** Whether a run matches a status filter (one status or several). */
export function statusMatches(status: string, filter: string | readonly string[] | undefined): boolean {
  if (filter === undefined) return true
  return typeof filter === 'string' ? status === filter : filter.includes(status)
}
