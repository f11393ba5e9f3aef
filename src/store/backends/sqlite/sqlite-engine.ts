import { SqlEngine } from '../../sql/sql-engine.js'
import { SqlLeases } from '../../leases/sql-leases.js'
import { configureConnection, SqliteSqlDriver, type SqliteConnectionOptions, type SqliteDatabase } from './driver.js'
import { migrateSqlite } from './migrations.js'

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
  /** The lease protocol, for workers in several processes on this machine (see {@link SqlLeases}). */
  readonly leases: SqlLeases

  constructor(options: SqliteEngineOptions) {
    const database = options.database
    configureConnection(database, options)
    migrateSqlite(database)
    super(new SqliteSqlDriver(database))
    this.#database = database
    this.leases = new SqlLeases(this.db)
  }

  /** Closing the last connection checkpoints the WAL into the database file. */
  override async close(): Promise<void> {
    this.#database.close()
  }
}
