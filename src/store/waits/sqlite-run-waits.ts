import { StoreError } from '../../core/errors.js'
import { SynchronousLevel, type SqliteDatabase, type SqliteStatement } from '../backends/sqlite/driver.js'
import type { ExternalEventRow, RunWaits, ScheduleRow, TakeEventRequest, TimerRow, WaitRow } from './run-waits.js'

const CREATE = `
CREATE TABLE IF NOT EXISTS cairn_timers (run_id TEXT PRIMARY KEY, wake_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS cairn_timers_wake ON cairn_timers (wake_at);
CREATE TABLE IF NOT EXISTS cairn_events (event_id TEXT PRIMARY KEY, name TEXT NOT NULL, match TEXT NOT NULL,
  payload TEXT NOT NULL, sent_at INTEGER NOT NULL, taken_by TEXT);
CREATE INDEX IF NOT EXISTS cairn_events_free ON cairn_events (name, match, sent_at) WHERE taken_by IS NULL;
CREATE INDEX IF NOT EXISTS cairn_events_taken ON cairn_events (taken_by) WHERE taken_by IS NOT NULL;
CREATE TABLE IF NOT EXISTS cairn_waits (run_id TEXT NOT NULL, wait_id TEXT NOT NULL, name TEXT NOT NULL, match TEXT NOT NULL,
  PRIMARY KEY (run_id, wait_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cairn_schedules (id TEXT PRIMARY KEY, body TEXT NOT NULL, paused INTEGER NOT NULL,
  last_tick INTEGER NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID;`

const EVENT_COLUMNS = 'event_id AS eventId, name, match, payload, sent_at AS sentAt, taken_by AS takenBy'
const SCHEDULE_COLUMNS = 'id, body, paused, last_tick AS lastTick, created_at AS createdAt'

/**
 * The `SqliteStore`'s {@link RunWaits}: four tables of the same database file, created together
 * (`CREATE … IF NOT EXISTS`) on first use. Taking an event is one transaction under the write
 * lock, so of two processes taking one event exactly one gets it.
 */
export class SqliteRunWaits implements RunWaits {
  readonly #db: SqliteDatabase
  #s: Statements | undefined

  constructor(db: SqliteDatabase) {
    this.#db = db
  }

  async setTimer(runId: string, wakeAt: number): Promise<void> {
    this.#run('set a timer', (s) => s.setTimer.run(runId, wakeAt))
  }

  async getTimer(runId: string): Promise<number | undefined> {
    const at = this.#run('read a timer', (s) => s.getTimer.get(runId)) as number | undefined
    return at === undefined ? undefined : Number(at)
  }

  async clearTimer(runId: string, wakeAt?: number): Promise<boolean> {
    return this.#run('clear a timer', (s) => (wakeAt === undefined ? s.clearTimer.run(runId) : s.clearTimerAt.run(runId, wakeAt)).changes > 0)
  }

