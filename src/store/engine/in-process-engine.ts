import type { ListRunsQuery } from '../checkpoint-store.js'
import type { TableLeases } from '../leases/lease-table.js'
import type { CheckpointListing, CommitRequest, CommitResult, ListRange, RewriteRequest, RunLoad, StorageEngine } from './storage-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, EffectRow, PendingWriteRow, RunChanged, RunPatch, RunRow } from './rows.js'
import { checkCommit, effectWrites } from './commit-checks.js'
import { retainedListLengths } from './list-retention.js'
import { compareCheckpointsNewestFirst, compareRunsNewestFirst, page, statusMatches } from './row-order.js'
import { applyRunPatch, RUN_CHANGED, swapFails } from './run-patch.js'

/** One run as an engine that keeps its runs in process memory holds it: its row and everything stored under it. */
export interface RunState {
  readonly runId: string
  row: RunRow | undefined
  /** Why the run cannot be used (a damaged file): thrown by every call that needs the run. */
  error?: Error | undefined
  /** Checkpoints by ascending seq; an unreadable one (see {@link unreadableRow}) has its ids and seq only. */
  checkpoints: CheckpointRow[]
  byId: Map<string, CheckpointRow>
  lists: Map<string, string[]>
  effects: Map<string, EffectRow>
  /** Pending writes by checkpoint, then by `[taskId, idx]`. */
  writes: Map<string, Map<string, PendingWriteRow>>
}

/**
 * One change of a run, applied to its {@link RunState} by {@link applyChange} (the file store
 * writes each as a frame of the run's log, hence the short keys). Its fields, each optional, are
 * applied in this order:
 *
 * - `r`: the run row as it is after the change
 * - `a`: list appends, `[listId, from, items]`
 * - `x`: the run's effects were deleted; `e`: effect rows as they are after the change
 * - `w`: pending writes
 * - `c`: checkpoint rows, in seq order
 */
export interface RunChange {
  r?: RunRow
  a?: [string, number, string[]][]
  x?: 1
  e?: EffectRow[]
  w?: PendingWriteRow[]
  c?: CheckpointRow[]
}

/** The state of a run with nothing stored. */
export function emptyRunState(runId: string): RunState {
  return { runId, row: undefined, checkpoints: [], byId: new Map(), lists: new Map(), effects: new Map(), writes: new Map() }
}

/** Apply one change to a run's state. */
export function applyChange(state: RunState, change: RunChange): void {
  if (change.r) state.row = { ...change.r, seal: change.r.seal ?? null, digest: change.r.digest ?? null }
  for (const [listId, from, items] of change.a ?? []) {
    const list = state.lists.get(listId) ?? []
    // A gap (a damaged frame's items are missing) is filled with items that fail every check.
    while (list.length < from) list.push('')
    list.length = from
    list.push(...items)
    state.lists.set(listId, list)
  }
  if (change.x) state.effects.clear()
  for (const effect of change.e ?? []) state.effects.set(effect.callId, effect)
  for (const write of change.w ?? []) putWrite(state, write)
  for (const row of change.c ?? []) addCheckpoint(state, row)
}

const unreadable = new WeakSet<CheckpointRow>()

/**
 * The row of a checkpoint whose contents could not be read (a damaged frame of a file store's log):
 * its ids and seq only. It is listed whatever a listing's filter, never rewritten, and read back
 * as a row `EngineStore` refuses, so the checkpoint is reported corrupt rather than absent.
 */
export function unreadableRow(runId: string, id: string, seq: number): CheckpointRow {
  const row = { id, runId, seq } as CheckpointRow
  unreadable.add(row)
  return row
}

/**
 * A {@link StorageEngine} over runs kept as {@link RunState}s in process memory: every query and
 * change of the rows, over the storage a subclass gives it (the memory engine: maps; the file
 * engine: a log per run, folded into its state). A change is made as a {@link RunChange} handed
 * to {@link store}, or by changing the state in place and handing it to {@link storeWhole}.
 */
