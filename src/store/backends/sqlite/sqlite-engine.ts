import { SqlEngine } from '../../sql/sql-engine.js'
import { single } from '../../sql/sql-driver.js'
import { updateRunSql } from '../../sql/engine-sql.js'
import { configureConnection, SqliteSqlDriver, SynchronousLevel, type SqliteConnectionOptions, type SqliteDatabase } from './driver.js'
import { migrateSqlite } from './migrations.js'
import { SqliteLeases } from './sqlite-leases.js'

/** What {@link SqliteEngine} takes: an open database and its connection settings. */
export interface SqliteEngineOptions extends SqliteConnectionOptions {
  database: SqliteDatabase
}

/**
 * A {@link StorageEngine} over one SQLite database (better-sqlite3). Opening sets WAL journal
 * mode, the `synchronous` level and the busy timeout, then applies pending migrations. Every
 * write runs in a `BEGIN IMMEDIATE` transaction, so several processes on one machine can share
 * one database file. The driver is synchronous; the methods return promises to fit the interface.
 *
 * @example
 * ```ts
 * import Database from 'better-sqlite3'
 * const store = new EngineStore(new SqliteEngine({ database: new Database('cairn.db') }))
 * ```
 */
export class SqliteEngine extends SqlEngine {
  readonly #database: SqliteDatabase
  declare protected readonly db: SqliteSqlDriver
  #leases: SqliteLeases | undefined

  constructor(options: SqliteEngineOptions) {
    const database = options.database
    configureConnection(database, options)
    migrateSqlite(database)
    super(new SqliteSqlDriver(database))
    this.#database = database
  }

  /** The lease protocol, for workers in several processes on this machine (see {@link SqliteLeases}). */
  get leases(): SqliteLeases {
    // A patch inside the lease protocol's transaction, at the level that transaction set.
    const patchRun = (runId: string, patch: Parameters<SqlEngine['updateRun']>[1]) => this.db.runSync(() => single(updateRunSql(this.db.dialect, runId, patch)), { keepLevel: true })
    this.#leases ??= new SqliteLeases(this.#database, patchRun, SynchronousLevel.of(this.#database)!)
    return this.#leases
  }

  /** Closing the last connection checkpoints the WAL into the database file. */
  override async close(): Promise<void> {
    this.#database.close()
  }
}
