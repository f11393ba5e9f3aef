import { inflateRawSync } from 'node:zlib'
import type { JsonObject } from '../../core/codec.js'
import { StoreError } from '../../core/errors.js'
import type { StoredRunEvent } from './run-event-log.js'

/**
 * How the SQL event logs (SQLite, Postgres) store a run's events: one row per append, keyed by
 * the run and the sequence number of its last event, whose body is the JSON array of the
 * appended events. An append is one insert however many events it carries (a run's log grows
 * by a row per commit, not per event), and its events' numbers are the ones just below the key:
 * a row keyed 12 holding three events holds events 10, 11 and 12. A row whose body is a single
 * JSON object holds that one event. A body stored as bytes is that text deflated (raw deflate,
 * `node:zlib`): SQLite stores it so, Postgres compresses large rows itself (TOAST).
 */

/** The body of a row holding `events` (at least one). */
export function rowOf(events: readonly JsonObject[]): string {
  return JSON.stringify(events)
}

/** The cursors of `count` events appended in a row keyed `last`, in order. */
export function cursorsEndingAt(last: number, count: number): string[] {
  return Array.from({ length: count }, (_, i) => String(last - count + 1 + i))
}

/**
 * The events after sequence number `after`, at most `limit`, of rows read in order from the
 * first row keyed above `after` (a row read whole may start at or before it).
 */
export function eventsOfRows(rows: readonly (readonly [number | string, string | Uint8Array])[], after: number, limit: number): StoredRunEvent[] {
  const out: StoredRunEvent[] = []
  for (const [key, body] of rows) {
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
