import { describe } from 'vitest'
import { checkpointCases } from './cases-checkpoints.js'
import { corruptionCases } from './cases-corruption.js'
import { journalCases } from './cases-journal.js'
import { pendingWriteCases } from './cases-pending-writes.js'
import { processCases } from './cases-processes.js'
import { rollbackCases } from './cases-rollback.js'
import { stringCases } from './cases-strings.js'
import type { StoreFactory } from './store-factory.js'
import { useSuiteContext } from './suite-context.js'

/**
 * Register the store conformance suite with vitest for one backend: round trips (tagged values,
 * 5 MB payloads), ordering and the monotonic latest, listing and cursors, deletion, forks, the
 * effect journal's first-writer-wins, pending writes, retention, reopening, crash atomicity under
 * SIGKILL, two writer processes, corruption, refused strings and rollbacks. Every Cairn backend
 * runs it; run it against your own store.
 *
 * @example
 * ```ts
 * // my-store.conformance.test.ts
 * import { runStoreConformance } from 'cairn-agents/testing'
 * await runStoreConformance({ name: 'my-store', open: (dir) => new MyStore(dir), childModule: '/abs/open-my-store.js' })
 * ```
 */
export function registerStoreConformance(factory: StoreFactory): void {
  describe(`CheckpointStore conformance: ${factory.name}`, () => {
    const ctx = useSuiteContext(factory)
    checkpointCases(ctx)
    journalCases(ctx)
    pendingWriteCases(ctx)
    processCases(ctx)
    corruptionCases(ctx)
    stringCases(ctx)
    rollbackCases(ctx)
  })
}
