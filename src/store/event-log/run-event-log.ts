import type { JsonObject } from '../../core/codec.js'
import { InvalidArgumentError } from '../../core/errors.js'

/** One stored event of a run's log, with the cursor that addresses it. */
export interface StoredRunEvent {
  /** Opaque and monotonic within the run: pass it back as `after` to read what follows it. */
  cursor: string
  /** The event as appended (plain JSON). */
  event: JsonObject
}

/** What {@link RunEventLog.read} takes. */
export interface ReadEventsOptions {
  /** Only events after this cursor; from the first event when absent. */
  after?: string | undefined
  /** At most this many events (default 1000). */
  limit?: number | undefined
}

/** What {@link RunEventLog.waitForMore} takes. */
export interface WaitForEventsOptions {
  /** Stops the wait early (it then resolves `false`). */
  signal?: AbortSignal | undefined
  /** The longest wait; required, nothing waits forever. */
  timeoutMs: number
}

/**
 * A run's append-only event log, beside the store's checkpoints: what a run stream replays and
 * follows across processes. The log holds opaque JSON events in the order appended; each gets a
 * cursor, monotonic within its run. One process appends to a run at a time (the one that
 * executes it); any number read it, from any process the backend reaches, and never change it.
 *
 * Every built-in store has one as `store.events`: in memory, a file per run, a table of the
 * SQLite file, a table of the Postgres schema (with `LISTEN`/`NOTIFY` wake-ups).
 */
export interface RunEventLog {
  /**
   * Append `events` in one commit; returns their cursors, in order. `texts`, when given, holds
   * each event's `JSON.stringify`, which the appender has already: a log stores it rather than
   * serializing the events again.
   */
  append(runId: string, events: readonly JsonObject[], texts?: readonly string[]): Promise<string[]>
  /** Events after `after`, oldest first, at most `limit`. */
  read(runId: string, options?: ReadEventsOptions): Promise<StoredRunEvent[]>
  /**
   * Resolves `true` as soon as the run has an event after `after` (at once when it already
   * has), `false` when `timeoutMs` passed or `signal` fired first.
   */
  waitForMore(runId: string, after: string | undefined, options: WaitForEventsOptions): Promise<boolean>
  /** Remove the run's events; returns how many there were. */
  deleteRun(runId: string): Promise<number>
  /**
   * Write the run's whole log again as `events`, in one atomic step: a crash leaves the old log
   * or the new one, never a mix and never none. What `rekey` does to re-seal a run's events, under
   * the run's lock (nobody appends meanwhile). Sequence-number cursors stay as they were (the log
   * holds the same number of events); a file log's byte-offset cursors change with the lines' sizes.
   */
  replace(runId: string, events: readonly JsonObject[]): Promise<void>
  /** Release what the log holds (timers, a listening connection); the store calls it on close. */
  close(): Promise<void>
}

/** Each event's JSON text: what `append` stores when its caller gives no `texts`. */
export function eventTexts(events: readonly JsonObject[]): string[] {
  return events.map((event) => JSON.stringify(event))
}

/** The default and largest `limit` of a read. */
const DEFAULT_READ_LIMIT = 1000
export const MAX_READ_LIMIT = 10_000

/** The sequence number a cursor of a sequence-numbered log names (0: before the first). */
export function seqOf(cursor: string | undefined): number {
  if (cursor === undefined || cursor === '') return 0
  const seq = Number(cursor)
  if (!Number.isSafeInteger(seq) || seq < 0) throw new InvalidArgumentError(`${JSON.stringify(cursor)} is not a cursor of this run's event log; pass a cursor a read returned`)
  return seq
}

/** A read's limit, checked. */
export function limitOf(limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_READ_LIMIT
  if (!Number.isInteger(limit) || limit < 1) throw new InvalidArgumentError(`limit must be a positive integer, got ${String(limit)}`)
  return Math.min(limit, MAX_READ_LIMIT)
}

/**
 * Waits of one process on its logs: woken at once by an append this process made, and by a
 * `check` (a cheap read of the run's newest cursor) polled with backoff from 5 ms up to
 * `maxPollMs` for appends of other processes. `maxPollMs: Infinity` polls never (the backend
 * wakes `notify` itself).
 */
export class EventWaiters {
  readonly #waiting = new Map<string, Set<() => void>>()
  /** The longest pause between two checks of a wait (the backend may change it). */
  maxPollMs: number

  constructor(maxPollMs: number) {
    this.maxPollMs = maxPollMs
  }

  /** Wake every wait on `runId` (all runs when undefined): it checks again. */
  notify(runId?: string): void {
    const sets = runId === undefined ? [...this.#waiting.values()] : [this.#waiting.get(runId)].filter((set) => set !== undefined)
    for (const set of sets) for (const wake of [...set]) wake()
  }

  /** Wait until `hasMore()` is true, checking it at every wake-up and poll. */
  async wait(runId: string, hasMore: () => Promise<boolean>, options: WaitForEventsOptions): Promise<boolean> {
    if (!(Number.isFinite(options.timeoutMs) && options.timeoutMs >= 0)) throw new InvalidArgumentError(`timeoutMs must be a finite number of ms, got ${String(options.timeoutMs)}`)
    const deadline = Date.now() + options.timeoutMs
    let pollMs = 5
    for (;;) {
      if (options.signal?.aborted) return false
      // Registered before the check, so an append between the check and the sleep still wakes it.
      let wake!: () => void
      const woken = new Promise<void>((resolve) => (wake = resolve))
      const set = this.#waiting.get(runId) ?? new Set()
      this.#waiting.set(runId, set)
      set.add(wake)
      try {
        if (await hasMore()) return true
        const left = deadline - Date.now()
        if (left <= 0) return false
        await sleepUntil(woken, Math.min(left, pollMs), options.signal)
      } finally {
        set.delete(wake)
        if (set.size === 0) this.#waiting.delete(runId)
      }
      pollMs = Math.min(pollMs * 2, this.maxPollMs)
    }
  }
}

/** Resolve when `woken` does, `ms` passed, or `signal` fired. */
function sleepUntil(woken: Promise<void>, ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    const timer = Number.isFinite(ms) ? setTimeout(done, ms) : undefined
    signal?.addEventListener('abort', done, { once: true })
    void woken.then(done)
  })
}
