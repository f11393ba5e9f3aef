import type { StorageEngine } from '../../store/engine/storage-engine.js'

/**
 * How the engine conformance suite opens the engine under test. One factory per backend.
 *
 * @example
 * ```ts
 * await runEngineConformance({ name: 'my-engine', open: (location) => new MyEngine({ directory: location }) })
 * ```
 */
export interface EngineFactory {
  name: string
  /**
   * Open (or reopen) the engine kept at `location`, a fresh empty temp directory per test.
   * Opening the same location again must give another handle on the same data, as a second
   * process would have; an engine whose data lives only in its process returns the same instance
   * for the same location and sets `persistent: false` (its `close()` is then called once per
   * handle the suite opened). Everything opened is closed after the test.
   */
  open: (location: string) => StorageEngine | Promise<StorageEngine>
  /** False for an engine whose data lives only in its process (the reopen cases are skipped). */
  persistent?: boolean
}
