import { describe } from 'vitest'
import { EngineStore } from '../../store/engine-store.js'
import { checkpointCases } from '../conformance/cases-checkpoints.js'
import { journalCases } from '../conformance/cases-journal.js'
import { useSuiteContext } from '../conformance/suite-context.js'
import { engineRowCases } from './cases-engine-rows.js'
import { leaseCases } from './cases-leases.js'
import { probeCapabilities, useEngineContext, type EngineCapabilities } from './engine-context.js'
import { pendingWriteCases } from '../conformance/cases-pending-writes.js'
import type { EngineFactory } from './engine-factory.js'

/**
 * Register the engine conformance suite with vitest for one {@link EngineFactory}: the engine's
 * own contract on rows (commit checks, list items, retention, runs, effects, a second handle),
 * then the store conformance cases through an `EngineStore` over it, then — when an engine it
 * opens has the lease capability (`engine.leases`) — the lease and fencing cases. Returns which
 * optional capabilities it found.
 */
export async function registerEngineConformance(factory: EngineFactory): Promise<EngineCapabilities> {
  const capabilities = await probeCapabilities(factory)
  const persistent = factory.persistent ?? true
  describe(`StorageEngine conformance: ${factory.name}`, () => {
    describe('engine', () => {
      engineRowCases(useEngineContext(factory))
    })
    describe('through EngineStore', () => {
      const ctx = useSuiteContext({
        name: factory.name,
        persistent,
        pendingWrites: capabilities.pendingWrites,
        open: async (location) => new EngineStore(await factory.open(location), { onWarning: () => {} }),
      })
      checkpointCases(ctx)
      journalCases(ctx)
      pendingWriteCases(ctx)
    })
    describe.skipIf(!capabilities.leases)('lease capability', () => {
      leaseCases(useEngineContext(factory))
    })
  })
  return capabilities
}
