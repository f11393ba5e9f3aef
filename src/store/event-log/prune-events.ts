import { FINISHED_STATUSES, type PruneOptions, type StoreReader } from '../checkpoint-store.js'
import type { RunEventLog } from './run-event-log.js'

/**
 * `store.prune` for event logs: a run's events go with its effect journal, when the run is
 * finished (and, with `olderThan`, last updated before it). A running or paused run keeps them.
 */
export async function pruneEvents(store: StoreReader, log: RunEventLog, options: PruneOptions): Promise<number> {
  const olderThan = options.olderThan === undefined ? undefined : Number(options.olderThan)
  const runs = options.runId !== undefined ? [await store.getRun(options.runId)] : await finishedRuns(store)
  let deleted = 0
  for (const run of runs) {
    if (!run || !FINISHED_STATUSES.includes(run.status)) continue
    if (olderThan !== undefined && !(run.updatedAt < olderThan)) continue
    deleted += await log.deleteRun(run.runId)
  }
  return deleted
}

async function finishedRuns(store: StoreReader) {
  const runs = []
  let before: string | undefined
  for (;;) {
    const page = await store.listRuns({ status: FINISHED_STATUSES, limit: 500, ...(before === undefined ? {} : { before }) })
    runs.push(...page)
    if (page.length < 500) return runs
    before = page[page.length - 1]?.runId
  }
}
