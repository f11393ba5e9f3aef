import {
  applyRunPatch,
  RUN_CHANGED,
  swapFails,
  checkCommit,
  effectWrites,
  compareCheckpointsNewestFirst,
  compareRunsNewestFirst,
  page,
  retainedListLengths,
  statusMatches,
  type CheckpointHeaderRow,
  type CheckpointListing,
  type CheckpointRow,
  type CommitRequest,
  type CommitResult,
  type EffectRow,
  type LeaseEngine,
  type ListRange,
  type ListRunsQuery,
  type RunChanged,
  type RunLoad,
  type RunPatch,
  type RunRow,
  type StorageEngine,
} from 'cairn-agents/engine'
import { databaseAt, key, type KvDatabase } from './kv-database.js'
import { kvLeases } from './kv-leases.js'

/**
 * A storage engine written the way a third party would: against `cairn-agents/engine` only, over a
 * key-value map of JSON texts. Not shipped; the engine conformance suite runs against it.
 */
export class KvEngine implements StorageEngine {
  readonly #db: KvDatabase
  readonly leases: LeaseEngine

  constructor(location: string) {
    this.#db = databaseAt(location)
    this.leases = kvLeases(this.#db)
  }

  async insertRun(row: RunRow): Promise<boolean> {
    if (this.#db.get(key.run(row.runId))) return false
    this.#db.set(key.run(row.runId), row)
    return true
  }

  async getRun(runId: string): Promise<RunRow | undefined> {
    return this.#db.get<RunRow>(key.run(runId))
  }

  async listRuns(query: ListRunsQuery): Promise<RunRow[]> {
    const runs = this.#db
      .scan<RunRow>(key.run(''))
      .map(([, run]) => run)
      .filter((run) => statusMatches(run.status, query.status))
      .filter((run) => (query.workflowName === undefined || run.workflowName === query.workflowName) && (query.threadId === undefined || run.threadId === query.threadId))
    return page(runs.sort(compareRunsNewestFirst), (run) => run.runId, query.before, query.limit)
  }

  async updateRun(runId: string, patch: RunPatch): Promise<RunRow | RunChanged | undefined> {
    const run = this.#db.get<RunRow>(key.run(runId))
    if (!run) return undefined
    if (swapFails(run, patch.swap)) return RUN_CHANGED
    const next = applyRunPatch(run, patch)
    this.#db.set(key.run(runId), next)
    return next
  }

  async deleteRun(runId: string): Promise<boolean> {
    if (!this.#db.delete(key.run(runId))) return false
    this.#db.leases.delete(runId)
    for (const id of this.#history(runId)) this.#db.delete(key.checkpoint(id))
    this.#db.delete(key.history(runId))
    for (const [k] of [...this.#db.scan(key.lists(runId)), ...this.#db.scan(key.effects(runId))]) this.#db.delete(k)
    return true
  }

  async commit(request: CommitRequest): Promise<CommitResult> {
    const { rows, appends, run, effects, runPatch, fence } = request
    const lease = fence && this.#db.leases.check(fence)
    if (lease && !lease.held) return { ok: false, reason: 'fenced' }
    const stored = this.#db.get<RunRow>(key.run(run.runId))
    const effect = (callId: string) => this.#db.get<EffectRow>(key.effect(run.runId, callId))
    const refused = checkCommit(request, {
      lastSeq: stored?.lastSeq ?? 0,
      hasCheckpoint: (id) => this.#db.get(key.checkpoint(id)) !== undefined,
      listLength: (listId) => this.#list(run.runId, listId).length,
      effectStatus: (callId) => effect(callId)?.status,
    })
    if (refused) return refused
    if (runPatch && swapFails(stored ?? run, runPatch.swap)) return { ok: false, reason: 'run_changed' }
    for (const append of appends) this.#db.set(key.list(run.runId, append.listId), [...this.#list(run.runId, append.listId), ...append.items])
    let next: RunRow = stored ?? run
    for (const row of rows) {
      this.#db.set(key.checkpoint(row.id), row)
      // The run's progress digest (or signature) moves with its last seq.
      next = { ...next, lastSeq: row.seq, seal: run.seal ?? null, updatedAt: Math.max(next.updatedAt, row.createdAt) }
    }
    this.#db.set(key.history(run.runId), [...this.#history(run.runId), ...rows.map((row) => row.id)])
    this.#db.set(key.run(run.runId), runPatch ? applyRunPatch(next, runPatch) : next)
    for (const [callId, row] of effectWrites(run.runId, effects, effect)) this.#db.set(key.effect(run.runId, callId), row)
    return lease?.cancelRequested ? { ok: true, cancelRequested: true } : { ok: true }
  }

  async getCheckpoints(checkpointIds: readonly string[]): Promise<CheckpointRow[]> {
    return checkpointIds.flatMap((id) => this.#db.get<CheckpointRow>(key.checkpoint(id)) ?? [])
  }

  async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    if ('runId' in query) {
      const last = this.#history(query.runId).at(-1)
      return last === undefined ? undefined : this.#db.get<CheckpointRow>(key.checkpoint(last))
    }
    return this.#checkpoints().filter((row) => row.workflowName === query.workflowName).sort(compareCheckpointsNewestFirst)[0]
  }

  async listCheckpoints(query: CheckpointListing): Promise<CheckpointHeaderRow[]> {
    const rows =
      query.runId !== undefined
        ? this.#history(query.runId).reverse().map((id) => this.#db.get<CheckpointRow>(key.checkpoint(id))!)
        : this.#checkpoints().sort(compareCheckpointsNewestFirst)
    const matching = rows.filter((row) => query.workflowName === undefined || row.workflowName === query.workflowName)
    const listed = page(matching, (row) => row.id, query.before, query.limit)
    return query.rows === true ? listed : listed.map(({ body: _body, lists: _lists, digest: _digest, ...header }) => header)
  }

  async readLists(runId: string, ranges: readonly ListRange[]): Promise<string[][]> {
    return ranges.map((range) => this.#list(runId, range.id).slice(range.from ?? 0, range.n))
  }

  async loadRun(runId: string, { recent }: { recent: number }): Promise<RunLoad> {
    const checkpoints = this.#history(runId).slice(-recent).reverse().map((id) => this.#db.get<CheckpointRow>(key.checkpoint(id))!)
    const lists = [...(retainedListLengths(checkpoints) ?? retainedListLengths([])!)].map(([id, n]) => ({ id, items: this.#list(runId, id).slice(0, n) }))
    return { run: await this.getRun(runId), checkpoints, lists }
  }

  async deleteCheckpoints(runId: string, checkpointIds: readonly string[]): Promise<number> {
    const doomed = new Set(checkpointIds)
    const history = this.#history(runId)
    const remaining = history.filter((id) => !doomed.has(id))
    for (const id of history) if (doomed.has(id)) this.#db.delete(key.checkpoint(id))
    this.#db.set(key.history(runId), remaining)
    // The published helper reads the remaining rows' list refs: how much of each list to keep.
    const keep = retainedListLengths(remaining.map((id) => this.#db.get<CheckpointRow>(key.checkpoint(id))!))
    if (keep) {
      for (const [k, items] of this.#db.scan<string[]>(key.lists(runId))) {
        const n = keep.get(k.slice(key.lists(runId).length)) ?? 0
        if (n === 0) this.#db.delete(k)
        else this.#db.set(k, items.slice(0, n))
      }
    }
    return history.length - remaining.length
  }

  async listEffects(runId: string, callIds?: readonly string[]): Promise<EffectRow[]> {
    return this.#db
      .scan<EffectRow>(key.effects(runId))
      .map(([, row]) => row)
      .filter((row) => callIds === undefined || callIds.includes(row.callId))
      .sort((a, b) => a.startedAt - b.startedAt)
  }

  async deleteEffects(runId: string): Promise<number> {
    const rows = this.#db.scan<EffectRow>(key.effects(runId))
    for (const [k] of rows) this.#db.delete(k)
    return rows.length
  }

  async close(): Promise<void> {}

  #history(runId: string): string[] {
    return this.#db.get<string[]>(key.history(runId)) ?? []
  }

  #list(runId: string, listId: string): string[] {
    return this.#db.get<string[]>(key.list(runId, listId)) ?? []
  }

  #checkpoints(): CheckpointRow[] {
    return this.#db.scan<CheckpointRow>(key.checkpoint('')).map(([, row]) => row)
  }
}
