import { describeCheckpoints, expandPhases, runtimeOf, storedIdOf } from '../../engine.js'
import { CheckpointNotFoundError, type CheckpointInfo, type CheckpointRecord, type Message, type RunRecord, type RuntimeSnapshot, type StoreReader, type TimelineEntry } from '../../index.js'

/** Which part of a run's timeline to read: the newest `limit` checkpoints, those before one, or those after a seq. */
export interface PageQuery {
  /**
   * A page (`before`, or neither): the newest stored checkpoints that hold this many phases (their
   * own and their phase logs'; one checkpoint at least, at most `limit` of them). A poll (`after`):
   * at most this many stored checkpoints.
   */
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

/** Header pages read from the store at most, to find a runtime snapshot: beyond, a page goes without tool details. */
const SNAPSHOT_SEARCH_PAGES = 20
const HEADER_PAGE = 200
/** Steps the conversation panel reaches back at least (each step adds a message or more). */
const CONVERSATION_STEPS = 40

/** A stored checkpoint that holds a runtime snapshot, as its header names it. */
interface SnapshotHeader {
  id: string
  seq: number
  step: number
}

/**
 * Reads a run's timeline a page at a time: a page costs its own checkpoints, the effects of its
 * calls and the messages and tool executions of its own steps (read with `loadTails` from the
 * runtime snapshot before the page to the one that describes it), never the whole run. The
 * snapshots a page passes are kept by seq, with the stretches of seqs whose headers have all been
 * read: the search for the snapshot before a page reads headers ahead of it, so the next page
 * (older checkpoints) finds its own among them without reading headers again.
 */
export class TimelinePages {
  readonly #store: StoreReader
  /** Snapshot headers seen, per run, by seq. */
  readonly #snapshots = new Map<string, Map<number, SnapshotHeader>>()
  /** Per run, the stretches of seqs (first and last, oldest first, apart) whose every stored checkpoint's header was seen. */
  readonly #covered = new Map<string, [number, number][]>()
  /** Per run, how many phases each stored checkpoint seen stands for (itself and its phase log), by seq. */
  readonly #phaseCounts = new Map<string, Map<number, number>>()

  constructor(store: StoreReader) {
    this.#store = store
  }

  page(runId: string, query: PageQuery): Promise<TimelinePage> {
    return this.#again(runId, () => this.#page(runId, query))
  }

  /**
   * The newest messages of the run's conversation (at most `limit`) and how many it holds: the
   * newest snapshot read from a snapshot at least {@link CONVERSATION_STEPS} steps older.
   */
  conversation(runId: string, limit: number): Promise<{ messages: Message[]; count: number }> {
    return this.#again(runId, () => this.#conversation(runId, limit))
  }

  /** `read`, and once more after forgetting what was seen of the run if a checkpoint seen before is gone (pruned since). */
  async #again<T>(runId: string, read: () => Promise<T>): Promise<T> {
    try {
      return await read()
    } catch (err) {
      if (!(err instanceof CheckpointNotFoundError) || err.code === 'run_not_found' || !this.#forget(runId)) throw err
      return read()
    }
  }

