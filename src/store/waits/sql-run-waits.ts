import { StoreError } from '../../core/errors.js'
import { single, sql, type SqlDriver, type SqlResult, type SqlWork } from '../sql/sql-driver.js'
import type { ExternalEventRow, RunWaits, ScheduleRow, TakeEventRequest, TimerRow, WaitRow } from './run-waits.js'

const EVENT_COLUMNS = 'event_id AS "eventId", name, match, payload, sent_at AS "sentAt", taken_by AS "takenBy"'
const SCHEDULE_COLUMNS = 'id, body, paused, last_tick AS "lastTick", created_at AS "createdAt"'

/**
 * The {@link RunWaits} of the SQL stores (SQLite and Postgres): four tables beside the store's
 * own (`cairn_timers`, `cairn_events`, `cairn_waits`, `cairn_schedules`; in the store's schema on
 * Postgres), created by the store's migrations. Taking an event is one
 * statement that takes the oldest free event unless the taker holds one already (on Postgres
 * `FOR UPDATE SKIP LOCKED`, on SQLite under the write lock), so two takers never get one event;
 * advancing a schedule is a compare-and-set on its last tick.
 */
export class SqlRunWaits implements RunWaits {
  readonly #db: SqlDriver
  readonly #t: Record<'timers' | 'events' | 'waits' | 'schedules', string>

  constructor(db: SqlDriver) {
    this.#db = db
    const table = (name: string) => db.dialect.table(`cairn_${name}`)
    this.#t = { timers: table('timers'), events: table('events'), waits: table('waits'), schedules: table('schedules') }
  }

  async setTimer(runId: string, wakeAt: number): Promise<void> {
    await this.#query('set a timer', `INSERT INTO ${this.#t.timers} (run_id, wake_at) VALUES ($1, $2) ON CONFLICT (run_id) DO UPDATE SET wake_at = excluded.wake_at`, [runId, wakeAt])
  }

  async getTimer(runId: string): Promise<number | undefined> {
    const { rows } = await this.#query('read a timer', `SELECT wake_at FROM ${this.#t.timers} WHERE run_id = $1`, [runId])
    return rows[0] === undefined ? undefined : Number(rows[0].wake_at)
  }

  async clearTimer(runId: string, wakeAt?: number): Promise<boolean> {
    const text = `DELETE FROM ${this.#t.timers} WHERE run_id = $1${wakeAt === undefined ? '' : ' AND wake_at = $2'}`
    return this.#changed('clear a timer', text, wakeAt === undefined ? [runId] : [runId, wakeAt])
  }

