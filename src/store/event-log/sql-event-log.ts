import { deflateRawSync, inflateRawSync } from 'node:zlib'
import type { JsonObject } from '../../core/codec.js'
import { StoreError } from '../../core/errors.js'
import type { LeaseSubscription } from '../engine/lease-engine.js'
import { assertId } from '../encoding/validate.js'
import { sql, type SqlDriver, type SqlResult, type SqlRunOptions } from '../sql/sql-driver.js'
import { EventWaiters, limitOf, seqOf, type ReadEventsOptions, type RunEventLog, type StoredRunEvent, type WaitForEventsOptions } from './run-event-log.js'

const APPEND_ATTEMPTS = 5

/** What a {@link SqlEventLog} runs on. */
export interface SqlEventLogOptions {
  db: SqlDriver
  /** The longest pause between two checks of a wait for another process's appends. */
  pollMs: number
  /**
   * Where the database can tell other processes of an append (Postgres `NOTIFY`): the channel
   * every append notifies (delivered at commit), and how to listen on it (undefined when the
   * connections cannot). While listening, waits check only every `listeningPollMs`, a backstop
   * for a notification lost while the listening connection reconnected.
   */
  notify?: { channel: string; listeningPollMs: number; listen(onWake: () => void): Promise<LeaseSubscription | undefined> }
}

/**
 * The {@link RunEventLog} of the SQL stores: a table `run_events` beside the store's own (in its
 * schema on Postgres; the store's migrations create it), with one row per append, keyed by the run
 * and the sequence number of its last event, whose body is the JSON array of the appended events
 * (a row keyed 12 holding three events holds events 10, 11 and 12; a body that is a single object
 * holds one event). On SQLite a row's body is deflated (a `BLOB`); Postgres compresses large rows
 * itself (TOAST). A cursor is the event's sequence number, assigned in the inserting statement
 * from the run's highest: on SQLite under the write lock, on Postgres two appenders racing on a
 * run collide on the primary key and the later one retries, so numbers become visible in order. A
 * wait is woken at once by an append of this process, by a notification where the database sends
 * them, and otherwise reads the run's newest sequence number with backoff up to `pollMs`.
 */
export class SqlEventLog implements RunEventLog {
  readonly #db: SqlDriver
  readonly #table: string
  readonly #deflate: boolean
  readonly #notify: SqlEventLogOptions['notify']
  readonly #waiters: EventWaiters
  #listener: Promise<LeaseSubscription | undefined> | undefined

  constructor(options: SqlEventLogOptions) {
    this.#db = options.db
    this.#table = options.db.dialect.table('run_events')
    this.#deflate = options.db.dialect.name === 'sqlite'
    this.#notify = options.notify
    this.#waiters = new EventWaiters(options.pollMs)
  }