export abstract class InProcessEngine<S extends RunState = RunState> implements StorageEngine {
  /** The lease protocol; a commit checks its fence against the table. */
  abstract readonly leases: TableLeases

  /** The run's state for a read (empty when the run has nothing stored); throws the run's `error`. */
  protected abstract read(runId: string): Promise<S>
  /** Every run's state, for a query across runs. */
  protected abstract allRuns(): Promise<S[]>
  /** The run holding a checkpoint. */
  protected abstract find(checkpointId: string): Promise<S | undefined>
  /** `fn` with the run's state, with no other write of the run in between; throws the run's `error`. */
  protected abstract write<T>(runId: string, fn: (state: S) => Promise<T>): Promise<T>
  /**
   * `fn`, unless one of these checkpoint ids is taken by any run (or claimed by a commit in
   * progress): then `'taken'`. The ids stay claimed until `fn` settles.
   */
  protected abstract claimIds<T>(checkpointIds: readonly string[], fn: () => Promise<T>): Promise<T | 'taken'>
  /** Store a change of the run and apply it to `state`; `sync`: durable before this returns. */
  protected abstract store(state: S, change: RunChange, sync: boolean): Promise<void>
  /** Store the run as `state` holds it now, after checkpoints were removed or records rewritten in place. */
  protected abstract storeWhole(state: S): Promise<void>

  abstract deleteRun(runId: string): Promise<boolean>
  abstract getKeyCheck(keyId: string): Promise<string | undefined>
  abstract putKeyCheck(keyId: string, value: string): Promise<string>
  abstract close(): Promise<void>

  async insertRun(row: RunRow): Promise<boolean> {
    return this.write(row.runId, async (state) => {
      if (state.row) return false
      await this.store(state, { r: { ...row } }, true)
      return true
    })
  }

  async getRun(runId: string): Promise<RunRow | undefined> {
    const row = (await this.read(runId)).row
    return row && { ...row }
  }

  async listRuns(query: ListRunsQuery): Promise<RunRow[]> {
    const rows: RunRow[] = []
    for (const state of await this.allRuns()) {
      if (state.error) throw state.error
      if (state.row) rows.push(state.row)
    }
    const matches = (run: RunRow) =>
      statusMatches(run.status, query.status) && (query.workflowName === undefined || run.workflowName === query.workflowName) && (query.threadId === undefined || run.threadId === query.threadId)
    return page(rows.filter(matches).sort(compareRunsNewestFirst), (run) => run.runId, query.before, query.limit).map((run) => ({ ...run }))
  }

  async updateRun(runId: string, patch: RunPatch): Promise<RunRow | RunChanged | undefined> {
    return this.write(runId, async (state) => {
      if (!state.row) return undefined
      if (swapFails(state.row, patch.swap)) return RUN_CHANGED
      await this.store(state, { r: applyRunPatch(state.row, patch) }, true)
      return { ...state.row }
    })
  }

  /** One change of the run; a fence is checked first, under the run's lock (a claim skips a locked run). */
  async commit(request: CommitRequest): Promise<CommitResult> {
    const { rows, run, fence } = request
    const leases = fence && (await this.leases.table())
    return this.write(run.runId, async (state) => {
      const held = fence && leases?.check(fence)
      if (held && !held.held) return { ok: false, reason: 'fenced' }
      const outcome = await this.claimIds(rows.map((row) => row.id), () => this.#commitTo(state, request))
      if (outcome === 'taken') return { ok: false, reason: 'duplicate_id' }
      if (outcome.ok && held?.cancelRequested) return { ok: true, cancelRequested: true }
      return outcome
    })
  }

  /** Check a commit against the run's state and store its change (ids checked and claimed). */
  async #commitTo(state: S, request: CommitRequest): Promise<CommitResult> {
    const { rows, appends, run, effects, runPatch } = request
    const refused = checkCommit(request, {
      lastSeq: state.row?.lastSeq ?? 0,
      hasCheckpoint: () => false,
      listLength: (listId) => state.lists.get(listId)?.length ?? 0,
      effectStatus: (callId) => state.effects.get(callId)?.status,
    })
    if (refused) return refused
    if (runPatch && swapFails(state.row ?? run, runPatch.swap)) return { ok: false, reason: 'run_changed' }
    const changed = effectWrites(run.runId, effects, (callId) => state.effects.get(callId))
    let row: RunRow = state.row ?? { ...run, seal: run.seal ?? null, digest: run.digest ?? null }
    const last = rows[rows.length - 1]
    if (last) row = { ...row, lastSeq: last.seq, updatedAt: Math.max(row.updatedAt, ...rows.map((cp) => cp.createdAt)), seal: run.seal ?? null }
    if (runPatch) row = applyRunPatch(row, runPatch)
    const change: RunChange = { r: row }
    if (appends.length > 0) change.a = appends.map((append) => [append.listId, append.expectedLength, [...append.items]])
    if (changed.size > 0) change.e = [...changed.values()]
    if (rows.length > 0) change.c = rows.map((cp) => ({ ...cp }))
    await this.store(state, change, request.durability !== 'async')
    return { ok: true }
  }

