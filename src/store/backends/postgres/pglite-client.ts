import type { PostgresPool, PostgresPoolClient, PostgresQueryConfig, PostgresQueryResult } from './driver.js'
import { StoreError } from '../../../core/errors.js'

/**
 * The slice of a PGlite instance (`@electric-sql/pglite`) the adapter uses. Declared here so
 * Cairn does not depend on PGlite; a `PGlite` satisfies it.
 */
export interface PGliteDatabase {
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[]; rowCount?: number; affectedRows?: number }>
}

/**
 * A `pg`-`Pool`-compatible client over one embedded PGlite database (Postgres compiled to
 * WebAssembly, in process), so a {@link PostgresStore} runs on PGlite: in tests without a server,
 * in a CLI, in the browser.
 *
 * PGlite is a single connection. `connect()` therefore hands out that connection exclusively:
 * until the checked-out client is released, every other `query` and `connect` waits, so one
 * transaction never sees another's statements. Use the PGlite instance through this client
 * (or at least not while Cairn writes). The client does not close the database.
 *
 * @example
 * ```ts
 * import { PGlite } from '@electric-sql/pglite'
 * import { PGliteClient, PostgresStore } from 'cairn-agents/postgres'
 *
 * const db = await PGlite.create('./.cairn/pgdata')
 * const store = new PostgresStore({ pool: new PGliteClient(db) })
 * ```
 */
export class PGliteClient implements PostgresPool {
  readonly #db: PGliteDatabase
  /** Settles when the current holder of the connection lets go (a promise-chain mutex). */
  #tail: Promise<void> = Promise.resolve()

  constructor(db: PGliteDatabase) {
    this.#db = db
  }

  async query(statement: string | PostgresQueryConfig, values?: unknown[]): Promise<PostgresQueryResult> {
    const release = await this.#acquire()
    try {
      return await this.#run(statement, values)
    } finally {
      release()
    }
  }

  async connect(): Promise<PostgresPoolClient> {
    const unlock = await this.#acquire()
    let released = false
    return {
      query: async (statement: string | PostgresQueryConfig, values?: unknown[]) => {
        if (released) throw new StoreError('this PGlite client was released; connect() again', { code: 'store_closed' })
        return this.#run(statement, values)
      },
      release: (destroy) => {
        if (released) return
        released = true
        // `pg` closes a destroyed connection, which ends its transaction; here the one
        // connection lives on, so roll back whatever the holder left open.
        if (destroy) void this.#run('ROLLBACK').catch(() => {}).finally(unlock)
        else unlock()
      },
    }
  }

  /** A statement's name is not needed: PGlite keeps the plans of the statements it has run. */
  async #run(statement: string | PostgresQueryConfig, values?: unknown[]): Promise<PostgresQueryResult> {
    const result = typeof statement === 'string' ? await this.#db.query(statement, values) : await this.#db.query(statement.text, statement.values)
    return { rows: result.rows as Record<string, unknown>[], rowCount: result.rowCount ?? result.affectedRows ?? null }
  }

  /** Wait for the connection; resolves with the function that hands it on. */
  async #acquire(): Promise<() => void> {
    let unlock!: () => void
    const held = new Promise<void>((resolve) => (unlock = resolve))
    const previous = this.#tail
    this.#tail = previous.then(() => held)
    await previous
    return unlock
  }
}
