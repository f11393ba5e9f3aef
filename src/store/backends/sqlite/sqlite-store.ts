import { existsSync, mkdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import type BetterSqlite3 from 'better-sqlite3'
import { CairnError, InvalidArgumentError, StoreError } from '../../../core/errors.js'
import { EngineStore, type EngineStoreOptions } from '../../engine-store.js'
import { SqliteSqlDriver, type SqliteConnectionOptions, type SqliteDatabase } from './driver.js'
import { SqliteEngine } from './sqlite-engine.js'
import { SqlEventLog } from '../../event-log/sql-event-log.js'
import { SqlRunWaits } from '../../waits/sql-run-waits.js'

// better-sqlite3 is a CommonJS module: `require` loads it without the ESM loader's scan of its
// source for export names, a few milliseconds of every process start that opens a store.
const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3

/** How often, at most, a wait for a run's events checks the table for another process's appends. */
const MAX_EVENT_POLL_MS = 80

/**
 * Where a {@link SqliteStore} keeps its data: a database file `path` (its directory is created
 * when missing), or an already-open better-sqlite3 `database`, which the store then owns and
 * closes on `close()`.
 */
export type SqliteStoreOptions = EngineStoreOptions &
  SqliteConnectionOptions &
  ({ path: string; database?: never } | { database: SqliteDatabase; path?: never })

/**
 * The embedded default {@link CheckpointStore}: one SQLite file (better-sqlite3, WAL mode).
 * Several processes on one machine may use the same file at once; every write takes SQLite's
 * write lock up front and waits up to `busyTimeoutMs` for it. Storage grows linearly: a growing
 * message list is stored once, as appended rows.
 *
 * @example
 * ```ts
 * import { SqliteStore } from 'cairn-agents/sqlite'
 *
 * const store = new SqliteStore({ path: '.cairn/cairn.db' })
 * await store.save({ runId: 'r1', kind: 'demo', phase: 'start', payload: { n: 1 } })
 * const latest = await store.getLatest({ runId: 'r1' })
 * await store.close()
 * ```
 */
export class SqliteStore extends EngineStore {
  constructor(options: SqliteStoreOptions) {
    const { engine, database } = openEngine(options)
    super(engine, options)
    const db = new SqliteSqlDriver(database)
    this.useEventLog(new SqlEventLog({ db, pollMs: MAX_EVENT_POLL_MS }))
    this.useRunWaits(new SqlRunWaits(db))
  }
}

function openEngine(options: SqliteStoreOptions): { engine: SqliteEngine; database: SqliteDatabase } {
  const { database: given } = options
  const path = options.path as string
  if (given === undefined && (typeof path !== 'string' || path === '')) {
    throw new InvalidArgumentError('SqliteStore needs a database file path ({ path }) or an open better-sqlite3 database ({ database })')
  }
  const connection = {
    ...(options.synchronous !== undefined && { synchronous: options.synchronous }),
    ...(options.busyTimeoutMs !== undefined && { busyTimeoutMs: options.busyTimeoutMs }),
  }
  try {
    if (given !== undefined) return { engine: new SqliteEngine({ database: given, ...connection }), database: given }
    if (path !== ':memory:' && !path.startsWith('file:')) mkdirSync(dirname(path), { recursive: true })
    const database: SqliteDatabase = new Database(path, nativeBinding())
    try {
      return { engine: new SqliteEngine({ database, ...connection }), database }
    } catch (err) {
      database.close()
      throw err
    }
  } catch (err) {
    // A failure to open is a StoreError naming the database (Cairn errors pass through).
    if (err instanceof CairnError) throw err
    throw new StoreError(`cannot open ${given ? 'the given SQLite database' : `the SQLite database at ${path}`}: ${(err as Error).message}`, { cause: err })
  }
}

/** Where better-sqlite3's addon is (found once); null: not where its build puts it. */
let addonPath: string | null | undefined

/**
 * better-sqlite3's native addon, where its build puts it, for the driver to load without a
 * search: otherwise the `bindings` package looks for it through a dozen paths on the first
 * open, a few milliseconds of a fresh process's resume. The places are tried in the order
 * `bindings` tries them first; when none holds it, the search is left to the driver.
 */
function nativeBinding(): { nativeBinding?: string } {
  if (addonPath === undefined) {
    try {
      const root = dirname(createRequire(import.meta.url).resolve('better-sqlite3/package.json'))
      addonPath = ['build', 'build/Debug', 'build/Release'].map((dir) => join(root, dir, 'better_sqlite3.node')).find((file) => existsSync(file)) ?? null
    } catch {
      addonPath = null
    }
  }
  return addonPath === null ? {} : { nativeBinding: addonPath }
}
