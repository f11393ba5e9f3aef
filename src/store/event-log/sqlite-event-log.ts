import type { JsonObject } from '../../core/codec.js'
import { StoreError } from '../../core/errors.js'
import { SynchronousLevel, type SqliteDatabase, type SqliteStatement } from '../backends/sqlite/driver.js'
import { assertId } from '../encoding/validate.js'
import { EventWaiters, limitOf, seqOf, type ReadEventsOptions, type RunEventLog, type StoredRunEvent, type WaitForEventsOptions } from './run-event-log.js'

/** How often, at most, a wait checks the table for another process's appends. */
const MAX_POLL_MS = 80

const CREATE = `CREATE TABLE IF NOT EXISTS run_events (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  body TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID`

/**
 * The `SqliteStore`'s {@link RunEventLog}: a table `run_events` of the same database file,
 * created by the first append. A cursor is the event's sequence number in its run; an append is
 * one transaction that takes the write lock up front, so sequence numbers become visible in
 * order. A wait is woken at once by an append of this process, and otherwise reads the run's
 * newest sequence number (one index lookup) with backoff up to 80 ms.
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
    const bodies = events.map((event) => JSON.stringify(event))
    const cursors = this.#call(runId, 'append events', () => {
      const s = this.#table()
      // The level is left as it is: an append goes with the durability of the run's commits
      // around it (relaxed after an `async` commit, synced after a `sync` one), and switching it
      // here would sync every append of an `async` run, several per step.
      const insert = this.#db.transaction(() => {
        let seq = Number(s.last.get(runId) ?? 0)
        return bodies.map((body) => {
          s.insert.run(runId, ++seq, body)
          return String(seq)
        })
      })
      return insert.immediate()
    })
    this.#waiters.notify(runId)
    return cursors
  }

  async read(runId: string, options: ReadEventsOptions = {}): Promise<StoredRunEvent[]> {
    assertId(runId, 'runId')
    const after = seqOf(options.after)
    const limit = limitOf(options.limit)
    const rows = this.#call(runId, 'read events', () => this.#prepared()?.read.all(runId, after, limit) ?? []) as [number, string][]
    return rows.map(([seq, body]) => ({ cursor: String(seq), event: JSON.parse(body) as JsonObject }))
  }

  waitForMore(runId: string, after: string | undefined, options: WaitForEventsOptions): Promise<boolean> {
    assertId(runId, 'runId')
    const seq = seqOf(after)
    return this.#waiters.wait(runId, async () => Number(this.#call(runId, 'check for events', () => this.#prepared()?.last.get(runId) ?? 0)) > seq, options)
  }

  async deleteRun(runId: string): Promise<number> {
    assertId(runId, 'runId')
    return this.#call(runId, 'delete events', () => {
      SynchronousLevel.of(this.#db)?.use()
      return this.#prepared()?.remove.run(runId).changes ?? 0
    })
  }

  async replace(runId: string, events: readonly JsonObject[]): Promise<void> {
    assertId(runId, 'runId')
    const bodies = events.map((event) => JSON.stringify(event))
    this.#call(runId, 'rewrite events', () => {
      const s = this.#table()
      SynchronousLevel.of(this.#db)?.use()
      const rewrite = this.#db.transaction(() => {
        s.remove.run(runId)
        bodies.forEach((body, i) => s.insert.run(runId, i + 1, body))
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

interface Statements {
  insert: SqliteStatement
  last: SqliteStatement
  read: SqliteStatement
  remove: SqliteStatement
}
