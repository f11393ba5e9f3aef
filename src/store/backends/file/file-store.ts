import { EngineStore, type EngineStoreOptions } from '../../engine-store.js'
import { FileEngine } from './file-engine.js'
import { FileEventLog } from '../../event-log/file-event-log.js'

/** Options of {@link FileStore}. */
export interface FileStoreOptions extends EngineStoreOptions {
  /** The directory holding the store; created (with its parents) at the first write if missing. Reads never create it. */
  directory: string
}

/**
 * A {@link CheckpointStore} in a directory, for a single process and no dependencies: one
 * append-only log per run, to which each commit appends one checksummed frame (its checkpoints,
 * list items, effect changes and run row), so the conversation is stored once and storage grows
 * linearly; ids that could escape the directory are refused. Other processes may read the store
 * while one runs; several processes writing one directory at once is not supported: use
 * `SqliteStore` for that.
 *
 * @example
 * ```ts
 * const store = new FileStore({ directory: '.cairn' })
 * const id = await store.save({ runId: 'r1', kind: 'demo', phase: 'start', payload: { n: 1 } })
 * const latest = await store.getLatest({ runId: 'r1' })
 * await store.close()
 * ```
 */
export class FileStore extends EngineStore {
  constructor(options: FileStoreOptions) {
    const { directory, ...storeOptions } = options
    const engine = new FileEngine({ directory, ...(options.onWarning === undefined ? {} : { onWarning: options.onWarning }) })
    super(engine, storeOptions)
    this.useEventLog(new FileEventLog(directory))
  }
}