  async clearTimers(timers: readonly TimerRow[]): Promise<number> {
    if (timers.length === 0) return 0
    const t = this.#t.timers
    // One statement for the batch, each timer found by its run id (the primary key).
    const { changes } =
      this.#db.dialect.name === 'postgres'
        ? await this.#query('clear timers', `DELETE FROM ${t} t USING unnest($1::text[], $2::bigint[]) AS d(run_id, wake_at) WHERE t.run_id = d.run_id AND t.wake_at = d.wake_at`, [
            timers.map((timer) => timer.runId),
            timers.map((timer) => timer.wakeAt),
          ])
        : await this.#query('clear timers', `DELETE FROM ${t} WHERE (run_id, wake_at) IN (SELECT value ->> 0, value ->> 1 FROM json_each($1))`, [
            JSON.stringify(timers.map((timer) => [timer.runId, timer.wakeAt])),
          ])
    return changes
  }

  async dueTimers(now: number, limit: number): Promise<TimerRow[]> {
    const { rows } = await this.#query('read due timers', `SELECT run_id, wake_at FROM ${this.#t.timers} WHERE wake_at <= $1 ORDER BY wake_at LIMIT $2`, [now, limit])
    return rows.map((row) => ({ runId: String(row.run_id), wakeAt: Number(row.wake_at) }))
  }

  async sendEvent(event: Omit<ExternalEventRow, 'takenBy'>): Promise<boolean> {
    return this.#changed(
      'keep an event',
      `INSERT INTO ${this.#t.events} (event_id, name, match, payload, sent_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (event_id) DO NOTHING`,
      [event.eventId, event.name, event.match, event.payload, event.sentAt],
    )
  }

  async takeEvent({ name, match, takenBy }: TakeEventRequest): Promise<ExternalEventRow | undefined> {
    const events = this.#t.events
    const lock = this.#db.dialect.name === 'postgres' ? ' FOR UPDATE SKIP LOCKED' : ''
    const row = await this.#work('take an event', function* (): SqlWork<Record<string, unknown> | undefined> {
      const taken = yield sql(
        `UPDATE ${events} SET taken_by = $3 WHERE event_id = (
          SELECT event_id FROM ${events} WHERE name = $1 AND match = $2 AND taken_by IS NULL ORDER BY sent_at, event_id LIMIT 1${lock}
        ) AND taken_by IS NULL AND NOT EXISTS (SELECT 1 FROM ${events} WHERE taken_by = $3) RETURNING ${EVENT_COLUMNS}`,
        name,
        match,
        takenBy,
      )
      // None taken now: the one this taker took before, if any.
      return taken.rows[0] ?? (yield sql(`SELECT ${EVENT_COLUMNS} FROM ${events} WHERE taken_by = $1`, takenBy)).rows[0]
    })
    return row && eventOf(row)
  }

  async listEvents(options: { name?: string; limit?: number } = {}): Promise<ExternalEventRow[]> {
    const { rows } = await this.#query('list events', `SELECT ${EVENT_COLUMNS} FROM ${this.#t.events} WHERE CAST($1 AS text) IS NULL OR name = $1 ORDER BY sent_at DESC LIMIT $2`, [
      options.name ?? null,
      options.limit ?? 100,
    ])
    return rows.map(eventOf)
  }

  async setWait(wait: WaitRow): Promise<void> {
    await this.#query(
      'record a wait',
      `INSERT INTO ${this.#t.waits} (run_id, wait_id, name, match) VALUES ($1, $2, $3, $4) ON CONFLICT (run_id, wait_id) DO UPDATE SET name = excluded.name, match = excluded.match`,
      [wait.runId, wait.waitId, wait.name, wait.match],
    )
  }

  async getWaits(runId: string): Promise<WaitRow[]> {
    const { rows } = await this.#query('read waits', `SELECT run_id AS "runId", wait_id AS "waitId", name, match FROM ${this.#t.waits} WHERE run_id = $1`, [runId])
    return rows as unknown as WaitRow[]
  }

  async clearRun(runId: string): Promise<void> {
    const { waits, timers } = this.#t
    // Every run that ends clears its waits: one statement where the dialect can say it in one.
    if (this.#db.dialect.name === 'postgres') {
      await this.#query('clear waits', `WITH w AS (DELETE FROM ${waits} WHERE run_id = $1) DELETE FROM ${timers} WHERE run_id = $1`, [runId])
      return
    }
    await this.#work('clear waits', function* () {
      yield sql(`DELETE FROM ${waits} WHERE run_id = $1`, runId)
      yield sql(`DELETE FROM ${timers} WHERE run_id = $1`, runId)
    })
  }

  async readyWaits(limit: number): Promise<WaitRow[]> {
    const { rows } = await this.#query(
      'read ready waits',
      `SELECT w.run_id AS "runId", w.wait_id AS "waitId", w.name, w.match FROM ${this.#t.waits} w
        WHERE EXISTS (SELECT 1 FROM ${this.#t.events} e WHERE e.name = w.name AND e.match = w.match AND e.taken_by IS NULL) LIMIT $1`,
      [limit],
    )
    return rows as unknown as WaitRow[]
  }

  async putSchedule(row: ScheduleRow): Promise<boolean> {
    const schedules = this.#t.schedules
    return this.#work('store a schedule', function* () {
      const inserted = yield sql(
        `INSERT INTO ${schedules} (id, body, paused, last_tick, created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
        row.id,
        row.body,
        row.paused,
        row.lastTick,
        row.createdAt,
      )
      if (inserted.changes > 0) return true
      // There is one: replace its body (its last tick and pause stay).
      yield sql(`UPDATE ${schedules} SET body = $2 WHERE id = $1`, row.id, row.body)
      return false
    })
  }

  async getSchedule(id: string): Promise<ScheduleRow | undefined> {
    const { rows } = await this.#query('read a schedule', `SELECT ${SCHEDULE_COLUMNS} FROM ${this.#t.schedules} WHERE id = $1`, [id])
    return rows[0] && scheduleOf(rows[0])
  }

  async listSchedules(): Promise<ScheduleRow[]> {
    return (await this.#query('list schedules', `SELECT ${SCHEDULE_COLUMNS} FROM ${this.#t.schedules} ORDER BY id`, [])).rows.map(scheduleOf)
  }

  async deleteSchedule(id: string): Promise<boolean> {
    return this.#changed('delete a schedule', `DELETE FROM ${this.#t.schedules} WHERE id = $1`, [id])
  }

  async setSchedulePaused(id: string, paused: boolean): Promise<boolean> {
    return this.#changed('pause or resume a schedule', `UPDATE ${this.#t.schedules} SET paused = $2 WHERE id = $1`, [id, paused])
  }

  async advanceSchedule(id: string, from: number, to: number): Promise<boolean> {
    return this.#changed('advance a schedule', `UPDATE ${this.#t.schedules} SET last_tick = $3 WHERE id = $1 AND last_tick = $2`, [id, from, to])
  }

  async close(): Promise<void> {}

  #query(what: string, text: string, values: unknown[]): Promise<SqlResult> {
    return this.#work(what, () => single({ text, values }))
  }

  /** Whether the statement changed a row. */
  async #changed(what: string, text: string, values: unknown[]): Promise<boolean> {
    return (await this.#query(what, text, values)).changes > 0
  }

  async #work<T>(what: string, work: () => SqlWork<T>): Promise<T> {
    try {
      return await this.#db.run(work)
    } catch (err) {
      throw new StoreError(`cannot ${what} in the ${this.#db.dialect.label} store's time tables: ${(err as Error).message}`, { cause: err })
    }
  }

}

function eventOf(row: Record<string, unknown>): ExternalEventRow {
  return { eventId: String(row.eventId), name: String(row.name), match: String(row.match), payload: String(row.payload), sentAt: Number(row.sentAt), takenBy: typeof row.takenBy === 'string' ? row.takenBy : null }
}

function scheduleOf(row: Record<string, unknown>): ScheduleRow {
  return { id: String(row.id), body: String(row.body), paused: Boolean(row.paused), lastTick: Number(row.lastTick), createdAt: Number(row.createdAt) }
}