  async #page(runId: string, query: PageQuery): Promise<TimelinePage> {
    const run = await this.#store.getRun(runId)
    if (!run) throw new CheckpointNotFoundError(`run ${runId} is not in this store; pick one from the list of runs`, { runId, code: 'run_not_found' })
    const { headers, fromStart, gap } = await this.#headers(runId, query)
    this.#see(runId, headers)
    const first = headers[0]
    const base = first && !fromStart ? await this.#snapshotBefore(runId, first) : undefined
    const source = this.#describingSnapshot(runId, headers, base)
    const { records, runtime, messagesFrom } = await this.#load(headers, source, base)
    // Every phase of the page's stored checkpoints: the light ones kept in their phase logs too.
    const phases = records.flatMap((record) => expandPhases(record))
    const attempts = await this.#attempts(runId, runtime, phases)
    const entries = describeCheckpoints(phases, {
      runtime,
      attempts,
      startedAt: fromStart ? (phases[0]?.createdAt ?? run.createdAt) : run.createdAt,
      fromStart,
      ...(first && !fromStart ? { firstIndex: await this.#firstIndex(runId, first) } : {}),
      ...(messagesFrom === undefined ? {} : { messagesFrom }),
    })
    return { run, entries, fromStart, gap }
  }

  async #conversation(runId: string, limit: number): Promise<{ messages: Message[]; count: number }> {
    const newest = await this.#snapshotBefore(runId, undefined)
    if (!newest) return { messages: [], count: 0 }
    let base = newest
    for (let k = 0; k < SNAPSHOT_SEARCH_PAGES && base.step > newest.step - CONVERSATION_STEPS; k++) {
      const older = await this.#snapshotBefore(runId, base)
      if (!older) break
      base = older
    }
    const [tail] = base === newest ? [undefined] : await this.#store.loadTails<Record<string, unknown>>([newest.id], { after: base.id })
    const record = tail?.record ?? (await this.#store.load(newest.id))
    const messages = runtimeOf(record)?.messages ?? []
    const from = tail?.lists.find((list) => isPath(list.path, MESSAGES))?.skipped ?? 0
    return { messages: messages.slice(-limit), count: from + messages.length }
  }

  /** The page's headers, oldest first. */
  async #headers(runId: string, query: PageQuery): Promise<{ headers: CheckpointInfo[]; fromStart: boolean; gap: boolean }> {
    if (query.after === undefined) {
      // A page before a light phase ends before the stored checkpoint that carries it (the page
      // that holds the phase holds that checkpoint).
      const listed = await this.#store.listCheckpoints({ runId, limit: query.limit + 1, ...(query.before === undefined ? {} : { before: storedIdOf(query.before) }) })
      this.#see(runId, listed)
      this.#cover(runId, listed, query.limit + 1)
      // A stored checkpoint stands for the phases of its phase log too: the page takes the newest
      // ones until it holds `limit` phases (one at least), so its size follows what it shows.
      const counts = this.#phaseCounts.get(runId)!
      let taken = 0
      let phases = 0
      while (taken < Math.min(listed.length, query.limit) && (taken === 0 || phases < query.limit)) phases += counts.get(listed[taken++]!.seq)!
      const headers = listed.slice(0, taken)
      return { headers: headers.reverse(), fromStart: headers.length === listed.length, gap: false }
    }
    const newer: CheckpointInfo[] = []
    let before: string | undefined
    for (;;) {
      const listed = await this.#store.listCheckpoints({ runId, limit: HEADER_PAGE, ...(before === undefined ? {} : { before }) })
      this.#see(runId, listed)
      this.#cover(runId, listed, HEADER_PAGE)
      const fresh = listed.filter((info) => info.seq > query.after!)
      newer.push(...fresh)
      if (fresh.length < listed.length || listed.length < HEADER_PAGE || newer.length > query.limit) break
      before = listed.at(-1)!.id
    }
    return { headers: newer.slice(0, query.limit).reverse(), fromStart: query.after === 0 && newer.length <= query.limit, gap: newer.length > query.limit }
  }

  /** Forget what was seen of a run; false when nothing was. */
  #forget(runId: string): boolean {
    const known = this.#snapshots.has(runId) || this.#covered.has(runId)
    this.#snapshots.delete(runId)
    this.#covered.delete(runId)
    this.#phaseCounts.delete(runId)
    return known
  }

