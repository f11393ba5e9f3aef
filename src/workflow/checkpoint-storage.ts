import type { CheckpointInfo, ListCheckpointsQuery, StoreAdmin, StoreReader, StoreWriter } from '../store/checkpoint-store.js'
import type { EngineStoreOptions } from '../store/engine-store.js'
import { FileStore } from '../store/backends/file/file-store.js'
import { MemoryStore } from '../store/backends/memory/memory-store.js'

/**
 * What the workflow engine reads and writes while it runs: any `RunStore` or `CheckpointStore`
 * (`MemoryStore`, `FileStore`, `SqliteStore`, a worker's fenced view, …), or your own object
 * with the four methods it needs. With `updateRun` the run's status follows the workflow
 * (`paused` while requests wait, `completed`, `failed`). With the lease protocol as well
 * (`leases`, `write` and `getRun`, as every Cairn store has), a run owns its run while it executes
 * and fences its writes with the lease's epoch; without it, the run takes no lease.
 */
export type WorkflowStore = Pick<StoreReader, 'load' | 'listCheckpoints' | 'getLatest'> & Pick<StoreWriter, 'save'> & Partial<Pick<StoreWriter, 'updateRun'>>

/**
 * A {@link WorkflowStore} that can also delete checkpoints: what `workflow.deleteCheckpoint` and
 * `pruneWorkflowCheckpoints` need. With `prune` it is used for retention.
 */
export type CheckpointStorage = WorkflowStore & Pick<StoreAdmin, 'delete'> & Partial<Pick<StoreAdmin, 'prune'>>

/**
 * In-memory checkpoint storage, for tests and development: a `MemoryStore` (everything is
 * encoded on save and decoded on load, so nothing is shared by reference). Lost when the
 * process ends.
 *
 * @example
 * ```ts
 * const storage = new InMemoryCheckpointStorage()
 * const workflow = new WorkflowBuilder({ name: 'squares', startExecutor: start, store: storage }).addEdge(start, worker).build()
 * ```
 */
export class InMemoryCheckpointStorage extends MemoryStore {}

/** Options of {@link FileCheckpointStorage}. */
export interface FileCheckpointStorageOptions extends EngineStoreOptions {
  /** The directory holding the checkpoints; created if missing. */
  storagePath: string
}

/**
 * Checkpoint storage in a directory: a `FileStore` (atomic writes, path traversal refused,
 * unreadable files skipped with a warning when listing). For one process at a time; use
 * `SqliteStore` from `cairn-agents/sqlite` when several processes share the storage.
 *
 * @example
 * ```ts
 * const storage = new FileCheckpointStorage({ storagePath: './checkpoints' })
 * const workflow = new WorkflowBuilder({ name: 'squares', startExecutor: start, store: storage }).addEdge(start, worker).build()
 * const latest = await workflow.getLatestCheckpoint() // a WorkflowCheckpoint, or undefined
 * ```
 */
export class FileCheckpointStorage extends FileStore {
  /** The directory holding the checkpoints. */
  readonly storagePath: string

  constructor(options: FileCheckpointStorageOptions | string) {
    const { storagePath, ...rest } = typeof options === 'string' ? { storagePath: options } : options
    if (typeof storagePath !== 'string' || storagePath === '') throw new TypeError('FileCheckpointStorage needs a storagePath')
    super({ ...rest, directory: storagePath })
    this.storagePath = storagePath
  }

  /** As `FileStore.listCheckpoints`, but an unreadable file is skipped with a warning unless the query says otherwise. */
  override listCheckpoints(query: ListCheckpointsQuery = {}): Promise<CheckpointInfo[]> {
    return super.listCheckpoints({ unreadable: 'skip', ...query })
  }
}
