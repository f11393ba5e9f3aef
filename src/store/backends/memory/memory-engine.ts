import type { ListRunsQuery } from '../../checkpoint-store.js'
import type { CheckpointListing, CommitRequest, CommitResult, ListRange, RewriteRequest, RunLoad, StorageEngine } from '../../engine/storage-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, EffectRow, PendingWriteRow, RunChanged, RunPatch, RunRow } from '../../engine/rows.js'
import { retainedListLengths } from '../../engine/list-retention.js'
import { compareCheckpointsNewestFirst, compareRunsNewestFirst, page, statusMatches } from '../../engine/row-order.js'
import type { LeaseEngine } from '../../engine/lease-engine.js'
import { LeaseTable, TableLeases } from '../../leases/lease-table.js'
import { checkCommit, effectWrites } from '../../engine/commit-checks.js'
import { applyRunPatch, RUN_CHANGED, swapFails } from '../../engine/run-patch.js'

/**
 * A {@link StorageEngine} in process memory. Rows hold only strings and numbers and are copied
 * on the way in and out, so nothing is shared by reference with callers. It has the lease
 * capability, so workers in one process can share a `MemoryStore` (in tests). Every method runs
 * to completion without awaiting, so a fence check and the write after it are never interleaved
 * with a claim.
 */
export class MemoryEngine implements StorageEngine {
  readonly #runs = new Map<string, RunRow>()
  readonly #checkpoints = new Map<string, CheckpointRow>()
  /** Each run's checkpoints in seq order. */
  readonly #byRun = new Map<string, CheckpointRow[]>()
  readonly #lists = new Map<string, string[]>()
  readonly #effects = new Map<string, EffectRow>()
  /** Pending writes by run and checkpoint, then by task and index. */
  readonly #writes = new Map<string, Map<string, PendingWriteRow>>()
  readonly #leases = new LeaseTable()
  readonly #keyChecks = new Map<string, string>()

