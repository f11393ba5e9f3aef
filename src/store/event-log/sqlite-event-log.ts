import { deflateRawSync } from 'node:zlib'
import type { JsonObject } from '../../core/codec.js'
import { StoreError } from '../../core/errors.js'
import { SynchronousLevel, type SqliteDatabase, type SqliteStatement } from '../backends/sqlite/driver.js'
import { assertId } from '../encoding/validate.js'
import { cursorsEndingAt, eventsOfRows, rowOf } from './event-rows.js'
import { EventWaiters, limitOf, seqOf, type ReadEventsOptions, type RunEventLog, type StoredRunEvent, type WaitForEventsOptions } from './run-event-log.js'

/** How often, at most, a wait checks the table for another process's appends. */
const MAX_POLL_MS = 80

const CREATE = `CREATE TABLE IF NOT EXISTS run_events (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  body BLOB NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID`

/**
 * The `SqliteStore`'s {@link RunEventLog}: a table `run_events` of the same database file,
 * created by the first append. A cursor is the event's sequence number in its run. An append is
 * one row (see `event-rows.ts`: the JSON array of its events, deflated, keyed by the number of the last),
 * written in one transaction that takes the write lock up front, so sequence numbers become
 * visible in order. A wait is woken at once by an append of this process, and otherwise reads
 * the run's newest sequence number (one index lookup) with backoff up to 80 ms.
 */
export class SqliteEventLog implements RunEventLog {
  readonly #db: SqliteDatabase
  readonly #waiters = new EventWaiters(MAX_POLL_MS)
  #statements: Statements | undefined
  #created = false

  constructor(db: SqliteDatabase) {
    this.#db = db
  }

  async append(runId: string, events: readonly JsonObject[]): Promise<string[]> {
    assertId(runId, 'runId')
    if (events.length === 0) return []
    const body = deflatedRowOf(events)
    const last = this.#call(runId, 'append events', () => {
      const s = this.#table()
      // The level is left as it is: an append goes with the durability of the run's commits
      // around it (relaxed after an `async` commit, synced after a `sync` one), and switching it
      // here would sync every append of an `async` run.
      const insert = this.#db.transaction(() => {
        const seq = Number(s.last.get(runId) ?? 0) + events.length
        s.insert.run(runId, seq, body)
        return seq
      })
      return insert.immediate()
    })
    this.#waiters.notify(runId)
    return cursorsEndingAt(last, events.length)
  }

  async read(runId: string, options: ReadEventsOptions = {}): Promise<StoredRunEvent[]> {
    assertId(runId, 'runId')
    const after = seqOf(options.after)
    const limit = limitOf(options.limit)
    const rows = this.#call(runId, 'read events', () => this.#prepared()?.read.all(runId, after, limit) ?? []) as [number, string | Uint8Array][]
    return eventsOfRows(rows, after, limit)
  }

  waitForMore(runId: string, after: string | undefined, options: WaitForEventsOptions): Promise<boolean> {
    assertId(runId, 'runId')
    const seq = seqOf(after)
    return this.#waiters.wait(runId, async () => Number(this.#call(runId, 'check for events', () => this.#prepared()?.last.get(runId) ?? 0)) > seq, options)
  }

  async deleteRun(runId: string): Promise<number> {
    assertId(runId, 'runId')
    return this.#call(runId, 'delete events', () => {
      const s = this.#prepared()
      if (!s) return 0
      SynchronousLevel.of(this.#db)?.use()
      // Numbers run from 1 without a gap: the newest is how many there were.
      const remove = this.#db.transaction(() => {
        const count = Number(s.last.get(runId) ?? 0)
        s.remove.run(runId)
        return count
      })
      return remove.immediate()
    })
  }

  async replace(runId: string, events: readonly JsonObject[]): Promise<void> {
    assertId(runId, 'runId')
    const body = events.length === 0 ? undefined : deflatedRowOf(events)
    this.#call(runId, 'rewrite events', () => {
      const s = this.#table()
      SynchronousLevel.of(this.#db)?.use()
      const rewrite = this.#db.transaction(() => {
        s.remove.run(runId)
        if (body !== undefined) s.insert.run(runId, events.length, body)
      })
      rewrite.immediate()
    })
    this.#waiters.notify(runId)
  }

  async close(): Promise<void> {
    this.#waiters.notify()
  }

  /** The statements, the table created first when nothing was appended yet. */
  #table(): Statements {
    if (!this.#created) {
      this.#db.exec(CREATE)
      this.#created = true
    }
    return this.#prepared()!
  }

  /** The statements, or undefined while the table does not exist (nothing was appended yet). */
  #prepared(): Statements | undefined {
    if (this.#statements) return this.#statements
    try {
      this.#statements = {
        insert: this.#db.prepare('INSERT INTO run_events (run_id, seq, body) VALUES (?, ?, ?)'),
        last: this.#db.prepare('SELECT max(seq) FROM run_events WHERE run_id = ?').pluck(),
        read: this.#db.prepare('SELECT seq, body FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?').raw(),
        remove: this.#db.prepare('DELETE FROM run_events WHERE run_id = ?'),
      }
      this.#created = true
      return this.#statements
    } catch (err) {
      if (/no such table/.test((err as Error).message)) return undefined
      throw err
    }
  }

  #call<T>(runId: string, what: string, fn: () => T): T {
    try {
      return fn()
    } catch (err) {
      throw new StoreError(`run ${runId}: cannot ${what} in the SQLite event log: ${(err as Error).message}`, { runId, cause: err })
    }
  }
}

/**
 * A row's body as stored: deflated at the fastest level. An append's events repeat their keys
 * and often their text (a tool's output after its call), and deflate costs less time than
 * writing the pages it saves.
 */
function deflatedRowOf(events: readonly JsonObject[]): Buffer {
  return deflateRawSync(rowOf(events), { level: 1 })
}

interface Statements {
  insert: SqliteStatement
  last: SqliteStatement
  read: SqliteStatement
  remove: SqliteStatement
}
