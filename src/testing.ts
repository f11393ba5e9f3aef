/**
 * Test helpers for Cairn users: the store and engine conformance suites (vitest) and in-memory fakes.
 */
export { MemoryStore } from './store/backends/memory/memory-store.js'
export { runEngineConformance, runStoreConformance } from './testing/conformance/lazy.js'
export type { EngineFactory } from './testing/engine-conformance/engine-factory.js'
export type { CorruptionKind, StoreFactory } from './testing/conformance/store-factory.js'
export { conversation } from './testing/conformance/fixtures.js'
export { ScriptedModel, type ScriptedModelOptions, type ScriptedResponse, type ScriptedSelection, type ScriptedTurn } from './testing/scripted-model.js'
