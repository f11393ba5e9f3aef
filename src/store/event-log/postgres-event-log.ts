import type { JsonObject } from '../../core/codec.js'
import { StoreError } from '../../core/errors.js'
import { inTransaction, type PostgresPool } from '../backends/postgres/driver.js'
import { PostgresListener } from '../backends/postgres/postgres-listener.js'
import { quoteIdent } from '../backends/postgres/sql.js'
import { assertId } from '../encoding/validate.js'
import { cursorsEndingAt, eventsOfRows, rowOf } from './event-rows.js'
import { EventWaiters, limitOf, seqOf, type ReadEventsOptions, type RunEventLog, type StoredRunEvent, type WaitForEventsOptions } from './run-event-log.js'

/** Checks between notifications: a backstop for one lost while the listening connection reconnected. */
const LISTENING_POLL_MS = 2000
/** Checks of a server whose connections cannot listen (an embedded PGlite). */
const POLLING_MS = 100
const APPEND_ATTEMPTS = 5

/** What a {@link PostgresEventLog} runs on. */
export interface PostgresEventLogOptions {
  pool: PostgresPool
  /** The store's schema (a plain lowercase identifier). */
  schema: string
  /** Resolves once the schema exists (the store's migrations ran). */
  ready: () => Promise<void>
  warn: (message: string) => void
}

/**
 * The `PostgresStore`'s {@link RunEventLog}: a table `run_events` in the store's schema, created
 * by `CREATE TABLE IF NOT EXISTS` on first use, with a row per append (see `event-rows.ts`). A
 * cursor is the event's sequence number in its run, assigned in the inserting statement from the
 * run's highest; two appenders racing on a run
 * collide on the primary key and the later one retries, so numbers become visible in order.
 * Each append notifies a channel (delivered at commit); waits listen on it over one pooled
 * connection, and poll instead where connections cannot listen.
 */
export class PostgresEventLog implements RunEventLog {
  readonly #pool: PostgresPool
  readonly #table: string
  readonly #channel: string
  readonly #ready: () => Promise<void>
  readonly #warn: (message: string) => void
  readonly #waiters = new EventWaiters(POLLING_MS)
  #created: Promise<void> | undefined
  #listener: Promise<PostgresListener | undefined> | undefined

  constructor(options: PostgresEventLogOptions) {
    this.#pool = options.pool
    this.#table = `${quoteIdent(options.schema)}.run_events`
    this.#channel = `cairn_run_events_${options.schema}`
    this.#ready = options.ready
    this.#warn = options.warn
  }

  async append(runId: string, events: readonly JsonObject[]): Promise<string[]> {
    assertId(runId, 'runId')
    if (events.length === 0) return []
    await this.#ensureTable()
    const sql = `WITH ins AS (
        INSERT INTO ${this.#table} (run_id, seq, body)
        SELECT $1, coalesce((SELECT max(seq) FROM ${this.#table} WHERE run_id = $1), 0) + $2, $3
        RETURNING seq)
      SELECT (SELECT seq FROM ins) AS last, pg_notify($4, $1)`
    const params = [runId, events.length, rowOf(events), this.#channel]
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await this.#pool.query(sql, params)
        this.#waiters.notify(runId)
        return cursorsEndingAt(Number(result.rows[0]?.last), events.length)
      } catch (err) {
        // Another appender took the same numbers first: read the new highest and go again.
        if ((err as { code?: unknown }).code === '23505' && attempt < APPEND_ATTEMPTS) continue
        throw wrap(runId, 'append events', err)
      }
    }
  }

  async read(runId: string, options: ReadEventsOptions = {}): Promise<StoredRunEvent[]> {
    assertId(runId, 'runId')
    const after = seqOf(options.after)
    const limit = limitOf(options.limit)
    await this.#ensureTable()
    try {
      const result = await this.#pool.query(`SELECT seq, body FROM ${this.#table} WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, [runId, after, limit])
      return eventsOfRows(
        result.rows.map((row) => [String(row.seq), String(row.body)] as const),
        after,
        limit,
      )
    } catch (err) {
      throw wrap(runId, 'read events', err)
    }
  }

  async waitForMore(runId: string, after: string | undefined, options: WaitForEventsOptions): Promise<boolean> {
    assertId(runId, 'runId')
    const seq = seqOf(after)
    await this.#ensureTable()
    await this.#listen()
    return this.#waiters.wait(
      runId,
      async () => {
        try {
          const result = await this.#pool.query(`SELECT max(seq) AS last FROM ${this.#table} WHERE run_id = $1`, [runId])
          return Number(result.rows[0]?.last ?? 0) > seq
        } catch (err) {
          throw wrap(runId, 'check for events', err)
        }
      },
      options,
    )
  }

  async deleteRun(runId: string): Promise<number> {
    assertId(runId, 'runId')
    await this.#ensureTable()
    try {
      // Numbers run from 1 without a gap: the newest is how many there were.
      const result = await this.#pool.query(`WITH gone AS (DELETE FROM ${this.#table} WHERE run_id = $1 RETURNING seq) SELECT coalesce(max(seq), 0) AS count FROM gone`, [runId])
      return Number(result.rows[0]?.count ?? 0)
    } catch (err) {
      throw wrap(runId, 'delete events', err)
    }
  }

  async replace(runId: string, events: readonly JsonObject[]): Promise<void> {
    assertId(runId, 'runId')
    await this.#ensureTable()
    try {
      await inTransaction(this.#pool, async (db) => {
        await db.query(`DELETE FROM ${this.#table} WHERE run_id = $1`, [runId])
        if (events.length > 0) await db.query(`INSERT INTO ${this.#table} (run_id, seq, body) VALUES ($1, $2, $3)`, [runId, events.length, rowOf(events)])
        await db.query('SELECT pg_notify($1, $2)', [this.#channel, runId])
      })
    } catch (err) {
      throw wrap(runId, 'rewrite events', err)
    }
    this.#waiters.notify(runId)
  }

  async close(): Promise<void> {
    this.#waiters.notify()
    const listener = await this.#listener?.catch(() => undefined)
    this.#listener = undefined
    await listener?.close()
  }

  /** The table exists (created once per process; a failure is tried again by the next call). */
  #ensureTable(): Promise<void> {
    this.#created ??= (async () => {
      await this.#ready()
      try {
        await this.#pool.query(`CREATE TABLE IF NOT EXISTS ${this.#table} (run_id text NOT NULL, seq bigint NOT NULL, body text NOT NULL, PRIMARY KEY (run_id, seq))`)
      } catch (err) {
        // Two processes creating it at once: the other one's is as good.
        const code = (err as { code?: unknown }).code
        if (code !== '23505' && code !== '42P07') throw err
      }
    })().catch((err: unknown) => {
      this.#created = undefined
      throw wrap(undefined, 'create the run_events table', err)
    })
    return this.#created
  }

  /** Listen on the channel once; where connections cannot, waits keep polling. */
  async #listen(): Promise<void> {
    this.#listener ??= (async () => {
      const listener = new PostgresListener({ pool: this.#pool, channel: this.#channel, onWake: () => this.#waiters.notify(), warn: this.#warn })
      if (!(await listener.start())) return undefined
      this.#waiters.maxPollMs = LISTENING_POLL_MS
      return listener
    })()
    await this.#listener
  }
}

function wrap(runId: string | undefined, what: string, err: unknown): StoreError {
  if (err instanceof StoreError) return err
  return new StoreError(`${runId === undefined ? '' : `run ${runId}: `}cannot ${what} in the Postgres event log: ${(err as Error).message}`, { runId, cause: err })
}
