import type { JsonObject } from '../../core/codec.js'
import { assertId } from '../encoding/validate.js'
import { eventTexts, EventWaiters, limitOf, seqOf, type ReadEventsOptions, type RunEventLog, type StoredRunEvent, type WaitForEventsOptions } from './run-event-log.js'

/**
 * A {@link RunEventLog} in process memory (the `MemoryStore`'s): events are kept as JSON text,
 * so nothing is shared by reference; cursors are sequence numbers.
 */
export class MemoryEventLog implements RunEventLog {
  readonly #runs = new Map<string, string[]>()
  readonly #waiters = new EventWaiters(Infinity)

  async append(runId: string, events: readonly JsonObject[], texts: readonly string[] = eventTexts(events)): Promise<string[]> {
    assertId(runId, 'runId')
    const log = this.#runs.get(runId) ?? []
    this.#runs.set(runId, log)
    const cursors = texts.map((_, i) => String(log.length + i + 1))
    log.push(...texts)
    if (cursors.length > 0) this.#waiters.notify(runId)
    return cursors
  }

  async read(runId: string, options: ReadEventsOptions = {}): Promise<StoredRunEvent[]> {
    assertId(runId, 'runId')
    const from = seqOf(options.after)
    const log = this.#runs.get(runId) ?? []
    return log.slice(from, from + limitOf(options.limit)).map((text, i) => ({ cursor: String(from + i + 1), event: JSON.parse(text) as JsonObject }))
  }

  waitForMore(runId: string, after: string | undefined, options: WaitForEventsOptions): Promise<boolean> {
    assertId(runId, 'runId')
    const from = seqOf(after)
    return this.#waiters.wait(runId, async () => (this.#runs.get(runId)?.length ?? 0) > from, options)
  }

  async deleteRun(runId: string): Promise<number> {
    const count = this.#runs.get(runId)?.length ?? 0
    this.#runs.delete(runId)
    return count
  }

  async replace(runId: string, events: readonly JsonObject[]): Promise<void> {
    assertId(runId, 'runId')
    if (events.length === 0) this.#runs.delete(runId)
    else this.#runs.set(runId, events.map((event) => JSON.stringify(event)))
    this.#waiters.notify(runId)
  }

  async close(): Promise<void> {
    this.#waiters.notify()
  }
}
