import {
  applyRunPatch,
  firstNotPending,
  compareCheckpointsNewestFirst,
  compareRunsNewestFirst,
  page,
  retainedListLengths,
  statusMatches,
  type CheckpointHeaderRow,
  type CheckpointRow,
  type CommitRequest,
  type CommitResult,
  type EffectCompletionRow,
  type EffectRow,
  type LeaseEngine,
  type ListCheckpointsQuery,
  type ListRef,
  type ListRunsQuery,
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

  async updateRun(runId: string, patch: RunPatch): Promise<RunRow | undefined> {
    const run = this.#db.get<RunRow>(key.run(runId))
    if (!run) return undefined
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
    const lastSeq = stored?.lastSeq ?? 0
    if (rows.some((row) => this.#db.get(key.checkpoint(row.id)))) return { ok: false, reason: 'duplicate_id' }
    if (rows[0] && rows[0].seq <= lastSeq) return { ok: false, reason: 'stale_seq', lastSeq }
    if (appends.some((append) => this.#list(run.runId, append.listId).length !== append.expectedLength)) return { ok: false, reason: 'list_conflict' }
    const notPending = firstNotPending(effects, (callId) => this.#db.get<EffectRow>(key.effect(run.runId, callId))?.status)
    if (notPending) return notPending
    for (const append of appends) this.#db.set(key.list(run.runId, append.listId), [...this.#list(run.runId, append.listId), ...append.items])
    let next: RunRow = stored ?? run
    for (const row of rows) {
      this.#db.set(key.checkpoint(row.id), row)
      // The run's progress digest (or signature) moves with its last seq.
      next = { ...next, lastSeq: row.seq, seal: run.seal ?? null, updatedAt: Math.max(next.updatedAt, row.createdAt) }
    }
    this.#db.set(key.history(run.runId), [...this.#history(run.runId), ...rows.map((row) => row.id)])
    this.#db.set(key.run(run.runId), runPatch ? applyRunPatch(next, runPatch) : next)
    for (const intent of effects?.intents ?? []) this.#recordIntent(intent)
    for (const callId of effects?.starts ?? []) this.#start(run.runId, callId)
    for (const completion of effects?.completions ?? []) this.#complete(completion)
    return lease?.cancelRequested ? { ok: true, cancelRequested: true } : { ok: true }
  }

  async getCheckpoint(checkpointId: string): Promise<CheckpointRow | undefined> {
    return this.#db.get<CheckpointRow>(key.checkpoint(checkpointId))
  }

  async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    if ('runId' in query) {
      const last = this.#history(query.runId).at(-1)
      return last === undefined ? undefined : this.getCheckpoint(last)
    }
    return this.#checkpoints().filter((row) => row.workflowName === query.workflowName).sort(compareCheckpointsNewestFirst)[0]
  }

  async listCheckpoints(query: ListCheckpointsQuery): Promise<CheckpointHeaderRow[]> {
    const rows =
      query.runId !== undefined
        ? this.#history(query.runId).reverse().map((id) => this.#db.get<CheckpointRow>(key.checkpoint(id))!)
        : this.#checkpoints().sort(compareCheckpointsNewestFirst)
    const matching = rows.filter((row) => query.workflowName === undefined || row.workflowName === query.workflowName)
    return page(matching, (row) => row.id, query.before, query.limit).map(({ body: _body, lists: _lists, digest: _digest, ...header }) => header)
  }

  async readLists(runId: string, refs: readonly ListRef[]): Promise<string[][]> {
    return refs.map((ref) => this.#list(runId, ref.id).slice(0, ref.n))
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

  async recordEffectIntent(row: EffectRow): Promise<EffectRow> {
    return this.#recordIntent(row)
  }

  async completeEffect(completion: EffectCompletionRow): Promise<{ recorded: boolean; row: EffectRow | undefined }> {
    return this.#complete(completion)
  }

  async startEffect(runId: string, callId: string): Promise<EffectRow | undefined> {
    return this.#start(runId, callId)
  }

  async getEffect(runId: string, callId: string): Promise<EffectRow | undefined> {
    return this.#db.get<EffectRow>(key.effect(runId, callId))
  }

  async listEffects(runId: string): Promise<EffectRow[]> {
    return this.#db
      .scan<EffectRow>(key.effects(runId))
      .map(([, row]) => row)
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

  #recordIntent(row: EffectRow): EffectRow {
    const stored = this.#db.get<EffectRow>(key.effect(row.runId, row.callId))
    const next = stored ? { ...stored, attempts: stored.attempts + 1 } : row
    this.#db.set(key.effect(row.runId, row.callId), next)
    return next
  }

  #start(runId: string, callId: string): EffectRow | undefined {
    const stored = this.#db.get<EffectRow>(key.effect(runId, callId))
    if (stored?.status !== 'pending') return stored
    const next: EffectRow = { ...stored, status: 'started' }
    this.#db.set(key.effect(runId, callId), next)
    return next
  }

  #complete(completion: EffectCompletionRow): { recorded: boolean; row: EffectRow | undefined } {
    const { runId, callId, status, output, outputHash, completedAt } = completion
    const stored = this.#db.get<EffectRow>(key.effect(runId, callId))
    if (!stored || (stored.status !== 'pending' && stored.status !== 'started')) return { recorded: false, row: stored }
    const next: EffectRow = { ...stored, status, output, outputHash, completedAt }
    this.#db.set(key.effect(runId, callId), next)
    return { recorded: true, row: next }
  }
}
