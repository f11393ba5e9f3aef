import Database from 'better-sqlite3'
import { join } from 'node:path'
import { FileStore, MemoryStore, type CheckpointStore } from '../src/index.js'
import { FileEngine, MemoryEngine } from '../src/engine.js'
import { type StorageEngine } from '../src/engine.js'
import { SqliteEngine, SqliteStore } from '../src/sqlite.js'
import { directoryBytes, sqliteBytes } from './disk-usage.js'

/** A store backend as the storage benchmark drives it. */
export interface BenchBackend {
  name: string
  /** False for a store whose data lives only in the process: cold reads reuse the writer. */
  persistent: boolean
  /** Open a store kept at `location`, a temp directory; opening it again reopens the same data. */
  open(location: string): CheckpointStore
  /** The engine under the store `open` returns, opened the same way (to time its commits alone). */
  openEngine(location: string): StorageEngine
  /** Bytes the store keeps under `location`; undefined for an in-memory store. */
  diskBytes(location: string): Promise<number | undefined>
}

/** Every backend the benchmark measures, in table order. */
export const BACKENDS: readonly BenchBackend[] = [
  {
    name: 'memory',
    persistent: false,
    open: () => new MemoryStore(),
    openEngine: () => new MemoryEngine(),
    diskBytes: async () => undefined,
  },
  {
    name: 'file',
    persistent: true,
    open: (location) => new FileStore({ directory: join(location, 'store') }),
    openEngine: (location) => new FileEngine({ directory: join(location, 'store') }),
    diskBytes: (location) => directoryBytes(join(location, 'store')),
  },
  {
    name: 'sqlite',
    persistent: true,
    open: (location) => new SqliteStore({ path: sqlitePath(location) }),
    openEngine: (location) => new SqliteEngine({ database: new Database(sqlitePath(location)) }),
    diskBytes: (location) => sqliteBytes(sqlitePath(location)),
  },
]

function sqlitePath(location: string): string {
  return join(location, 'cairn.db')
}
