import { EngineStore, type EngineStoreOptions } from '../../engine-store.js'
import { MemoryEngine } from './memory-engine.js'
import { MemoryEventLog } from '../../event-log/memory-event-log.js'
import { MemoryRunWaits } from '../../waits/memory-run-waits.js'

/**
 * A {@link CheckpointStore} in process memory, for tests and development. Everything is encoded
 * on save and decoded on load, so nothing is shared by reference and the same validation,
 * linear list encoding and migrations apply as in the durable backends.
 *
 * @example
 * ```ts
 * const store = new MemoryStore()
 * const id = await store.save({ runId: 'r1', kind: 'demo', phase: 'start', payload: { n: 1 } })
 * ```
 */
export class MemoryStore extends EngineStore {
  constructor(options: EngineStoreOptions = {}) {
    super(new MemoryEngine(), options)
    this.useEventLog(new MemoryEventLog())
    this.useRunWaits(new MemoryRunWaits())
  }
}
