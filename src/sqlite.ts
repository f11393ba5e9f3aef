/**
 * `cairn-agents/sqlite`: the SQLite backend, the embedded default. Needs the optional peer dependency
 * `better-sqlite3`; the core `cairn` entry never imports it.
 *
 * @example
 * ```ts
 * import { SqliteStore } from 'cairn-agents/sqlite'
 * const store = new SqliteStore({ path: '.cairn/cairn.db' })
 * ```
 */
import './sqlite-driver.js'
export { SqliteStore, type SqliteStoreOptions } from './store/backends/sqlite/sqlite-store.js'
export { SqliteEngine, type SqliteEngineOptions } from './store/backends/sqlite/sqlite-engine.js'
export type { SqliteConnectionOptions, SqliteDatabase, SqliteStatement, SqliteTransaction } from './store/backends/sqlite/driver.js'
export { SQLITE_MIGRATIONS, migrateSqlite, type SqliteMigration } from './store/backends/sqlite/migrations.js'
