import type { JsonObject } from '../../core/codec.js'
import { eventTexts, MAX_READ_LIMIT, type ReadEventsOptions, type RunEventLog, type StoredRunEvent } from '../event-log/run-event-log.js'
import type { KeyRing } from './key-ring.js'
import { decrypt, encrypt, integrity, isCiphertext } from './seal.js'

/**
 * The event log of an encrypted store: each event is stored as `{ "sealed": "e1.<keyId>.…" }`,
 * its JSON encrypted with AES-256-GCM under the ring's writing key and bound to its run (the
 * associated data names the run), so the log holds no streamed text in the clear and an event
 * moved into another run's log does not decrypt. Reads decrypt with any key of the ring; an
 * event that is not sealed, or does not decrypt, is a `CheckpointIntegrityError`.
 *
 * What this does not add: the order of a run's events and their number are the backend's (as
 * for any log), not signed; cursors and run ids stay in the clear. A key dropped from the ring
 * makes the events sealed under it unreadable, so `rekey` rewrites each run's events under the
 * new writing key ({@link resealEvents}) before a retired key may go.
 */
export class SealedEventLog implements RunEventLog {
  readonly #log: RunEventLog
  readonly #ring: KeyRing

  constructor(log: RunEventLog, ring: KeyRing) {
    this.#log = log
    this.#ring = ring
  }

  append(runId: string, events: readonly JsonObject[], texts: readonly string[] = eventTexts(events)): Promise<string[]> {
    return this.#log.append(runId, this.#seal(runId, texts))
  }

  async read(runId: string, options?: ReadEventsOptions): Promise<StoredRunEvent[]> {
    const stored = await this.#log.read(runId, options)
    return stored.map(({ cursor, event }) => ({ cursor, event: this.open(runId, cursor, event) }))
  }

  waitForMore: RunEventLog['waitForMore'] = (runId, after, options) => this.#log.waitForMore(runId, after, options)
  deleteRun: RunEventLog['deleteRun'] = (runId) => this.#log.deleteRun(runId)

  replace(runId: string, events: readonly JsonObject[]): Promise<void> {
    return this.#log.replace(runId, this.#seal(runId, eventTexts(events)))
  }

  /** Each event's JSON text, encrypted. */
  #seal(runId: string, texts: readonly string[]): JsonObject[] {
    return texts.map((text) => ({ sealed: encrypt(this.#ring, text, eventAad(runId)) }))
  }

  close: RunEventLog['close'] = () => this.#log.close()

  /** One stored event, opened: a `CheckpointIntegrityError` when it is not sealed or does not decrypt. */
  open(runId: string, cursor: string, event: JsonObject): JsonObject {
    const context = { runId, what: `event ${cursor} of run ${runId}` }
    const sealed = event.sealed
    if (!isCiphertext(sealed) || Object.keys(event).length !== 1) {
      throw integrity(context, 'is not encrypted, but this store encrypts its event logs: it was written by a store opened without encrypt: true, or edited; delete the run\'s events (store.prune) to stream it again')
    }
    const plain = decrypt(this.#ring, sealed, eventAad(runId), context)
    try {
      const parsed = JSON.parse(plain) as unknown
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as JsonObject
    } catch (err) {
      throw integrity(context, 'decrypts to text that is not JSON', undefined, err)
    }
    throw integrity(context, 'decrypts to JSON that is not an event object')
  }
}

/**
 * Rewrite a run's event log under the ring's writing key (`encrypt`) or in the clear: what `rekey`
 * does to each run's events, under the run's lock. A sealed event is opened with any key of the
 * ring (and refused when it does not decrypt); one in the clear is taken as it is, which is what a
 * store that is turning encryption on holds. The log is replaced in one atomic step (a crash keeps
 * the old one); sequence-number cursors stay valid, a file log's byte offsets do not. A log in the
 * clear that stays in the clear is left untouched.
 */
export async function resealEvents(log: RunEventLog, ring: KeyRing, runId: string, encrypt: boolean): Promise<number> {
  const sealed = new SealedEventLog(log, ring)
  const events: JsonObject[] = []
  let anySealed = false
  for (let after: string | undefined; ; ) {
    const page = await log.read(runId, { after, limit: MAX_READ_LIMIT })
    if (page.length === 0) break
    for (const { cursor, event } of page) {
      const isSealed = isCiphertext(event.sealed) && Object.keys(event).length === 1
      anySealed ||= isSealed
      events.push(isSealed ? sealed.open(runId, cursor, event) : event)
    }
    after = page[page.length - 1]!.cursor
  }
  if (events.length === 0 || (!encrypt && !anySealed)) return 0
  await (encrypt ? sealed : log).replace(runId, events)
  return events.length
}

/** The associated data of a run's events: binds each to its run, apart from every other record's. */
function eventAad(runId: string): string {
  return `cairn run event\n${runId}`
}