  async append(runId: string, events: readonly JsonObject[], texts?: readonly string[]): Promise<string[]> {
    assertId(runId, 'runId')
    if (events.length === 0) return []
    const t = this.#table
    const insert = `INSERT INTO ${t} (run_id, seq, body) SELECT $1, coalesce((SELECT max(seq) FROM ${t} WHERE run_id = $1), 0) + $2, $3 RETURNING seq`
    const values = [runId, events.length, this.#bodyOf(texts ? `[${texts.join(',')}]` : JSON.stringify(events))]
    const text = this.#notify ? `WITH ins AS (${insert}) SELECT (SELECT seq FROM ins) AS seq, pg_notify($4, $1)` : insert
    if (this.#notify) values.push(this.#notify.channel)
    for (let attempt = 1; ; attempt++) {
      try {
        // The durability is left as it is: an append goes with that of the run's commits around
        // it (relaxed after an `async` commit, synced after a `sync` one).
        const { rows } = await this.#query(runId, 'append events', text, values, { keepLevel: true })
        this.#waiters.notify(runId)
        const last = Number(rows[0]?.seq)
        return events.map((_, i) => String(last - events.length + 1 + i))
      } catch (err) {
        // Another appender took the same numbers first: read the new highest and go again.
        if (!(this.#db.dialect.isUniqueViolation((err as { cause?: unknown }).cause) && attempt < APPEND_ATTEMPTS)) throw err
      }
    }
  }

  async read(runId: string, options: ReadEventsOptions = {}): Promise<StoredRunEvent[]> {
    assertId(runId, 'runId')
    const after = seqOf(options.after)
    const limit = limitOf(options.limit)
    const { rows } = await this.#query(runId, 'read events', `SELECT seq, body FROM ${this.#table} WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, [runId, after, limit], {
      keepLevel: true,
    })
    return eventsOfRows(rows, after, limit)
  }

  async waitForMore(runId: string, after: string | undefined, options: WaitForEventsOptions): Promise<boolean> {
    assertId(runId, 'runId')
    const seq = seqOf(after)
    await this.#listen()
    return this.#waiters.wait(
      runId,
      async () => {
        const { rows } = await this.#query(runId, 'check for events', `SELECT max(seq) AS last FROM ${this.#table} WHERE run_id = $1`, [runId], { keepLevel: true })
        return Number(rows[0]?.last ?? 0) > seq
      },
      options,
    )
  }

  async deleteRun(runId: string): Promise<number> {
    assertId(runId, 'runId')
    const { rows } = await this.#query(runId, 'delete events', `DELETE FROM ${this.#table} WHERE run_id = $1 RETURNING seq`, [runId])
    // Numbers run from 1 without a gap: the newest is how many there were.
    return rows.reduce((count, row) => Math.max(count, Number(row.seq)), 0)
  }

  async replace(runId: string, events: readonly JsonObject[]): Promise<void> {
    assertId(runId, 'runId')
    const [t, notify] = [this.#table, this.#notify]
    const body = events.length === 0 ? undefined : this.#bodyOf(JSON.stringify(events))
    try {
      await this.#db.run(
        function* () {
          yield sql(`DELETE FROM ${t} WHERE run_id = $1`, runId)
          if (body !== undefined) yield sql(`INSERT INTO ${t} (run_id, seq, body) VALUES ($1, $2, $3)`, runId, events.length, body)
          if (notify) yield sql('SELECT pg_notify($1, $2)', notify.channel, runId)
        },
        { atomic: true },
      )
    } catch (err) {
      throw this.#error(runId, 'rewrite events', err)
    }
    this.#waiters.notify(runId)
  }

  async close(): Promise<void> {
    this.#waiters.notify()
    const listener = await this.#listener?.catch(() => undefined)
    this.#listener = undefined
    await listener?.close()
  }

  /**
   * A row's body as stored, from its JSON array of events. SQLite's is deflated at the fastest level: an append's events repeat
   * their keys and often their text (a tool's output after its call), and deflate costs less
   * time than writing the pages it saves.
   */
  #bodyOf(text: string): string | Buffer {
    return this.#deflate ? deflateRawSync(text, { level: 1 }) : text
  }

  async #query(runId: string, what: string, text: string, values: unknown[], options?: SqlRunOptions): Promise<SqlResult> {
    try {
      return await this.#db.query(text, values, options)
    } catch (err) {
      throw this.#error(runId, what, err)
    }
  }

  #error(runId: string | undefined, what: string, err: unknown): StoreError {
    if (err instanceof StoreError) return err
    return new StoreError(`${runId === undefined ? '' : `run ${runId}: `}cannot ${what} in the ${this.#db.dialect.label} event log: ${(err as Error).message}`, { runId, cause: err })
  }

  /** Listen for other processes' appends once, where the database can tell of them; where it cannot, waits keep polling. */
  async #listen(): Promise<void> {
    const notify = this.#notify
    if (!notify) return
    this.#listener ??= notify.listen(() => this.#waiters.notify()).then((listener) => {
      if (listener) this.#waiters.maxPollMs = notify.listeningPollMs
      return listener
    })
    await this.#listener
  }
}

/**
 * The events after sequence number `after`, at most `limit`, of rows read in order from the
 * first row keyed above `after` (a row read whole may start at or before it).
 */
function eventsOfRows(rows: SqlResult['rows'], after: number, limit: number): StoredRunEvent[] {
  const out: StoredRunEvent[] = []
  for (const { seq: key, body } of rows as { seq: number | string; body: string | Uint8Array }[]) {
    const last = Number(key)
    const parsed = JSON.parse(typeof body === 'string' ? body : inflateRawSync(body).toString('utf8')) as JsonObject | JsonObject[]
    const events = Array.isArray(parsed) ? parsed : [parsed]
    if (events.length === 0) throw new StoreError(`a row of the event log (event ${last}) holds no events`)
    let seq = last - events.length
    for (const event of events) {
      seq++
      if (seq <= after) continue
      out.push({ cursor: String(seq), event })
      if (out.length === limit) return out
    }
  }
  return out
}