  /** Remember the snapshots among `headers`, and how many phases each stands for. */
  #see(runId: string, headers: readonly CheckpointInfo[]): void {
    const seen = this.#snapshots.get(runId) ?? new Map<number, SnapshotHeader>()
    this.#snapshots.set(runId, seen)
    const counts = this.#phaseCounts.get(runId) ?? new Map<number, number>()
    this.#phaseCounts.set(runId, counts)
    for (const info of headers) {
      if (info.kind === RUNNER_KIND && info.metadata.snapshot === true) seen.set(info.seq, { id: info.id, seq: info.seq, step: typeof info.metadata.step === 'number' ? info.metadata.step : 0 })
      counts.set(info.seq, expandPhases(info).length)
    }
  }

  /**
   * The position in the run's whole timeline (1-based, as `cairn show` numbers it) of the first
   * phase of the stored checkpoint `first`: one more than the phases of every stored checkpoint
   * before it. Their headers are read once, the first time a page needs them (a page of a long run
   * costs a header listing of what comes before it); later pages count the headers seen.
   */
  async #firstIndex(runId: string, first: CheckpointInfo): Promise<number> {
    let before: string | undefined = first.id
    while (!this.#covered.get(runId)?.some(([from, to]) => from === 0 && to >= first.seq - 1)) {
      const listed: CheckpointInfo[] = await this.#store.listCheckpoints({ runId, limit: HEADER_PAGE, verify: false, before })
      this.#see(runId, listed)
      this.#cover(runId, listed, HEADER_PAGE)
      if (listed.length < HEADER_PAGE) break
      before = listed.at(-1)!.id
    }
    let phases = 0
    for (const [seq, count] of this.#phaseCounts.get(runId) ?? []) if (seq < first.seq) phases += count
    return phases + 1
  }

  /**
   * The newest snapshot older than `header` (or the run's newest): found among the headers seen
   * when every header between it and `header` has been seen, else read by headers, a bounded search.
   */
  async #snapshotBefore(runId: string, header: { id: string; seq: number } | undefined): Promise<SnapshotHeader | undefined> {
    if (header) {
      const known = this.#seenBefore(runId, header.seq)
      if (known !== 'unknown') return known
    }
    let before = header
    for (let page = 0; page < SNAPSHOT_SEARCH_PAGES; page++) {
      const listed = await this.#store.listCheckpoints({ runId, limit: HEADER_PAGE, verify: false, ...(before === undefined ? {} : { before: before.id }) })
      this.#see(runId, listed)
      // Every header from the oldest listed up to `before` is seen (to the run's start if fewer came).
      this.#cover(runId, listed, HEADER_PAGE, before && before.seq - 1)
      const found = listed.find((info) => info.kind === RUNNER_KIND && info.metadata.snapshot === true)
      if (found) return this.#snapshots.get(runId)!.get(found.seq)
      if (listed.length < HEADER_PAGE) return undefined
      before = listed.at(-1)!
    }
    return undefined
  }

  /**
   * Note that every stored checkpoint of `listed` (headers newest first, as asked with `limit`)
   * and between them has been seen: from the oldest listed (or the run's start, when fewer than
   * `limit` came) to the newest listed, or to `upTo` (the seq just before the listing's cursor).
   */
  #cover(runId: string, listed: readonly CheckpointInfo[], limit: number, upTo?: number): void {
    const newest = upTo ?? listed[0]?.seq
    if (newest === undefined) return
    const from = listed.length < limit ? 0 : listed.at(-1)!.seq
    const stretches = [...(this.#covered.get(runId) ?? []), [from, newest] as [number, number]].sort((a, b) => a[0] - b[0])
    const merged: [number, number][] = []
    for (const [first, last] of stretches) {
      const previous = merged.at(-1)
      if (previous && first <= previous[1] + 1) previous[1] = Math.max(previous[1], last)
      else merged.push([first, last])
    }
    this.#covered.set(runId, merged)
  }

  /**
   * The newest snapshot before `seq` when the headers seen say which it is (undefined: there is
   * none, every header down to the run's start seen without one), else 'unknown'.
   */
  #seenBefore(runId: string, seq: number): SnapshotHeader | undefined | 'unknown' {
    const stretch = this.#covered.get(runId)?.find(([first, last]) => first <= seq - 1 && seq - 1 <= last)
    if (!stretch) return 'unknown'
    let newest: SnapshotHeader | undefined
    for (const snapshot of this.#snapshots.get(runId)?.values() ?? []) {
      if (snapshot.seq >= stretch[0] && snapshot.seq < seq && (!newest || snapshot.seq > newest.seq)) newest = snapshot
    }
    if (newest) return newest
    return stretch[0] === 0 ? undefined : 'unknown'
  }

  /** The snapshot the page is described by: the oldest one seen at or after the page's end, else the newest in it, else `base`. */
  #describingSnapshot(runId: string, headers: readonly CheckpointInfo[], base: SnapshotHeader | undefined): SnapshotHeader | undefined {
    const first = headers[0]
    const last = headers.at(-1)
    if (!first || !last) return base
    const seen = [...(this.#snapshots.get(runId)?.values() ?? [])]
    const after = seen.filter((snapshot) => snapshot.seq >= last.seq).sort((a, b) => a.seq - b.seq)[0]
    const inside = seen.filter((snapshot) => snapshot.seq >= first.seq && snapshot.seq < last.seq).sort((a, b) => b.seq - a.seq)[0]
    return after ?? inside ?? base
  }

  /**
   * The page's stored checkpoints and the runtime describing it: with a snapshot before the page,
   * only the lists' items past it are read; else (the run's first page) the records whole.
   */
  async #load(headers: readonly CheckpointInfo[], source: SnapshotHeader | undefined, base: SnapshotHeader | undefined) {
    const ids = headers.map((info) => info.id)
    const extra = source && !ids.includes(source.id) ? [source.id] : []
    if (base === undefined) {
      const records = await this.#store.loadMany<Record<string, unknown>>([...ids, ...extra])
      const runtime = source && runtimeOf(records.find((record) => record.id === source.id)!)
      return { records: records.slice(0, ids.length), runtime, messagesFrom: undefined }
    }
    const tails = await this.#store.loadTails<Record<string, unknown>>([...ids, ...extra], { after: base.id })
    const described = source && tails.find((tail) => tail.record.id === source.id)
    const runtime = described && runtimeOf(described.record)
    const messagesFrom = described ? (described.lists.find((list) => isPath(list.path, MESSAGES))?.skipped ?? 0) : undefined
    return { records: tails.slice(0, ids.length).map((tail) => tail.record), runtime, messagesFrom }
  }

  /** Attempts of the calls the page's tool batches made, read together (the run's log checked once). */
  async #attempts(runId: string, runtime: RuntimeSnapshot | undefined, records: readonly CheckpointRecord[]): Promise<Map<string, number>> {
    const steps = new Set(records.filter((record) => record.phase === 'post_tool_batch').map((record) => record.metadata.step))
    const calls = (runtime?.tool_executions ?? []).filter((execution) => steps.has(execution.step)).map((execution) => execution.tool_call_id)
    if (calls.length === 0) return new Map()
    const effects = await this.#store.getEffects(runId, calls)
    return new Map(effects.flatMap((effect) => (effect ? [[effect.callId, effect.attempts] as const] : [])))
  }
}

const MESSAGES = ['runtime', 'messages']
/** The kind runner checkpoints are stored under. */
const RUNNER_KIND = 'runner'

function isPath(path: readonly string[], wanted: readonly string[]): boolean {
  return path.length === wanted.length && path.every((key, k) => key === wanted[k])
}

