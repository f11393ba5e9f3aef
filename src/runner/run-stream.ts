import { CairnError, CheckpointNotFoundError, InvalidArgumentError } from '../core/errors.js'
import type { RunEvent } from '../observe/run-events.js'
import { FINISHED_STATUSES, type RunStore, type StoreReader } from '../store/checkpoint-store.js'

/** What `runner.events` takes. */
export interface RunEventsOptions {
  /** The last cursor the reader saw: the stream starts after it. From the run's first event without it. */
  after?: string | undefined
  /** Ends the stream (it returns, without an error). */
  signal?: AbortSignal | undefined
  /**
   * The longest the stream waits with nothing new from a run that is not finished (its process
   * died and nobody resumed it, say) before it throws a `CairnError` with code `stream_idle`
   * (`run_not_found` for a run that never appeared). Default 10 minutes.
   */
  idleTimeoutMs?: number | undefined
}

/** One event of a durable run stream, with the cursor to reconnect after it. */
export interface StreamedRunEvent {
  cursor: string
  event: RunEvent
}

const PAGE = 500
/** Waits on the log between checks of the run's status: short after an event, then longer. */
const FIRST_WAIT_MS = 250
const LONGEST_WAIT_MS = 2000

/**
 * The events of `runId` from the store's event log after `options.after`, following the run
 * until its `run_finished` (of any state but `error`: a process that stopped driving a run it
 * could not go on with is not the run's end). See `Runner.events`.
 */
export async function* followRun(store: StoreReader & Pick<RunStore, 'events'>, runId: string, options: RunEventsOptions = {}): AsyncGenerator<StreamedRunEvent, void> {
  const log = store.events
  if (!log) {
    throw new InvalidArgumentError(
      `run ${runId}: this store has no event log, so its runs cannot be streamed; use a Cairn store (MemoryStore, FileStore, SqliteStore, PostgresStore), or give this store's events a RunEventLog`,
    )
  }
  const idleMs = options.idleTimeoutMs ?? 600_000
  if (!(Number.isFinite(idleMs) && idleMs > 0)) throw new InvalidArgumentError(`idleTimeoutMs must be a positive number of ms, got ${String(options.idleTimeoutMs)}`)
  let after = options.after
  let seen = after !== undefined
  let idleSince = Date.now()
  let waitMs = FIRST_WAIT_MS
  for (;;) {
    if (options.signal?.aborted) return
    const page = await log.read(runId, { after, limit: PAGE })
    for (const stored of page) {
      after = stored.cursor
      seen = true
      const event = stored.event as unknown as RunEvent
      yield { cursor: stored.cursor, event }
      if (event.type === 'run_finished' && event.state !== 'error') return
    }
    if (page.length === PAGE) continue
    if (page.length > 0) {
      idleSince = Date.now()
      waitMs = FIRST_WAIT_MS
    }
    const more = await log.waitForMore(runId, after, { timeoutMs: Math.min(waitMs, Math.max(1, idleSince + idleMs - Date.now())), signal: options.signal })
    if (more || options.signal?.aborted) continue
    waitMs = Math.min(waitMs * 2, LONGEST_WAIT_MS)
    const run = await store.getRun(runId)
    // A run that does not exist yet may be about to start: it is waited for like a quiet one.
    if (!run && !seen) {
      if (Date.now() - idleSince < idleMs) continue
      throw new CheckpointNotFoundError(`run ${runId} does not exist in this store and no event of it came for ${idleMs} ms; start it first, or check the run id`, { runId, code: 'run_not_found' })
    }
    // A finished run and nothing more for a while: its end was read before `after`, or its
    // events were pruned or written before the log existed, or its process died between the
    // run's last commit and its last append (the wait just now was the grace for that append).
    if (!run || FINISHED_STATUSES.includes(run.status)) {
      // A wait's last check can end past its deadline having looked just before an append: what
      // the log holds now is read before the stream ends, so no event of a finished run is lost.
      if ((await log.read(runId, { after, limit: 1 })).length === 0) return
      continue
    }
    if (Date.now() - idleSince >= idleMs) {
      throw new CairnError('stream_idle', `run ${runId} (${run.status}) has had no new event for ${idleMs} ms; its process may have died: resume it (runner.recoverAll, or a worker), then read again with the last cursor`)
    }
  }
}
