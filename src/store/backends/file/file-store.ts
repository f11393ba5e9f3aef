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
 * directory per run, every file replaced atomically (temp file, fsync, rename), the
 * conversation stored once in append-only list files so storage grows linearly, and ids that
 * could escape the directory refused. Several processes writing one directory at once is not
 * supported; use `SqliteStore` for that.
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
