import { rename, rm } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { randomBytes } from 'node:crypto'
import { InvalidArgumentError, StoreError } from '../../../core/errors.js'
import type { ListRunsQuery } from '../../checkpoint-store.js'
import type { CheckpointListing, CommitRequest, CommitResult, ListRange, RewriteRequest, RunLoad, StorageEngine } from '../../engine/storage-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, EffectRow, PendingWriteRow, RunChanged, RunPatch, RunRow } from '../../engine/rows.js'
import { retainedListLengths } from '../../engine/list-retention.js'
import { compareCheckpointsNewestFirst, compareRunsNewestFirst, page, statusMatches } from '../../engine/row-order.js'
import { checkCommit, effectWrites } from '../../engine/commit-checks.js'
import { applyRunPatch, RUN_CHANGED, swapFails } from '../../engine/run-patch.js'
import { acquireDirectory, releaseDirectory, type DirectoryState } from './directory-state.js'
import { FileLeases } from './file-leases.js'
import { ensureDirectory, readRegular, resolveRoot, syncDirectory, writeFileAtomic } from './driver.js'
import { isUnreadable, putWrite, type LogRecord, type RunLog } from './file-log.js'
import { assertSafeId, type FileLayout } from './file-names.js'

/** Options of {@link FileEngine}. */
export interface FileEngineOptions {
  /** The directory holding the store; created (with its parents) at the first write if missing. Reads never create it. */
  directory: string
  /** Where warnings go (a deleted run's files left behind). Defaults to `process.emitWarning`. */
  onWarning?: (message: string) => void
}

/**
 * A {@link StorageEngine} over a directory, for a single process and no dependencies (see
 * `FileStore`). Each run is one append-only log (see `file-log.ts`), folded in memory when the run
 * is first used: a commit is one frame, one write (and, for `sync` durability, one fsync).
 * Removing checkpoints or rewriting records replaces the log atomically (a compaction). Writes to
 * one run are serialized by a lock shared by every engine this process opens on the directory.
 *
 * @example
 * ```ts
 * const store = new EngineStore(new FileEngine({ directory: '.cairn' }))
 * ```
 */
export class FileEngine implements StorageEngine {
  readonly #dir: DirectoryState
  readonly #layout: FileLayout
  readonly #warn: (message: string) => void
  #closed = false
  /** The lease protocol, for several workers in this process. */
  readonly leases: FileLeases

