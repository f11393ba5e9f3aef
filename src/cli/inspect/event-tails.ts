import type { RunEventLog } from '../../index.js'

/** Events read per page while looking for a run's newest cursor. */
const PAGE = 10_000

/**
 * The newest cursor of each run's event log, as far as this inspector has read it: a live view
 * follows a run from there instead of replaying its whole log. Cursors are opaque, so the log is
 * read forward a page at a time, once per run and inspector: the next look starts from the
 * cursor kept.
 */
export class EventTails {
  readonly #log: RunEventLog
  readonly #tails = new Map<string, string>()

  constructor(log: RunEventLog) {
    this.#log = log
  }

  /** The run's newest cursor, or undefined when its log is empty. */
  async newest(runId: string): Promise<string | undefined> {
    let after = this.#tails.get(runId)
    for (;;) {
      const page = await this.#log.read(runId, { after, limit: PAGE })
      after = page.at(-1)?.cursor ?? after
      if (page.length < PAGE) break
    }
    if (after !== undefined) this.#tails.set(runId, after)
    return after
  }
}
