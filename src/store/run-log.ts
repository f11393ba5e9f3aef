import { StoreError } from '../core/errors.js'
import type { EngineCall } from './checkpoint-reads.js'
import type { ListAppend } from './engine/rows.js'
import type { CommitRequest, StorageEngine } from './engine/storage-engine.js'
import { commitRunRow } from './encoding/run-rows.js'
import { RUN_LOG_LIST } from './engine/list-retention.js'
import { checkEffectsAgainstLog, checkStatusAgainstLog, parseRunLogEntry, type RunLogEntry } from './encoding/rollback.js'

/** Most attempts of a log append that meets a concurrent writer's. */
const APPEND_ATTEMPTS = 5
/** Most runs whose log length a store remembers; the oldest is forgotten first (and read again when needed). */
const REMEMBERED_RUNS = 10_000

/**
 * A run's log, an append-only list ({@link RUN_LOG_LIST}) of the run's state transitions that a
 * single row cannot undo. Its items are JSON `RunLogEntry`s, written with the change they record
 * (an effect marked started or finished, a status set in a commit) or just after it (a status
 * set by the lease protocol or `updateRun`); engines keep it whole when checkpoints are deleted.
 *
 * It is the evidence that single-row rollbacks are checked against: an effect row put
 * back to `pending` or deleted, a run row put back over a cancel or a completion. The log lives
 * in another table (or file) than the rows it vouches for, and it only grows, so putting one row
 * back leaves the log ahead of it. It needs no key: a keyed store checks the same way (and
 * reports a refusal as an integrity failure). Forging an entry can only make a run refused,
 * never make a call run again.
 */
export class RunLog {
  readonly #engine: StorageEngine
  readonly #call: EngineCall
  /** Each run's log length as this store last wrote or read it. */
  readonly #lengths = new Map<string, number>()

  constructor(engine: StorageEngine, call: EngineCall) {
    this.#engine = engine
    this.#call = call
  }

  /** The run's log entries, oldest first. */
  async read(runId: string): Promise<RunLogEntry[]> {
    const [items = []] = await this.#call(runId, 'read the run log', () => this.#engine.readLists(runId, [{ id: RUN_LOG_LIST, n: Number.MAX_SAFE_INTEGER }]))
    this.remember(runId, items.length)
    return items.map((item) => parseRunLogEntry(runId, item))
  }

  /** The append of `entries` that goes with a commit, or undefined when there are none. */
  async appendFor(runId: string, entries: readonly RunLogEntry[]): Promise<ListAppend | undefined> {
    if (entries.length === 0) return undefined
    const expectedLength = this.#lengths.get(runId) ?? (await this.read(runId)).length
    return { listId: RUN_LOG_LIST, expectedLength, items: entries.map((entry) => JSON.stringify(entry)) }
  }

  /** A commit carrying `append` succeeded. */
  committed(runId: string, append: ListAppend | undefined): void {
    if (append) this.remember(runId, append.expectedLength + append.items.length)
  }

  /** The run's log holds `length` entries (as read or written now). */
  remember(runId: string, length: number): void {
    this.#lengths.delete(runId)
    this.#lengths.set(runId, length)
    if (this.#lengths.size > REMEMBERED_RUNS) this.#lengths.delete(this.#lengths.keys().next().value!)
  }

  /** Forget the length known of a run's log (a commit met a conflict, or the run was deleted). */
  forget(runId: string): void {
    this.#lengths.delete(runId)
  }

  /**
   * Append entries in a commit of their own, after the change they record was made elsewhere
   * (the lease protocol's status changes). A crash in between leaves the log behind, which only
   * forgets a transition; it never refuses a run that was not rolled back.
   */
  async append(runId: string, entries: readonly RunLogEntry[]): Promise<void> {
    for (let attempt = 1; attempt <= APPEND_ATTEMPTS; attempt++) {
      const append = await this.appendFor(runId, entries)
      if (!append) return
      const request: CommitRequest = { rows: [], appends: [append], run: commitRunRow(runId, null, Date.now(), 0) }
      const result = await this.#call(runId, 'append to the run log', () => this.#engine.commit(request))
      if (result.ok) return this.committed(runId, append)
      this.forget(runId)
      if (result.reason !== 'list_conflict') break
    }
    throw new StoreError(`run ${runId}: its log could not be appended to (concurrent writers kept getting in first); the change was made, try the next one again`, { runId })
  }

  /** Refuse the run's effects when its log says one of them went further than its row (see `checkEffectsAgainstLog`). */
  async checkEffects<T extends { callId: string; status: string }>(runId: string, readEffects: () => Promise<T[]>, only?: string | ReadonlySet<string>): Promise<T[]> {
    // The log first: every entry in it was committed with its effect's change, so effects read after it are at least that far.
    const log = await this.read(runId)
    const effects = await readEffects()
    checkEffectsAgainstLog(runId, log, effects, only)
    return effects
  }

  /** Refuse a run row whose status its log says was settled otherwise (see `checkStatusAgainstLog`). */
  async checkStatus(runId: string, status: string): Promise<void> {
    checkStatusAgainstLog(runId, await this.read(runId), status)
  }
}

/** The log entries of a commit's effect starts and outcomes and its status change. */
export function entriesOf(request: { effects?: CommitRequest['effects']; runPatch?: CommitRequest['runPatch'] | undefined }): RunLogEntry[] {
  const entries: RunLogEntry[] = []
  for (const callId of request.effects?.starts ?? []) entries.push(['started', callId])
  for (const completion of request.effects?.completions ?? []) entries.push(['finished', completion.callId])
  if (request.runPatch?.status !== undefined) entries.push(['status', request.runPatch.status])
  return entries
}