  async clearTimers(timers: readonly TimerRow[]): Promise<number> {
    if (timers.length === 0) return 0
    return this.#run('clear timers', (s) =>
      this.#db.transaction(() => timers.reduce((removed, timer) => removed + s.clearTimerAt.run(timer.runId, timer.wakeAt).changes, 0)).immediate(),
    )
  }

  async dueTimers(now: number, limit: number): Promise<TimerRow[]> {
    return (this.#run('read due timers', (s) => s.dueTimers.all(now, limit)) as TimerRow[]).map((row) => ({ runId: row.runId, wakeAt: Number(row.wakeAt) }))
  }

  async sendEvent(event: Omit<ExternalEventRow, 'takenBy'>): Promise<boolean> {
    return this.#run('keep an event', (s) => s.sendEvent.run(event.eventId, event.name, event.match, event.payload, event.sentAt).changes > 0)
  }

  async takeEvent({ name, match, takenBy }: TakeEventRequest): Promise<ExternalEventRow | undefined> {
    return this.#run('take an event', (s) => {
      const take = this.#db.transaction(() => {
        const taken = s.takenBy.get(takenBy) as ExternalEventRow | undefined
        if (taken) return taken
        const free = s.freeEvent.get(name, match) as ExternalEventRow | undefined
        if (!free) return undefined
        s.take.run(takenBy, free.eventId)
        return { ...free, takenBy }
      })
      return take.immediate()
    })
  }

  async listEvents(options: { name?: string; limit?: number } = {}): Promise<ExternalEventRow[]> {
    return this.#run('list events', (s) => s.listEvents.all({ name: options.name ?? null, limit: options.limit ?? 100 })) as ExternalEventRow[]
  }

  async setWait(wait: WaitRow): Promise<void> {
    this.#run('record a wait', (s) => s.setWait.run(wait.runId, wait.waitId, wait.name, wait.match))
  }

  async getWaits(runId: string): Promise<WaitRow[]> {
    return this.#run('read waits', (s) => s.getWaits.all(runId)) as WaitRow[]
  }

  async clearRun(runId: string): Promise<void> {
    this.#run('clear waits', (s) => {
      s.clearWaits.run(runId)
      s.clearTimer.run(runId)
    })
  }

  async readyWaits(limit: number): Promise<WaitRow[]> {
    return this.#run('read ready waits', (s) => s.readyWaits.all(limit)) as WaitRow[]
  }

  async putSchedule(row: ScheduleRow): Promise<boolean> {
    return this.#run('store a schedule', (s) => {
      const put = this.#db.transaction(() => {
        if (s.updateSchedule.run(row.body, row.id).changes > 0) return false
        s.insertSchedule.run(row.id, row.body, row.paused ? 1 : 0, row.lastTick, row.createdAt)
        return true
      })
      return put.immediate()
    })
  }

  async getSchedule(id: string): Promise<ScheduleRow | undefined> {
    const row = this.#run('read a schedule', (s) => s.getSchedule.get(id)) as ScheduleRow | undefined
    return row && scheduleOf(row)
  }

  async listSchedules(): Promise<ScheduleRow[]> {
    return (this.#run('list schedules', (s) => s.listSchedules.all()) as ScheduleRow[]).map(scheduleOf)
  }

  async deleteSchedule(id: string): Promise<boolean> {
    return this.#run('delete a schedule', (s) => s.deleteSchedule.run(id).changes > 0)
  }

  async setSchedulePaused(id: string, paused: boolean): Promise<boolean> {
    return this.#run('pause or resume a schedule', (s) => s.pauseSchedule.run(paused ? 1 : 0, id).changes > 0)
  }

  async advanceSchedule(id: string, from: number, to: number): Promise<boolean> {
    return this.#run('advance a schedule', (s) => s.advanceSchedule.run(to, id, from).changes > 0)
  }

  async close(): Promise<void> {}

  #run<T>(what: string, fn: (s: Statements) => T): T {
    try {
      // Every write here commits with the connection's own level, even after a relaxed commit.
      SynchronousLevel.of(this.#db)?.use()
      return fn(this.#statements())
    } catch (err) {
      throw new StoreError(`cannot ${what} in the SQLite store's time tables: ${(err as Error).message}`, { cause: err })
    }
  }

  #statements(): Statements {
    if (this.#s) return this.#s
    this.#db.exec(CREATE)
    const p = (sql: string) => this.#db.prepare(sql)
    this.#s = {
      setTimer: p('INSERT INTO cairn_timers (run_id, wake_at) VALUES (?, ?) ON CONFLICT (run_id) DO UPDATE SET wake_at = excluded.wake_at'),
      getTimer: p('SELECT wake_at FROM cairn_timers WHERE run_id = ?').pluck(),
      clearTimer: p('DELETE FROM cairn_timers WHERE run_id = ?'),
      clearTimerAt: p('DELETE FROM cairn_timers WHERE run_id = ? AND wake_at = ?'),
      dueTimers: p('SELECT run_id AS runId, wake_at AS wakeAt FROM cairn_timers WHERE wake_at <= ? ORDER BY wake_at LIMIT ?'),
      sendEvent: p('INSERT INTO cairn_events (event_id, name, match, payload, sent_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (event_id) DO NOTHING'),
      takenBy: p(`SELECT ${EVENT_COLUMNS} FROM cairn_events WHERE taken_by = ?`),
      freeEvent: p(`SELECT ${EVENT_COLUMNS} FROM cairn_events WHERE name = ? AND match = ? AND taken_by IS NULL ORDER BY sent_at, event_id LIMIT 1`),
      take: p('UPDATE cairn_events SET taken_by = ? WHERE event_id = ? AND taken_by IS NULL'),
      listEvents: p(`SELECT ${EVENT_COLUMNS} FROM cairn_events WHERE :name IS NULL OR name = :name ORDER BY sent_at DESC LIMIT :limit`),
      setWait: p('INSERT INTO cairn_waits (run_id, wait_id, name, match) VALUES (?, ?, ?, ?) ON CONFLICT (run_id, wait_id) DO UPDATE SET name = excluded.name, match = excluded.match'),
      getWaits: p('SELECT run_id AS runId, wait_id AS waitId, name, match FROM cairn_waits WHERE run_id = ?'),
      clearWaits: p('DELETE FROM cairn_waits WHERE run_id = ?'),
      readyWaits: p(`SELECT w.run_id AS runId, w.wait_id AS waitId, w.name, w.match FROM cairn_waits w
        WHERE EXISTS (SELECT 1 FROM cairn_events e WHERE e.name = w.name AND e.match = w.match AND e.taken_by IS NULL) LIMIT ?`),
      updateSchedule: p('UPDATE cairn_schedules SET body = ? WHERE id = ?'),
      insertSchedule: p('INSERT INTO cairn_schedules (id, body, paused, last_tick, created_at) VALUES (?, ?, ?, ?, ?)'),
      getSchedule: p(`SELECT ${SCHEDULE_COLUMNS} FROM cairn_schedules WHERE id = ?`),
      listSchedules: p(`SELECT ${SCHEDULE_COLUMNS} FROM cairn_schedules ORDER BY id`),
      deleteSchedule: p('DELETE FROM cairn_schedules WHERE id = ?'),
      pauseSchedule: p('UPDATE cairn_schedules SET paused = ? WHERE id = ?'),
      advanceSchedule: p('UPDATE cairn_schedules SET last_tick = ? WHERE id = ? AND last_tick = ?'),
    }
    return this.#s
  }
}

function scheduleOf(row: ScheduleRow): ScheduleRow {
  return { id: row.id, body: row.body, paused: Boolean(row.paused), lastTick: Number(row.lastTick), createdAt: Number(row.createdAt) }
}

type Statements = Record<
  | 'setTimer' | 'getTimer' | 'clearTimer' | 'clearTimerAt' | 'dueTimers' | 'sendEvent' | 'takenBy' | 'freeEvent' | 'take' | 'listEvents'
  | 'setWait' | 'getWaits' | 'clearWaits' | 'readyWaits' | 'updateSchedule' | 'insertSchedule' | 'getSchedule' | 'listSchedules'
  | 'deleteSchedule' | 'pauseSchedule' | 'advanceSchedule',
  SqliteStatement
>