  constructor(options: FileEngineOptions) {
    // Resolved once: every path below it must then be itself (see `assertRealDirectory`).
    this.#dir = acquireDirectory(resolveRoot(resolve(options.directory)))
    this.#layout = this.#dir.layout
    this.#warn = options.onWarning ?? ((message) => process.emitWarning(message, 'CairnWarning'))
    this.leases = new FileLeases(this.#dir, {
      write: (runId, fn) => this.#write(runId, fn),
      putRun: (log, row) => this.#dir.append(log, { r: row }, true),
    })
  }

  async getKeyCheck(keyId: string): Promise<string | undefined> {
    return readRegular(this.#layout.keyCheckFile(keyId), 0, 1024)?.toString('utf8')
  }

  async putKeyCheck(keyId: string, value: string): Promise<string> {
    const stored = await this.getKeyCheck(keyId)
    if (stored !== undefined) return stored
    await ensureDirectory(this.#layout.keysDir)
    await writeFileAtomic(this.#layout.keyCheckFile(keyId), value)
    return value
  }

  async insertRun(row: RunRow): Promise<boolean> {
    return this.#write(row.runId, async (log) => {
      if (log.row) return false
      await this.#dir.append(log, { r: { ...row } }, true)
      return true
    })
  }

  async getRun(runId: string): Promise<RunRow | undefined> {
    const row = (await this.#read(runId)).row
    return row && { ...row }
  }

  async listRuns(query: ListRunsQuery): Promise<RunRow[]> {
    await this.#begin()
    const rows: RunRow[] = []
    for (const log of await this.#dir.allRuns()) {
      if (log.error) throw log.error
      if (log.row) rows.push(log.row)
    }
    const matches = (run: RunRow) =>
      statusMatches(run.status, query.status) && (query.workflowName === undefined || run.workflowName === query.workflowName) && (query.threadId === undefined || run.threadId === query.threadId)
    return page(rows.filter(matches).sort(compareRunsNewestFirst), (run) => run.runId, query.before, query.limit).map((run) => ({ ...run }))
  }

  async updateRun(runId: string, patch: RunPatch): Promise<RunRow | RunChanged | undefined> {
    return this.#write(runId, async (log) => {
      if (!log.row) return undefined
      if (swapFails(log.row, patch.swap)) return RUN_CHANGED
      await this.#dir.append(log, { r: applyRunPatch(log.row, patch) }, true)
      return { ...log.row }
    })
  }

  async deleteRun(runId: string): Promise<boolean> {
    const runDir = this.#layout.runDir(runId)
    await this.#begin()
    await this.#dir.ready()
    return this.#dir.withRunLock(runId, async () => {
      const log = this.#dir.runLog(runId, { writing: true })
      if (!log.row && !log.error && log.ino === undefined) return false
      // Move the directory out of sight in one step, so a crash never leaves half a run.
      const doomed = join(this.#layout.runsDir, `.deleted-${randomBytes(8).toString('hex')}`)
      await rename(runDir, doomed)
      await syncDirectory(this.#layout.runsDir)
      this.#dir.forgetRun(runId)
      await this.leases.forget(runId)
      try {
        await rm(doomed, { recursive: true, force: true })
      } catch (err) {
        // The run is already gone; what is left is garbage the next open removes.
        this.#warn(`deleted run ${runId}, but removing its files at ${doomed} failed (${(err as Error).message}); they are removed the next time the store is opened`)
      }
      return log.row !== undefined
    })
  }

  /** One frame appended to the run's log; a fence is checked first, under the run's lock (a claim skips a locked run). */
  async commit(request: CommitRequest): Promise<CommitResult> {
    const { rows, run, fence } = request
    assertCommit(request)
    const leases = fence && (await this.leases.table())
    return this.#write(run.runId, async (log) => {
      const held = fence && leases?.check(fence)
      if (held && !held.held) return { ok: false, reason: 'fenced' }
      const outcome = await this.#dir.claimIds(
        rows.map((row) => row.id),
        () => this.#commitTo(log, request),
      )
      if (outcome === 'taken') return { ok: false, reason: 'duplicate_id' }
      if (outcome.ok && held?.cancelRequested) return { ok: true, cancelRequested: true }
      return outcome
    })
  }

  /** Check a commit against the run's folded log and append its frame (ids checked and claimed). */
  async #commitTo(log: RunLog, request: CommitRequest): Promise<CommitResult> {
    const { rows, appends, run, effects, runPatch } = request
    const refused = checkCommit(request, {
      lastSeq: log.row?.lastSeq ?? 0,
      hasCheckpoint: () => false,
      listLength: (listId) => log.lists.get(listId)?.length ?? 0,
      effectStatus: (callId) => log.effects.get(callId)?.status,
    })
    if (refused) return refused
    if (runPatch && swapFails(log.row ?? run, runPatch.swap)) return { ok: false, reason: 'run_changed' }
    const changed = effectWrites(run.runId, effects, (callId) => log.effects.get(callId))
    let row: RunRow = log.row ?? { ...run, seal: run.seal ?? null, digest: run.digest ?? null }
    const last = rows[rows.length - 1]
    if (last) row = { ...row, lastSeq: last.seq, updatedAt: Math.max(row.updatedAt, ...rows.map((cp) => cp.createdAt)), seal: run.seal ?? null }
    if (runPatch) row = applyRunPatch(row, runPatch)
    const record: LogRecord = { r: row }
    if (appends.length > 0) record.a = appends.map((append) => [append.listId, append.expectedLength, [...append.items]])
    if (changed.size > 0) record.e = [...changed.values()]
    if (rows.length > 0) record.c = rows.map((cp) => ({ ...cp }))
    await this.#dir.append(log, record, request.durability !== 'async')
    return { ok: true }
  }

  async getCheckpoints(checkpointIds: readonly string[]): Promise<CheckpointRow[]> {
    for (const id of checkpointIds) assertSafeId(id, 'checkpointId')
    await this.#begin()
    const rows: CheckpointRow[] = []
    for (const id of checkpointIds) {
      // A checkpoint of a damaged frame comes back as a row EngineStore rejects: it must not look absent.
      const row = (await this.#dir.find(id))?.byId.get(id)
      if (row) rows.push({ ...row })
    }
    return rows
  }

  async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    if ('runId' in query) {
      const { checkpoints } = await this.#read(query.runId)
      const row = checkpoints[checkpoints.length - 1]
      return row && { ...row }
    }
    await this.#begin()
    const rows = (await this.#dir.allRuns()).flatMap((log) => log.checkpoints.filter((row) => !isUnreadable(row) && row.workflowName === query.workflowName))
    const row = rows.sort(compareCheckpointsNewestFirst)[0]
    return row && { ...row }
  }

  async listCheckpoints(query: CheckpointListing): Promise<CheckpointHeaderRow[]> {
    // A checkpoint of a damaged frame is listed (as a row EngineStore refuses), whatever the filter: never skipped.
    const matches = (row: CheckpointRow) => query.workflowName === undefined || isUnreadable(row) || row.workflowName === query.workflowName
    let rows: CheckpointRow[]
    if (query.runId !== undefined) {
      rows = (await this.#read(query.runId)).checkpoints.filter(matches).reverse()
    } else {
      await this.#begin()
      rows = (await this.#dir.allRuns()).flatMap((log) => log.checkpoints.filter(matches)).sort(compareCheckpointsNewestFirst)
    }
    return page(rows, (row) => row.id, query.before, query.limit).map(query.rows === true ? (row) => ({ ...row }) : header)
  }

  async readLists(runId: string, ranges: readonly ListRange[]): Promise<string[][]> {
    for (const range of ranges) assertSafeId(range.id, 'listId')
    const log = await this.#read(runId)
    return ranges.map((range) => (log.lists.get(range.id) ?? []).slice(range.from ?? 0, range.n))
  }

  async loadRun(runId: string, { recent }: { recent: number }): Promise<RunLoad> {
    const log = await this.#read(runId)
    const newest = log.checkpoints.slice(-recent).reverse()
    const checkpoints = newest.map((row) => ({ ...row }))
    const wanted = retainedListLengths(newest.map(listsOf)) ?? retainedListLengths([])!
    const lists = [...wanted].flatMap(([id, n]) => {
      const items = log.lists.get(id)
      return items && items.length > 0 ? [{ id, items: items.slice(0, n) }] : []
    })
    return { run: log.row && { ...log.row }, checkpoints, lists }
  }

  async deleteCheckpoints(runId: string, checkpointIds: readonly string[]): Promise<number> {
    return this.#write(runId, async (log) => {
      const doomed = new Set(checkpointIds)
      const remaining = log.checkpoints.filter((row) => !doomed.has(row.id))
      const deleted = log.checkpoints.length - remaining.length
      const writes = checkpointIds.some((id) => log.writes.has(id))
      if (deleted === 0 && !writes) return 0
      for (const id of doomed) log.writes.delete(id)
      for (const row of log.checkpoints) if (doomed.has(row.id)) log.byId.delete(row.id)
      log.checkpoints = remaining
      const keep = retainedListLengths(remaining.map(listsOf))
      if (keep) {
        for (const [listId, items] of [...log.lists]) {
          const n = keep.get(listId) ?? 0
          if (n === 0) log.lists.delete(listId)
          else items.length = Math.min(items.length, n)
        }
      }
      await this.#dir.compact(log)
      return deleted
    })
  }

  async listEffects(runId: string, callIds?: readonly string[]): Promise<EffectRow[]> {
    const only = callIds && new Set(callIds)
    return effectsOf(await this.#read(runId)).filter((row) => !only || only.has(row.callId))
  }

  async deleteEffects(runId: string): Promise<number> {
    return this.#write(runId, async (log) => {
      const deleted = log.effects.size
      if (deleted > 0) await this.#dir.append(log, { x: 1 }, true)
      return deleted
    })
  }

  async putWrites(rows: readonly PendingWriteRow[]): Promise<void> {
    for (const runId of new Set(rows.map((row) => row.runId))) {
      await this.#write(runId, async (log) => {
        // Only what changes the folded state is written: a retried task's first writes stay.
        const probe = { ...log, writes: new Map([...log.writes].map(([id, map]) => [id, new Map(map)])) }
        const changing = rows.filter((row) => row.runId === runId && putWrite(probe, row)).map((row) => ({ ...row }))
        if (changing.length > 0) await this.#dir.append(log, { w: changing }, true)
      })
    }
  }

  async listWrites(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRow[]> {
    const log = await this.#read(runId)
    return checkpointIds.flatMap((id) => [...(log.writes.get(id)?.values() ?? [])].map((row) => ({ ...row })))
  }

  async rewrite(request: RewriteRequest): Promise<void> {
    await this.#write(request.runId, async (log) => {
      for (const { id, body, lists, digest } of request.checkpoints) {
        const row = log.byId.get(id)
        if (!row || isUnreadable(row)) continue
        const updated = { ...row, body, lists, digest }
        log.byId.set(id, updated)
        log.checkpoints[log.checkpoints.indexOf(row)] = updated
      }
      for (const { listId, idx, item } of request.items) {
        const items = log.lists.get(listId)
        if (items && idx < items.length) items[idx] = item
      }
      for (const { callId, inputHash, output, outputHash } of request.effects) {
        const row = log.effects.get(callId)
        if (row) log.effects.set(callId, { ...row, inputHash, output, outputHash })
      }
      await this.#dir.compact(log)
    })
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    await this.#dir.idle()
    releaseDirectory(this.#dir)
    if (this.#dir.refs === 0) await this.#dir.unlockLeases()
  }

  /** Before a read: the engine is open. A read never writes, so it never prepares the directory. */
  #begin(): Promise<void> {
    return this.#closed ? Promise.reject(new StoreError(`the file engine on ${this.#layout.root} is closed`, { code: 'store_closed' })) : Promise.resolve()
  }

  /** A run's folded log, for a read; a run that cannot be read throws. */
  async #read(runId: string): Promise<RunLog> {
    this.#layout.runDir(runId)
    await this.#begin()
    const log = this.#dir.runLog(runId)
    if (log.error) throw log.error
    return log
  }

  /** Run a write under the run's lock; if it fails, forget what is cached of the run. */
  async #write<T>(runId: string, fn: (log: RunLog) => Promise<T>): Promise<T> {
    this.#layout.runDir(runId)
    await this.#begin()
    await this.#dir.ready()
    return this.#dir.withRunLock(runId, async () => {
      const log = this.#dir.runLog(runId, { writing: true })
      if (log.error) throw log.error
      try {
        if (log.ino !== undefined) await this.#dir.removeLeftovers(runId)
        return await fn(log)
      } catch (err) {
        this.#dir.forgetRun(runId)
        throw err
      }
    })
  }
}

