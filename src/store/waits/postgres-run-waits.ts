import { StoreError } from '../../core/errors.js'
import type { PostgresPool } from '../backends/postgres/driver.js'
import { quoteIdent } from '../backends/postgres/sql.js'
import type { ExternalEventRow, RunWaits, ScheduleRow, TakeEventRequest, TimerRow, WaitRow } from './run-waits.js'

/** What a {@link PostgresRunWaits} runs on. */
export interface PostgresRunWaitsOptions {
  pool: PostgresPool
  /** The store's schema (a plain lowercase identifier). */
  schema: string
  /** Resolves once the schema exists (the store's migrations ran). */
  ready: () => Promise<void>
}

const EVENT_COLUMNS = 'event_id AS "eventId", name, match, payload, sent_at AS "sentAt", taken_by AS "takenBy"'
const SCHEDULE_COLUMNS = 'id, body, paused, last_tick AS "lastTick", created_at AS "createdAt"'

/**
 * The `PostgresStore`'s {@link RunWaits}: four tables in the store's schema, created together
 * (`CREATE … IF NOT EXISTS`) on first use. Taking an event is one statement that picks the
 * oldest free event `FOR UPDATE SKIP LOCKED`, so two workers never take one event; advancing a
 * schedule is a compare-and-set on its last tick.
 */
export class PostgresRunWaits implements RunWaits {
  readonly #pool: PostgresPool
  readonly #schema: string
  readonly #ready: () => Promise<void>
  #created: Promise<void> | undefined

  constructor(options: PostgresRunWaitsOptions) {
    this.#pool = options.pool
    this.#schema = quoteIdent(options.schema)
    this.#ready = options.ready
  }

  async setTimer(runId: string, wakeAt: number): Promise<void> {
    await this.#query('set a timer', `INSERT INTO ${this.#t('timers')} (run_id, wake_at) VALUES ($1, $2) ON CONFLICT (run_id) DO UPDATE SET wake_at = excluded.wake_at`, [runId, wakeAt])
  }

  async getTimer(runId: string): Promise<number | undefined> {
    const rows = await this.#query('read a timer', `SELECT wake_at FROM ${this.#t('timers')} WHERE run_id = $1`, [runId])
    return rows[0] === undefined ? undefined : Number(rows[0].wake_at)
  }

  async clearTimer(runId: string, wakeAt?: number): Promise<boolean> {
    const rows =
      wakeAt === undefined
        ? await this.#query('clear a timer', `DELETE FROM ${this.#t('timers')} WHERE run_id = $1 RETURNING run_id`, [runId])
        : await this.#query('clear a timer', `DELETE FROM ${this.#t('timers')} WHERE run_id = $1 AND wake_at = $2 RETURNING run_id`, [runId, wakeAt])
    return rows.length > 0
  }

