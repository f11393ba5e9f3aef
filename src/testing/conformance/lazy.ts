import type { EngineFactory } from '../engine-conformance/engine-factory.js'
import type { StoreFactory } from './store-factory.js'

/**
 * Register the store conformance suite with vitest (see `registerStoreConformance`). Vitest is
 * loaded only when this is called, so the rest of `cairn-agents/testing` (ScriptedModel, MemoryStore)
 * works outside a test runner. Await it at the top level of a test file.
 *
 * @example
 * ```ts
 * import { runStoreConformance } from 'cairn-agents/testing'
 * await runStoreConformance({ name: 'my-store', open: (dir) => new MyStore(dir) })
 * ```
 */
export async function runStoreConformance(factory: StoreFactory): Promise<void> {
  const { registerStoreConformance } = await import('./run-store-conformance.js')
  registerStoreConformance(factory)
}

/**
 * Register the engine conformance suite with vitest for a `StorageEngine` written against
 * `cairn-agents/engine`: the engine's own contract on rows, the store conformance cases through an
 * `EngineStore` over it, and — detected from the engine's `leases` field — the lease and fencing
 * cases. Vitest is loaded only when this is called. Await it at the top level of a test file;
 * it resolves to the optional capabilities it found.
 *
 * @example
 * ```ts
 * import { runEngineConformance } from 'cairn-agents/testing'
 * await runEngineConformance({ name: 'my-engine', open: (location) => new MyEngine({ directory: location }) })
 * ```
 */
export async function runEngineConformance(factory: EngineFactory): Promise<{ leases: boolean; pendingWrites: boolean }> {
  const { registerEngineConformance } = await import('../engine-conformance/run-engine-conformance.js')
  return registerEngineConformance(factory)
}
