import { InvalidArgumentError } from '../core/errors.js'
import type { CheckpointStore } from '../store/checkpoint-store.js'
import type { FencedStore, FenceHooks } from '../store/leases/fenced-store.js'
import type { Fence } from '../store/engine/lease-engine.js'
import type { RunLeases } from '../store/leases/run-leases.js'

/**
 * A store the worker layer can use: a `CheckpointStore` with the queue and lease protocol and
 * fenced views. `PostgresStore` (many machines), `SqliteStore` (several processes on one machine),
 * `MemoryStore` and `FileStore` (one process) are.
 */
export interface WorkerStore extends CheckpointStore {
  /** Undefined when the backend has no leases. */
  readonly leases: RunLeases | undefined
  fenced(fence: Fence, hooks?: FenceHooks): FencedStore
}

/** The store's leases, or a clear error when it has none. */
export function requireLeases(store: WorkerStore | undefined): RunLeases {
  if (typeof store !== 'object' || store === null) throw new InvalidArgumentError('the worker layer needs a store: { store }')
  const leases = store.leases
  if (!leases || typeof store.fenced !== 'function') {
    throw new InvalidArgumentError('this store has no leases, so workers cannot share its runs: use PostgresStore (cairn/postgres) or SqliteStore (cairn/sqlite)')
  }
  return leases
}