/** Validate every id of a commit before anything touches the disk. */
function assertCommit({ rows, appends, run, effects }: CommitRequest): void {
  assertSafeId(run.runId, 'runId')
  for (const row of rows) {
    assertSafeId(row.id, 'checkpointId')
    if (!Number.isSafeInteger(row.seq) || row.seq < 1) {
      throw new InvalidArgumentError(`checkpoint seq must be a positive integer, got ${String(row.seq)}`, { runId: row.runId })
    }
    if (run.runId !== row.runId) {
      throw new InvalidArgumentError(`commit of run ${row.runId} carries a run row for ${run.runId}`, { runId: row.runId })
    }
  }
  for (const append of appends) assertSafeId(append.listId, 'listId')
  for (const effect of [...(effects?.intents ?? []), ...(effects?.completions ?? [])]) {
    if (effect.runId !== run.runId) throw new InvalidArgumentError(`commit of run ${run.runId} carries an effect of run ${effect.runId}`)
  }
}

/** A listing's row without its contents. */
function header(row: CheckpointRow): CheckpointHeaderRow {
  const { body: _body, lists: _lists, digest: _digest, ...rest } = row
  return rest
}

/** A row's list refs for `retainedListLengths`; an unreadable row's are unknown, which keeps every item. */
function listsOf(row: CheckpointRow): { lists: string } {
  return { lists: isUnreadable(row) ? '' : row.lists }
}

function effectsOf(log: RunLog): EffectRow[] {
  return [...log.effects.values()].sort((a, b) => a.startedAt - b.startedAt).map((row) => ({ ...row }))
}
