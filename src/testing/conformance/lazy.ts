import type { StoreFactory } from './store-factory.js'

/**
 * Register the store conformance suite with vitest (see `registerStoreConformance`). Vitest is
 * loaded only when this is called, so the rest of `cairn/testing` (ScriptedModel, MemoryStore)
 * works outside a test runner. Await it at the top level of a test file.
 *
 * @example
 * ```ts
 * import { runStoreConformance } from 'cairn/testing'
 * await runStoreConformance({ name: 'my-store', open: (dir) => new MyStore(dir) })
 * ```
 */
export async function runStoreConformance(factory: StoreFactory): Promise<void> {
  const { registerStoreConformance } = await import('./run-store-conformance.js')
  registerStoreConformance(factory)
}