  async getCheckpoints(checkpointIds: readonly string[]): Promise<CheckpointRow[]> {
    const rows: CheckpointRow[] = []
    for (const id of checkpointIds) {
      // An unreadable checkpoint comes back as a row EngineStore rejects: it must not look absent.
      const row = (await this.find(id))?.byId.get(id)
      if (row) rows.push({ ...row })
    }
    return rows
  }

  async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    const row =
      'runId' in query
        ? (await this.read(query.runId)).checkpoints.at(-1)
        : (await this.allRuns()).flatMap((state) => state.checkpoints.filter((cp) => !unreadable.has(cp) && cp.workflowName === query.workflowName)).sort(compareCheckpointsNewestFirst)[0]
    return row && { ...row }
  }

  async listCheckpoints(query: CheckpointListing): Promise<CheckpointHeaderRow[]> {
    // An unreadable checkpoint is listed (as a row EngineStore refuses), whatever the filter: never skipped.
    const matches = (row: CheckpointRow) => query.workflowName === undefined || unreadable.has(row) || row.workflowName === query.workflowName
    const rows =
      query.runId !== undefined
        ? (await this.read(query.runId)).checkpoints.filter(matches).reverse()
        : (await this.allRuns()).flatMap((state) => state.checkpoints.filter(matches)).sort(compareCheckpointsNewestFirst)
    return page(rows, (row) => row.id, query.before, query.limit).map(query.rows === true ? (row) => ({ ...row }) : header)
  }

  async readLists(runId: string, ranges: readonly ListRange[]): Promise<string[][]> {
    const state = await this.read(runId)
    return ranges.map((range) => (state.lists.get(range.id) ?? []).slice(range.from ?? 0, range.n))
  }

  async loadRun(runId: string, { recent }: { recent: number }): Promise<RunLoad> {
    const state = await this.read(runId)
    const newest = state.checkpoints.slice(-recent).reverse()
    const wanted = retainedListLengths(newest.map(listsOf)) ?? retainedListLengths([])!
    const lists = [...wanted].flatMap(([id, n]) => {
      const items = state.lists.get(id)
      return items && items.length > 0 ? [{ id, items: items.slice(0, n) }] : []
    })
    return { run: state.row && { ...state.row }, checkpoints: newest.map((row) => ({ ...row })), lists }
  }

  async deleteCheckpoints(runId: string, checkpointIds: readonly string[]): Promise<number> {
    return this.write(runId, async (state) => {
      const doomed = new Set(checkpointIds)
      const remaining = state.checkpoints.filter((row) => !doomed.has(row.id))
      const deleted = state.checkpoints.length - remaining.length
      if (deleted === 0 && !checkpointIds.some((id) => state.writes.has(id))) return 0
      for (const id of doomed) state.writes.delete(id)
      for (const row of state.checkpoints) if (doomed.has(row.id)) state.byId.delete(row.id)
      state.checkpoints = remaining
      const keep = retainedListLengths(remaining.map(listsOf))
      if (keep) {
        for (const [listId, items] of [...state.lists]) {
          const n = keep.get(listId) ?? 0
          if (n === 0) state.lists.delete(listId)
          else items.length = Math.min(items.length, n)
        }
      }
      await this.storeWhole(state)
      return deleted
    })
  }

  async listEffects(runId: string, callIds?: readonly string[]): Promise<EffectRow[]> {
    const only = callIds && new Set(callIds)
    const rows = [...(await this.read(runId)).effects.values()].filter((row) => !only || only.has(row.callId))
    return rows.sort((a, b) => a.startedAt - b.startedAt).map((row) => ({ ...row }))
  }

  async deleteEffects(runId: string): Promise<number> {
    return this.write(runId, async (state) => {
      const deleted = state.effects.size
      if (deleted > 0) await this.store(state, { x: 1 }, true)
      return deleted
    })
  }

  async putWrites(rows: readonly PendingWriteRow[]): Promise<void> {
    for (const runId of new Set(rows.map((row) => row.runId))) {
      await this.write(runId, async (state) => {
        // Only what changes the state is stored: a retried task's first writes stay. The probe copies
        // the writes of the checkpoints these rows name, not the run's: a put costs its own rows.
        const probe = { writes: new Map<string, Map<string, PendingWriteRow>>() }
        for (const row of rows) {
          const held = state.writes.get(row.checkpointId)
          if (held && !probe.writes.has(row.checkpointId)) probe.writes.set(row.checkpointId, new Map(held))
        }
        const changing = rows.filter((row) => row.runId === runId && putWrite(probe, row)).map((row) => ({ ...row }))
        if (changing.length > 0) await this.store(state, { w: changing }, true)
      })
    }
  }

  async listWrites(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRow[]> {
    const state = await this.read(runId)
    return checkpointIds.flatMap((id) => [...(state.writes.get(id)?.values() ?? [])].map((row) => ({ ...row })))
  }

  async rewrite(request: RewriteRequest): Promise<void> {
    await this.write(request.runId, async (state) => {
      for (const { id, body, lists, digest } of request.checkpoints) {
        const row = state.byId.get(id)
        if (!row || unreadable.has(row)) continue
        const updated = { ...row, body, lists, digest }
        state.byId.set(id, updated)
        state.checkpoints[state.checkpoints.indexOf(row)] = updated
      }
      for (const { listId, idx, item } of request.items) {
        const items = state.lists.get(listId)
        if (items && idx < items.length) items[idx] = item
      }
      for (const { callId, inputHash, output, outputHash } of request.effects) {
        const row = state.effects.get(callId)
        if (row) state.effects.set(callId, { ...row, inputHash, output, outputHash })
      }
      await this.storeWhole(state)
    })
  }
}

