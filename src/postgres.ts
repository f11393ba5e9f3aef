/**
 * `cairn-agents/postgres`: the PostgreSQL backend, for many workers on many machines. Opening a store by
 * connection string needs the optional peer dependency `pg`; over an embedded PGlite database
 * (`PGliteClient`) it needs `@electric-sql/pglite` instead. The core `cairn` entry imports neither.
 *
 * @example
 * ```ts
 * import { PostgresStore } from 'cairn-agents/postgres'
 * const store = new PostgresStore({ connectionString: process.env.DATABASE_URL! })
 * ```
 */
export { PostgresStore, type PostgresConnection, type PostgresStoreOptions, type PostgresStoreSettings } from './store/backends/postgres/postgres-store.js'
export { PostgresEngine, type PostgresEngineOptions } from './store/backends/postgres/postgres-engine.js'
export type { PostgresPool, PostgresPoolClient, PostgresQueryable, PostgresQueryConfig, PostgresQueryResult } from './store/backends/postgres/driver.js'
export { PGliteClient, type PGliteDatabase } from './store/backends/postgres/pglite-client.js'
export { POSTGRES_MIGRATIONS, migratePostgres, type PostgresMigration } from './store/backends/postgres/migrations.js'
export { DEFAULT_SCHEMA, assertSchemaName } from './store/backends/postgres/sql.js'
