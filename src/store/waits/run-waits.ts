/** A run's wake-up: the run is queued again for workers once `wakeAt` has passed. */
export interface TimerRow {
  runId: string
  /** Unix milliseconds. */
  wakeAt: number
}

/** An event sent from outside (`CairnClient.send`), kept until a waiting run takes it. */
export interface ExternalEventRow {
  /** Unique: the sender's idempotency key, or a fresh id. A second send with it is dropped. */
  eventId: string
  name: string
  /** What a wait matches on (an order id, say); empty to match any wait for the name. */
  match: string
  /** The payload as JSON text, opaque to the store. */
  payload: string
  /** Unix milliseconds. */
  sentAt: number
  /** Who took it (`runId/waitId`), or null while nobody has. */
  takenBy: string | null
}

/** A run waiting for an event named `name` matching `match`. */
export interface WaitRow {
  runId: string
  waitId: string
  name: string
  match: string
}

/** A stored schedule: its body (JSON text, opaque to the store) and the last tick it fired. */
export interface ScheduleRow {
  id: string
  body: string
  paused: boolean
  /** Unix milliseconds of the last tick handled (fired or skipped); ticks after it are due. */
  lastTick: number
  createdAt: number
}

/** What {@link RunWaits.takeEvent} takes. */
export interface TakeEventRequest {
  name: string
  match: string
  /** Who takes it: the same taker gets the same event again (a re-run after a crash). */
  takenBy: string
}

/**
 * What runs wait for, beside the store's runs: timers (a sleeping run's wake time, a wait's or an
 * interrupt's deadline), external events sent to runs and the waits that take them, and
 * schedules that start runs. Each backend keeps these in tables of its own (`cairn_timers`,
 * `cairn_events`, `cairn_waits`, `cairn_schedules`), created on first use, and moves opaque
 * strings: it knows nothing of runners, tools or cron. Every method is atomic on its own; the
 * worker layer's exactly-once rests on `takeEvent`, `advanceSchedule` and the lease engine's
 * `requeuePaused`, each a compare-and-set.
 */
export interface RunWaits {
  /** Set (or move) the run's timer. */
  setTimer(runId: string, wakeAt: number): Promise<void>
  /** The run's timer, if it has one. */
  getTimer(runId: string): Promise<number | undefined>
  /** Remove the run's timer; with `wakeAt`, only while it still says that time. True when removed. */
  clearTimer(runId: string, wakeAt?: number): Promise<boolean>
  /** Remove each of these timers while it still says its time, in one write; how many were removed. */
  clearTimers(timers: readonly TimerRow[]): Promise<number>
  /** Timers whose time is at or before `now`, earliest first, at most `limit`. */
  dueTimers(now: number, limit: number): Promise<TimerRow[]>
  /** Keep an event; false (and nothing changes) when an event with its id was sent before. */
  sendEvent(event: Omit<ExternalEventRow, 'takenBy'>): Promise<boolean>
  /**
   * The event `takenBy` took before, else the oldest event of `name` and `match` nobody took,
   * now taken by `takenBy` (atomically: two takers never get one event); undefined when none.
   */
  takeEvent(request: TakeEventRequest): Promise<ExternalEventRow | undefined>
  /** Events sent, newest first (for operators). */
  listEvents(options?: { name?: string; limit?: number }): Promise<ExternalEventRow[]>
  /** Record that a run waits (replacing the same `runId`/`waitId`). */
  setWait(wait: WaitRow): Promise<void>
  /** The run's waits. */
  getWaits(runId: string): Promise<WaitRow[]>
  /** Remove the run's waits and its timer. */
  clearRun(runId: string): Promise<void>
  /** Waits for which an event nobody took is there, at most `limit`. */
  readyWaits(limit: number): Promise<WaitRow[]>
  /** Insert a schedule, or replace the body of one with its id (its last tick and pause stay); true when inserted. */
  putSchedule(row: ScheduleRow): Promise<boolean>
  getSchedule(id: string): Promise<ScheduleRow | undefined>
  listSchedules(): Promise<ScheduleRow[]>
  /** True when there was one. */
  deleteSchedule(id: string): Promise<boolean>
  /** True when the schedule exists. */
  setSchedulePaused(id: string, paused: boolean): Promise<boolean>
  /** Move the last tick from `from` to `to`, only while it still is `from`: true for the one caller that did. */
  advanceSchedule(id: string, from: number, to: number): Promise<boolean>
  close(): Promise<void>
}