  async clearTimers(timers: readonly TimerRow[]): Promise<number> {
    if (timers.length === 0) return 0
    const rows = await this.#query(
      'clear timers',
      `DELETE FROM ${this.#t('timers')} t USING unnest($1::text[], $2::bigint[]) AS d(run_id, wake_at)
        WHERE t.run_id = d.run_id AND t.wake_at = d.wake_at RETURNING t.run_id`,
      [timers.map((timer) => timer.runId), timers.map((timer) => timer.wakeAt)],
    )
    return rows.length
  }

  async dueTimers(now: number, limit: number): Promise<TimerRow[]> {
    const rows = await this.#query('read due timers', `SELECT run_id, wake_at FROM ${this.#t('timers')} WHERE wake_at <= $1 ORDER BY wake_at LIMIT $2`, [now, limit])
    return rows.map((row) => ({ runId: String(row.run_id), wakeAt: Number(row.wake_at) }))
  }

  async sendEvent(event: Omit<ExternalEventRow, 'takenBy'>): Promise<boolean> {
    const rows = await this.#query(
      'keep an event',
      `INSERT INTO ${this.#t('events')} (event_id, name, match, payload, sent_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (event_id) DO NOTHING RETURNING event_id`,
      [event.eventId, event.name, event.match, event.payload, event.sentAt],
    )
    return rows.length > 0
  }

  async takeEvent({ name, match, takenBy }: TakeEventRequest): Promise<ExternalEventRow | undefined> {
    const table = this.#t('events')
    const taken = await this.#query('take an event', `SELECT ${EVENT_COLUMNS} FROM ${table} WHERE taken_by = $1`, [takenBy])
    if (taken[0]) return eventOf(taken[0])
    const rows = await this.#query(
      'take an event',
      `UPDATE ${table} SET taken_by = $3 WHERE event_id = (
        SELECT event_id FROM ${table} WHERE name = $1 AND match = $2 AND taken_by IS NULL ORDER BY sent_at, event_id LIMIT 1 FOR UPDATE SKIP LOCKED
      ) AND taken_by IS NULL RETURNING ${EVENT_COLUMNS}`,
      [name, match, takenBy],
    )
    return rows[0] && eventOf(rows[0])
  }

  async listEvents(options: { name?: string; limit?: number } = {}): Promise<ExternalEventRow[]> {
    const rows = await this.#query('list events', `SELECT ${EVENT_COLUMNS} FROM ${this.#t('events')} WHERE $1::text IS NULL OR name = $1 ORDER BY sent_at DESC LIMIT $2`, [
      options.name ?? null,
      options.limit ?? 100,
    ])
    return rows.map(eventOf)
  }

  async setWait(wait: WaitRow): Promise<void> {
    await this.#query(
      'record a wait',
      `INSERT INTO ${this.#t('waits')} (run_id, wait_id, name, match) VALUES ($1, $2, $3, $4) ON CONFLICT (run_id, wait_id) DO UPDATE SET name = excluded.name, match = excluded.match`,
      [wait.runId, wait.waitId, wait.name, wait.match],
    )
  }

  async getWaits(runId: string): Promise<WaitRow[]> {
    const rows = await this.#query('read waits', `SELECT run_id AS "runId", wait_id AS "waitId", name, match FROM ${this.#t('waits')} WHERE run_id = $1`, [runId])
    return rows as unknown as WaitRow[]
  }

  async clearRun(runId: string): Promise<void> {
    await this.#query('clear waits', `WITH w AS (DELETE FROM ${this.#t('waits')} WHERE run_id = $1) DELETE FROM ${this.#t('timers')} WHERE run_id = $1`, [runId])
  }

  async readyWaits(limit: number): Promise<WaitRow[]> {
    const rows = await this.#query(
      'read ready waits',
      `SELECT w.run_id AS "runId", w.wait_id AS "waitId", w.name, w.match FROM ${this.#t('waits')} w
        WHERE EXISTS (SELECT 1 FROM ${this.#t('events')} e WHERE e.name = w.name AND e.match = w.match AND e.taken_by IS NULL) LIMIT $1`,
      [limit],
    )
    return rows as unknown as WaitRow[]
  }

  async putSchedule(row: ScheduleRow): Promise<boolean> {
    const rows = await this.#query(
      'store a schedule',
      `INSERT INTO ${this.#t('schedules')} (id, body, paused, last_tick, created_at) VALUES ($1, $2, $3, $4, $5)
        ON CONFLICT (id) DO UPDATE SET body = excluded.body RETURNING (xmax = 0) AS inserted`,
      [row.id, row.body, row.paused, row.lastTick, row.createdAt],
    )
    return rows[0]?.inserted === true
  }

  async getSchedule(id: string): Promise<ScheduleRow | undefined> {
    const rows = await this.#query('read a schedule', `SELECT ${SCHEDULE_COLUMNS} FROM ${this.#t('schedules')} WHERE id = $1`, [id])
    return rows[0] && scheduleOf(rows[0])
  }

  async listSchedules(): Promise<ScheduleRow[]> {
    return (await this.#query('list schedules', `SELECT ${SCHEDULE_COLUMNS} FROM ${this.#t('schedules')} ORDER BY id`, [])).map(scheduleOf)
  }

  async deleteSchedule(id: string): Promise<boolean> {
    return (await this.#query('delete a schedule', `DELETE FROM ${this.#t('schedules')} WHERE id = $1 RETURNING id`, [id])).length > 0
  }

  async setSchedulePaused(id: string, paused: boolean): Promise<boolean> {
    return (await this.#query('pause or resume a schedule', `UPDATE ${this.#t('schedules')} SET paused = $2 WHERE id = $1 RETURNING id`, [id, paused])).length > 0
  }

  async advanceSchedule(id: string, from: number, to: number): Promise<boolean> {
    return (await this.#query('advance a schedule', `UPDATE ${this.#t('schedules')} SET last_tick = $3 WHERE id = $1 AND last_tick = $2 RETURNING id`, [id, from, to])).length > 0
  }

  async close(): Promise<void> {}

  #t(name: string): string {
    return `${this.#schema}.cairn_${name}`
  }

  async #query(what: string, sql: string, values: unknown[]): Promise<Record<string, unknown>[]> {
    await this.#ensureTables()
    try {
      return (await this.#pool.query(sql, values)).rows
    } catch (err) {
      throw new StoreError(`cannot ${what} in the Postgres store's time tables: ${(err as Error).message}`, { cause: err })
    }
  }

  /** The tables exist (created once per process; a failure is tried again by the next call). */
  #ensureTables(): Promise<void> {
    this.#created ??= (async () => {
      await this.#ready()
      const statements = [
        `CREATE TABLE IF NOT EXISTS ${this.#t('timers')} (run_id text PRIMARY KEY, wake_at bigint NOT NULL)`,
        `CREATE INDEX IF NOT EXISTS cairn_timers_wake ON ${this.#t('timers')} (wake_at)`,
        `CREATE TABLE IF NOT EXISTS ${this.#t('events')} (event_id text PRIMARY KEY, name text NOT NULL, match text NOT NULL, payload text NOT NULL, sent_at bigint NOT NULL, taken_by text)`,
        `CREATE INDEX IF NOT EXISTS cairn_events_free ON ${this.#t('events')} (name, match, sent_at) WHERE taken_by IS NULL`,
        `CREATE INDEX IF NOT EXISTS cairn_events_taken ON ${this.#t('events')} (taken_by) WHERE taken_by IS NOT NULL`,
        `CREATE TABLE IF NOT EXISTS ${this.#t('waits')} (run_id text NOT NULL, wait_id text NOT NULL, name text NOT NULL, match text NOT NULL, PRIMARY KEY (run_id, wait_id))`,
        `CREATE TABLE IF NOT EXISTS ${this.#t('schedules')} (id text PRIMARY KEY, body text NOT NULL, paused boolean NOT NULL, last_tick bigint NOT NULL, created_at bigint NOT NULL)`,
      ]
      for (const sql of statements) {
        try {
          await this.#pool.query(sql)
        } catch (err) {
          // Two processes creating one at once: the other one's is as good.
          const code = (err as { code?: unknown }).code
          if (code !== '23505' && code !== '42P07') throw err
        }
      }
    })().catch((err: unknown) => {
      this.#created = undefined
      throw new StoreError(`cannot create the Postgres store's time tables: ${(err as Error).message}`, { cause: err })
    })
    return this.#created
  }
}

function eventOf(row: Record<string, unknown>): ExternalEventRow {
  return { eventId: String(row.eventId), name: String(row.name), match: String(row.match), payload: String(row.payload), sentAt: Number(row.sentAt), takenBy: typeof row.takenBy === 'string' ? row.takenBy : null }
}

function scheduleOf(row: Record<string, unknown>): ScheduleRow {
  return { id: String(row.id), body: String(row.body), paused: row.paused === true, lastTick: Number(row.lastTick), createdAt: Number(row.createdAt) }
}