  /** The lease protocol over this engine's rows (see {@link TableLeases}); its changes are synchronous. */
  readonly leases: LeaseEngine = new TableLeases({
    table: async () => this.#leases,
    row: (runId) => this.#runs.get(runId),
    change: (runId, fn) => fn(this.#runs.get(runId), async (row) => void (row && this.#runs.set(runId, withSeal(row)))),
  })

  async insertRun(row: RunRow): Promise<boolean> {
    if (this.#runs.has(row.runId)) return false
    this.#runs.set(row.runId, withSeal(row))
    return true
  }

  async getRun(runId: string): Promise<RunRow | undefined> {
    const row = this.#runs.get(runId)
    return row && { ...row }
  }

  async listRuns(query: ListRunsQuery): Promise<RunRow[]> {
    const rows = [...this.#runs.values()]
      .filter((run) => statusMatches(run.status, query.status))
      .filter((run) => query.workflowName === undefined || run.workflowName === query.workflowName)
      .filter((run) => query.threadId === undefined || run.threadId === query.threadId)
      .sort(compareRunsNewestFirst)
    return page(rows, (run) => run.runId, query.before, query.limit).map((run) => ({ ...run }))
  }

  async updateRun(runId: string, patch: RunPatch): Promise<RunRow | RunChanged | undefined> {
    const row = this.#runs.get(runId)
    if (!row) return undefined
    if (swapFails(row, patch.swap)) return RUN_CHANGED
    Object.assign(row, applyRunPatch(row, patch))
    return { ...row }
  }

  async deleteRun(runId: string): Promise<boolean> {
    if (!this.#runs.delete(runId)) return false
    this.#leases.delete(runId)
    for (const row of this.#byRun.get(runId) ?? []) this.#checkpoints.delete(row.id)
    this.#byRun.delete(runId)
    for (const map of [this.#lists, this.#effects, this.#writes]) for (const key of [...map.keys()]) if (key.startsWith(`${runId}\u0000`)) map.delete(key)
    return true
  }

  async commit({ rows, appends, run, effects, runPatch, fence }: CommitRequest): Promise<CommitResult> {
    const held = fence && this.#leases.check(fence)
    if (held && !held.held) return { ok: false, reason: 'fenced' }
    const current = this.#runs.get(run.runId)
    const refused = checkCommit({ rows, appends, effects }, {
      lastSeq: current?.lastSeq ?? 0,
      hasCheckpoint: (id) => this.#checkpoints.has(id),
      listLength: (listId) => this.#lists.get(listKey(run.runId, listId))?.length ?? 0,
      effectStatus: (callId) => this.#effects.get(listKey(run.runId, callId))?.status,
    })
    if (refused) return refused
    if (runPatch && swapFails(current ?? run, runPatch.swap)) return { ok: false, reason: 'run_changed' }
    const changed = effectWrites(run.runId, effects, (callId) => this.#effects.get(listKey(run.runId, callId)))
    for (const append of appends) {
      const key = listKey(run.runId, append.listId)
      const items = this.#lists.get(key) ?? []
      items.push(...append.items)
      this.#lists.set(key, items)
    }
    const runRow = current ?? withSeal(run)
    this.#runs.set(run.runId, runRow)
    const history = this.#byRun.get(run.runId) ?? []
    this.#byRun.set(run.runId, history)
    if (rows.length > 0) runRow.seal = run.seal ?? null
    for (const row of rows) {
      runRow.lastSeq = row.seq
      runRow.updatedAt = Math.max(runRow.updatedAt, row.createdAt)
      const copy = { ...row }
      this.#checkpoints.set(row.id, copy)
      history.push(copy)
    }
    for (const [callId, row] of changed) this.#effects.set(listKey(run.runId, callId), row)
    if (runPatch) Object.assign(runRow, applyRunPatch(runRow, runPatch))
    return held?.cancelRequested ? { ok: true, cancelRequested: true } : { ok: true }
  }

  async getCheckpoints(checkpointIds: readonly string[]): Promise<CheckpointRow[]> {
    return checkpointIds.flatMap((id) => (this.#checkpoints.has(id) ? [{ ...this.#checkpoints.get(id)! }] : []))
  }

  async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    const row = 'runId' in query ? this.#byRun.get(query.runId)?.at(-1) : [...this.#checkpoints.values()].filter((cp) => cp.workflowName === query.workflowName).sort(compareCheckpointsNewestFirst)[0]
    return row && { ...row }
  }

  async listCheckpoints(query: CheckpointListing): Promise<CheckpointHeaderRow[]> {
    let rows: CheckpointRow[]
    if (query.runId !== undefined) {
      rows = [...(this.#byRun.get(query.runId) ?? [])].reverse()
      if (query.workflowName !== undefined) rows = rows.filter((row) => row.workflowName === query.workflowName)
    } else {
      rows = [...this.#checkpoints.values()]
        .filter((row) => query.workflowName === undefined || row.workflowName === query.workflowName)
        .sort(compareCheckpointsNewestFirst)
    }
    return page(rows, (row) => row.id, query.before, query.limit).map(query.rows === true ? (row) => ({ ...row }) : header)
  }

  async readLists(runId: string, ranges: readonly ListRange[]): Promise<string[][]> {
    return ranges.map((range) => (this.#lists.get(listKey(runId, range.id)) ?? []).slice(range.from ?? 0, range.n))
  }

  async loadRun(runId: string, { recent }: { recent: number }): Promise<RunLoad> {
    const checkpoints = (this.#byRun.get(runId) ?? []).slice(-recent).reverse().map((row) => ({ ...row }))
    const wanted = retainedListLengths(checkpoints) ?? retainedListLengths([])!
    const lists = [...wanted].flatMap(([id, n]) => {
      const items = this.#lists.get(listKey(runId, id))
      return items ? [{ id, items: items.slice(0, n) }] : []
    })
    return { run: await this.getRun(runId), checkpoints, lists }
  }

  async deleteCheckpoints(runId: string, checkpointIds: readonly string[]): Promise<number> {
    const doomed = new Set(checkpointIds)
    const history = this.#byRun.get(runId) ?? []
    const remaining = history.filter((row) => !doomed.has(row.id))
    const deleted = history.length - remaining.length
    for (const row of history) if (doomed.has(row.id)) this.#checkpoints.delete(row.id)
    for (const id of doomed) this.#writes.delete(listKey(runId, id))
    this.#byRun.set(runId, remaining)
    const keep = retainedListLengths(remaining)
    if (keep) {
      for (const [key, items] of [...this.#lists]) {
        if (!key.startsWith(`${runId}\u0000`)) continue
        const n = keep.get(key.slice(runId.length + 1)) ?? 0
        if (n === 0) this.#lists.delete(key)
        else items.length = Math.min(items.length, n)
      }
    }
    return deleted
  }

  async getKeyCheck(keyId: string): Promise<string | undefined> {
    return this.#keyChecks.get(keyId)
  }

  async putKeyCheck(keyId: string, value: string): Promise<string> {
    if (!this.#keyChecks.has(keyId)) this.#keyChecks.set(keyId, value)
    return this.#keyChecks.get(keyId)!
  }

  async listEffects(runId: string, callIds?: readonly string[]): Promise<EffectRow[]> {
    const only = callIds && new Set(callIds)
    return [...this.#effects.values()]
      .filter((row) => row.runId === runId && (!only || only.has(row.callId)))
      .sort((a, b) => a.startedAt - b.startedAt)
      .map((row) => ({ ...row }))
  }

  async deleteEffects(runId: string): Promise<number> {
    const doomed = [...this.#effects].filter(([, row]) => row.runId === runId)
    for (const [key] of doomed) this.#effects.delete(key)
    return doomed.length
  }

  async putWrites(rows: readonly PendingWriteRow[]): Promise<void> {
    for (const row of rows) {
      const key = listKey(row.runId, row.checkpointId)
      const writes = this.#writes.get(key) ?? new Map<string, PendingWriteRow>()
      this.#writes.set(key, writes)
      const writeKey = JSON.stringify([row.taskId, row.idx])
      if (row.idx < 0 || !writes.has(writeKey)) writes.set(writeKey, { ...row })
    }
  }

  async listWrites(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRow[]> {
    return checkpointIds.flatMap((id) => [...(this.#writes.get(listKey(runId, id))?.values() ?? [])].map((row) => ({ ...row })))
  }

  async rewrite(request: RewriteRequest): Promise<void> {
    const { runId } = request
    for (const { id, body, lists, digest } of request.checkpoints) {
      const row = this.#checkpoints.get(id)
      if (row?.runId === runId) Object.assign(row, { body, lists, digest })
    }
    for (const { listId, idx, item } of request.items) {
      const items = this.#lists.get(listKey(runId, listId))
      if (items && idx < items.length) items[idx] = item
    }
    for (const { callId, inputHash, output, outputHash } of request.effects) {
      const row = this.#effects.get(listKey(runId, callId))
      if (row) Object.assign(row, { inputHash, output, outputHash })
    }
  }

  async close(): Promise<void> {}
}

function listKey(runId: string, id: string): string {
  return `${runId}\u0000${id}`
}

function header(row: CheckpointRow): CheckpointHeaderRow {
  const { body: _body, lists: _lists, digest: _digest, ...rest } = row
  return rest
}

/** A run row as stored: a row given without a seal reads back with `seal: null`, as on every backend. */
function withSeal(row: RunRow): RunRow {
  return { ...row, seal: row.seal ?? null, digest: row.digest ?? null }
}
