import { describeCheckpoints, expandPhases, runtimeOf, storedIdOf } from '../../engine.js'
import { CheckpointNotFoundError, type CheckpointInfo, type CheckpointRecord, type RunRecord, type RuntimeSnapshot, type StoreReader, type TimelineEntry } from '../../index.js'

/** Which part of a run's timeline to read: the newest `limit` checkpoints, those before one, or those after a seq. */
export interface PageQuery {
  limit: number
  /** A checkpoint id: the page ends just before it (older checkpoints). */
  before?: string
  /** A seq: the checkpoints after it, newest `limit` of them (what a live view polls for). */
  after?: number
}

/** One page of a run's timeline, oldest first. */
export interface TimelinePage {
  run: RunRecord
  entries: TimelineEntry[]
  /** The page begins at the run's first checkpoint: positions and process numbers count from it. */
  fromStart: boolean
  /** Checkpoints lie between `after` and this page that it does not hold (a live view starts over). */
  gap: boolean
}

/** Pages read from the store at most, to find the newest runtime snapshot: beyond, a page goes without tool details. */
const SNAPSHOT_SEARCH_PAGES = 20
const HEADER_PAGE = 200

/**
 * Reads a run's timeline a page at a time: a page costs its own checkpoints, the effects of its
 * calls and (once per new snapshot) the newest runtime snapshot, never the whole run. The newest
 * snapshot of each run is kept between requests, so a view that polls a finished run reads it
 * once.
 */
export class TimelinePages {
  readonly #store: StoreReader
  readonly #snapshots = new Map<string, { seq: number; runtime: RuntimeSnapshot | undefined }>()

  constructor(store: StoreReader) {
    this.#store = store
  }

  async page(runId: string, query: PageQuery): Promise<TimelinePage> {
    const run = await this.#store.getRun(runId)
    if (!run) throw new CheckpointNotFoundError(`run ${runId} is not in this store; pick one from the list of runs`, { runId, code: 'run_not_found' })
    const { headers, fromStart, gap } = await this.#headers(runId, query)
    // Every phase of the page's stored checkpoints: the light ones kept in their phase logs too.
    const records = (await this.#load(headers)).flatMap((record) => expandPhases(record))
    const runtime = await this.#runtime(runId, records)
    const attempts = await this.#attempts(runId, runtime, records)
    const entries = describeCheckpoints(records, { runtime, attempts, startedAt: fromStart ? (records[0]?.createdAt ?? run.createdAt) : run.createdAt, fromStart })
    return { run, entries, fromStart, gap }
  }

  /** The newest runtime snapshot of the run as last read (for the conversation panel). */
  async runtime(runId: string): Promise<RuntimeSnapshot | undefined> {
    return this.#runtime(runId, [])
  }

  /** The page's headers, oldest first. */
  async #headers(runId: string, query: PageQuery): Promise<{ headers: CheckpointInfo[]; fromStart: boolean; gap: boolean }> {
    if (query.after === undefined) {
      // A page before a light phase ends before the stored checkpoint that carries it (the page
      // that holds the phase holds that checkpoint).
      const listed = await this.#store.listCheckpoints({ runId, limit: query.limit + 1, ...(query.before === undefined ? {} : { before: storedIdOf(query.before) }) })
      return { headers: listed.slice(0, query.limit).reverse(), fromStart: listed.length <= query.limit, gap: false }
    }
    const newer: CheckpointInfo[] = []
    let before: string | undefined
    for (;;) {
      const listed = await this.#store.listCheckpoints({ runId, limit: HEADER_PAGE, ...(before === undefined ? {} : { before }) })
      const fresh = listed.filter((info) => info.seq > query.after!)
      newer.push(...fresh)
      if (fresh.length < listed.length || listed.length < HEADER_PAGE || newer.length > query.limit) break
      before = listed.at(-1)!.id
    }
    return { headers: newer.slice(0, query.limit).reverse(), fromStart: query.after === 0 && newer.length <= query.limit, gap: newer.length > query.limit }
  }

  async #load(headers: readonly CheckpointInfo[]): Promise<CheckpointRecord<Record<string, unknown>>[]> {
    const ids = headers.map((info) => info.id)
    if (this.#store.loadMany) return this.#store.loadMany<Record<string, unknown>>(ids)
    return Promise.all(ids.map((id) => this.#store.load<Record<string, unknown>>(id)))
  }

  /**
   * The newest runtime snapshot: the newest one among the page's records when it is newer than
   * the one kept, else the kept one when the page holds nothing newer than it, else the newest
   * one the store holds (found by its header, read alone).
   */
  async #runtime(runId: string, records: readonly CheckpointRecord[]): Promise<RuntimeSnapshot | undefined> {
    const kept = this.#snapshots.get(runId)
    const inPage = records.findLast((record) => runtimeOf(record) !== undefined)
    if (inPage && (!kept || inPage.seq >= kept.seq)) return this.#keep(runId, inPage.seq, runtimeOf(inPage))
    const newest = records.at(-1)?.seq ?? Infinity
    if (kept && (kept.seq >= newest || records.length === 0)) return kept.runtime
    let before: string | undefined
    for (let page = 0; page < SNAPSHOT_SEARCH_PAGES; page++) {
      const listed = await this.#store.listCheckpoints({ runId, limit: HEADER_PAGE, ...(before === undefined ? {} : { before }) })
      if (kept && listed[0] && listed[0].seq <= kept.seq) return kept.runtime
      const found = listed.find((info) => info.metadata.snapshot === true && (!kept || info.seq > kept.seq))
      if (found) return this.#keep(runId, found.seq, runtimeOf(await this.#store.load(found.id)))
      if (listed.length < HEADER_PAGE) break
      before = listed.at(-1)!.id
    }
    return kept?.runtime
  }

  #keep(runId: string, seq: number, runtime: RuntimeSnapshot | undefined): RuntimeSnapshot | undefined {
    this.#snapshots.set(runId, { seq, runtime })
    return runtime
  }

  /** Attempts of the calls the page's tool batches made, read one effect at a time. */
  async #attempts(runId: string, runtime: RuntimeSnapshot | undefined, records: readonly CheckpointRecord[]): Promise<Map<string, number>> {
    const steps = new Set(records.filter((record) => record.phase === 'post_tool_batch').map((record) => record.metadata.step))
    const calls = (runtime?.tool_executions ?? []).filter((execution) => steps.has(execution.step)).map((execution) => execution.tool_call_id)
    const effects = await Promise.all(calls.map((callId) => this.#store.getEffect(runId, callId)))
    return new Map(effects.flatMap((effect) => (effect ? [[effect.callId, effect.attempts] as const] : [])))
  }
}
