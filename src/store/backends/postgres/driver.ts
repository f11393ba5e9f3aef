/**
 * The slice of the `pg` driver the Postgres backend uses, declared here so Cairn does not depend
 * on the driver's types, and the helpers every part of the backend needs around a connection.
 */

import { sha256 } from '../../../core/hash.js'
import { runWork, type SqlDialect, type SqlDriver, type SqlResult, type SqlWork, type SqlWorkOptions } from '../../sql/sql-driver.js'
import { postgresDialect } from './sql.js'

/** What a query returns: the slice of a `pg` `QueryResult` the engine reads. */
export interface PostgresQueryResult {
  rows: Record<string, unknown>[]
  rowCount: number | null
}

/**
 * A statement with a `name`: the connection parses and plans it once, the first time, and runs
 * that plan again whenever the same name comes back (`pg`'s prepared statements).
 */
export interface PostgresQueryConfig {
  name?: string
  text: string
  values?: unknown[]
}

/**
 * Anything that runs one parameterized statement (`$1`, `$2`, …), given as its text and values
 * or as a {@link PostgresQueryConfig}: a `pg` pool or a checked-out client.
 */
export interface PostgresQueryable {
  query(statement: string | PostgresQueryConfig, values?: unknown[]): Promise<PostgresQueryResult>
}

/** A connection checked out of a pool; `release(true)` (or an error) discards it instead of reusing it. */
export interface PostgresPoolClient extends PostgresQueryable {
  release(destroy?: boolean | Error): void
}

/**
 * The slice of a `pg` `Pool` the engine uses. Declared here so the engine does not depend on the
 * driver; a `pg.Pool` satisfies it, and so does {@link PGliteClient} over an embedded PGlite.
 */
export interface PostgresPool extends PostgresQueryable {
  connect(): Promise<PostgresPoolClient>
}

/**
 * Run `fn` in a transaction on one connection of `pool`; commit when `keep` says so, else roll
 * back. A connection whose transaction could not be ended cleanly is discarded, not reused.
 */
export async function inTransaction<T>(pool: PostgresPool, fn: (db: PostgresQueryable) => Promise<T>, keep: (result: T) => boolean = () => true, begin = 'BEGIN'): Promise<T> {
  const client = await pool.connect()
  // Listen for `error` until the client is back in the pool. The server ends every connection
  // when it shuts down (a restart), and a checked-out client then emits `error` between queries;
  // unheard, that event would crash the process. The query in flight, or the next one, fails
  // anyway and the transaction's caller sees that.
  const emitter = client as Partial<{ on(event: 'error', listener: () => void): unknown; removeListener(event: 'error', listener: () => void): unknown }>
  const guarded = typeof emitter.on === 'function' && typeof emitter.removeListener === 'function'
  const ignore = () => {}
  if (guarded) emitter.on!('error', ignore)
  let destroy = true
  try {
    await client.query(begin)
    let result: T
    try {
      result = await fn(client)
    } catch (err) {
      await client.query('ROLLBACK').then(
        () => (destroy = false),
        () => {},
      )
      throw err
    }
    await client.query(keep(result) ? 'COMMIT' : 'ROLLBACK')
    destroy = false
    return result
  } finally {
    client.release(destroy)
    // After `release`, when the pool listens again.
    if (guarded) emitter.removeListener!('error', ignore)
  }
}

/**
 * The {@link SqlDriver} of a pool: a statement on any connection, atomic work on one
 * connection in a transaction (a snapshot: a repeatable-read one).
 *
 * Each statement is a named prepared statement, named after a digest of its text: a connection
 * parses and plans it once and then only binds and runs it. A commit's statements are few and
 * always the same, so planning them again each time (a few hundred µs for the larger ones) was
 * most of the server's work for a small commit. `preparedStatements: false` sends each statement
 * unnamed, for a pooler that hands a session's statements to other server connections
 * (PgBouncer in transaction mode before 1.21).
 */
export class PostgresSqlDriver implements SqlDriver {
  readonly dialect: SqlDialect
  readonly #pool: PostgresPool
  readonly #ready: () => Promise<void>
  /** The name of each statement's text; undefined when statements are sent unnamed. */
  readonly #names: Map<string, string> | undefined

  /**
   * @param schema The store's schema (validated), which qualifies every table.
   * @param ready Resolves once the schema exists (the store's migrations ran); every call waits for it.
   */
  constructor(pool: PostgresPool, schema: string, ready: () => Promise<void>, preparedStatements: boolean | undefined) {
    this.dialect = postgresDialect(schema)
    this.#pool = pool
    this.#ready = ready
    this.#names = preparedStatements === false ? undefined : new Map()
  }

  async query(text: string, values: unknown[] = []): Promise<SqlResult> {
    await this.#ready()
    return resultOf(await this.#pool.query(this.#statement(text, values)))
  }

  async run<T>(work: () => SqlWork<T>, options: SqlWorkOptions<T> = {}): Promise<T> {
    await this.#ready()
    const go = (db: PostgresQueryable) => runWork(work(), async (query) => resultOf(await db.query(this.#statement(query.text, query.values))))
    if (!options.atomic && !options.snapshot) return go(this.#pool)
    return inTransaction(this.#pool, go, options.keep, options.atomic ? 'BEGIN' : 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
  }

  #statement(text: string, values: unknown[]): PostgresQueryConfig {
    if (!this.#names) return { text, values }
    let name = this.#names.get(text)
    if (name === undefined) {
      name = `cairn_${sha256(text).slice(0, 24)}`
      this.#names.set(text, name)
    }
    return { name, text, values }
  }
}

function resultOf(result: PostgresQueryResult): SqlResult {
  return { rows: result.rows, changes: result.rowCount ?? result.rows.length }
}