/** Store a pending write: the first of a key with `idx >= 0` wins, a special write (`idx < 0`) replaces. */
function putWrite(state: Pick<RunState, 'writes'>, row: PendingWriteRow): boolean {
  const writes = state.writes.get(row.checkpointId) ?? new Map<string, PendingWriteRow>()
  state.writes.set(row.checkpointId, writes)
  const key = JSON.stringify([row.taskId, row.idx])
  if (row.idx >= 0 && writes.has(key)) return false
  writes.set(key, row)
  return true
}

function addCheckpoint(state: RunState, row: CheckpointRow): void {
  const last = state.checkpoints.at(-1)
  state.checkpoints.push(row)
  // Only a damaged log puts seqs out of order; keep the listing sorted anyway.
  if (last && last.seq >= row.seq) state.checkpoints.sort((a, b) => a.seq - b.seq)
  state.byId.set(row.id, row)
}

/** A listing's row without its contents. */
function header(row: CheckpointRow): CheckpointHeaderRow {
  const { body: _body, lists: _lists, digest: _digest, ...rest } = row
  return rest
}

/** A row's list refs for `retainedListLengths`; an unreadable row's are unknown, which keeps every item. */
function listsOf(row: CheckpointRow): { lists: string } {
  return { lists: unreadable.has(row) ? '' : row.lists }
}
