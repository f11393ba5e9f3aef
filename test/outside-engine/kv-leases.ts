import { TableLeases, type LeaseEngine, type RunRow } from 'cairn-agents/engine'
import { key, type KvDatabase } from './kv-database.js'

/** The lease capability of the outside engine: the published lease protocol over the database's lease table. */
export function kvLeases(db: KvDatabase): LeaseEngine {
  const run = (runId: string) => db.get<RunRow>(key.run(runId))
  return new TableLeases({
    table: async () => db.leases,
    row: run,
    // Every write of the database is synchronous, so each change is atomic without a lock.
    change: (runId, fn) => fn(run(runId), async (row) => void (row && db.set(key.run(runId), row))),
  })
}
