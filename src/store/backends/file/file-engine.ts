import { rename, rm } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { randomBytes } from 'node:crypto'
import { StoreError } from '../../../core/errors.js'
import type { ListRunsQuery } from '../../checkpoint-store.js'
import type { CheckpointListing, CommitRequest, CommitResult, ListRange, RewriteRequest, RunLoad, StorageEngine } from '../../engine/storage-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, EffectRow, PendingWriteRow, RunChanged, RunPatch, RunRow } from '../../engine/rows.js'
import { retainedListLengths } from '../../engine/list-retention.js'
import { compareRunsNewestFirst, page, statusMatches } from '../../engine/row-order.js'
import { applyRunPatch, carryProgress, RUN_CHANGED, swapFails } from '../../engine/run-patch.js'
import { acquireDirectory, deletedCheckpointsFile, lastSeqOf, releaseDirectory, type DirectoryState, type RunState } from './directory-state.js'
import { FileCheckpoints, header } from './file-checkpoints.js'
import { FileCommits } from './file-commit.js'
import { FileEffects } from './file-effects.js'
import { FileLeases } from './file-leases.js'
import { FileWrites } from './file-writes.js'
import { appendLines, ensureDirectory, readIfExists, resolveRoot, syncDirectory } from './driver.js'
import { writeFileAtomic } from './file-batch.js'
import { FileLists } from './file-lists.js'
import { assertSafeId, type CheckpointFile, type FileLayout } from './file-names.js'
import { readCheckpointFile } from './file-rows.js'

/** Options of {@link FileEngine}. */
export interface FileEngineOptions {
  /** The directory holding the store; created (with its parents) at the first write if missing. Reads never create it. */
  directory: string
  /** Where warnings go (an unreadable checkpoint file skipped while listing). Defaults to `process.emitWarning`. */
  onWarning?: (message: string) => void
}

/**
 * A {@link StorageEngine} over a directory, for a single process and no dependencies. Each run
 * is a directory: `run.json`, one JSON file per checkpoint, one append-only `.jsonl` file per
 * list and one JSON file per effect (see `FileLayout`). Whole files are replaced atomically
 * (temp file, fsync, rename, directory fsync); list files only grow, and a checkpoint is written
 * after the list lines it references are durable, so a crash leaves at most unreferenced tail
 * lines, which the next append to that list cuts off.
 *
 * Writes to one run are serialized by an in-process lock shared by every engine this process
 * opens on the same directory. Several processes must not write to one directory at once: use
 * `SqliteStore` for that.
 *
 * @example
 * ```ts
 * const store = new EngineStore(new FileEngine({ directory: '.cairn' }))
 * ```
 */
export class FileEngine implements StorageEngine {
  readonly #dir: DirectoryState
  readonly #layout: FileLayout
  readonly #lists: FileLists
  readonly #effects: FileEffects
  readonly #writes: FileWrites
  readonly #checkpoints: FileCheckpoints
  readonly #commits: FileCommits
  readonly #warn: (message: string) => void
  #closed = false
  /** The lease protocol, for several workers in this process (see {@link FileLeases}). */
  readonly leases: FileLeases

  constructor(options: FileEngineOptions) {
    // Resolved once: every path below it must then be itself (see `assertRealDirectory`).
    this.#dir = acquireDirectory(resolveRoot(resolve(options.directory)))
    this.#layout = this.#dir.layout
    this.#lists = new FileLists(this.#dir)
    this.#effects = new FileEffects(this.#dir)
    this.#writes = new FileWrites(this.#dir)
    this.#warn = options.onWarning ?? ((message) => process.emitWarning(message, 'CairnWarning'))
    this.leases = new FileLeases(this.#dir, {
      write: (runId, fn) => this.#write(runId, fn),
      writeRunFile: (row, create) => this.#writeRunFile(row, create),
    })
    this.#checkpoints = new FileCheckpoints(this.#dir)
    this.#commits = new FileCommits(this.#dir, {
      runs: { write: (runId, fn) => this.#write(runId, fn), writeRunFile: (row, create) => this.#writeRunFile(row, create) },
      lists: this.#lists,
      effects: this.#effects,
      leases: this.leases,
    })
  }

  async getKeyCheck(keyId: string): Promise<string | undefined> {
    return (await readIfExists(this.#layout.keyCheckFile(keyId), 1024))?.toString('utf8')
  }

  async putKeyCheck(keyId: string, value: string): Promise<string> {
    const stored = await this.getKeyCheck(keyId)
    if (stored !== undefined) return stored
    await ensureDirectory(this.#layout.keysDir)
    await writeFileAtomic(this.#layout.keyCheckFile(keyId), value)
    return value
  }

  async insertRun(row: RunRow): Promise<boolean> {
    this.#layout.runDir(row.runId)
    return this.#write(row.runId, async (state) => {
      if (state.error) throw state.error
      if (state.row) return false
      const stored = carryProgress(row, Math.max(row.lastSeq, lastSeqOf(state)))
      await this.#writeRunFile(stored, true)
      state.row = stored
      state.lagging = false
      return true
    })
  }

  async getRun(runId: string): Promise<RunRow | undefined> {
    this.#layout.runDir(runId)
    await this.#begin()
    const state = await this.#dir.runState(runId)
    if (state.error) throw state.error
    return state.row && { ...state.row }
  }

  async listRuns(query: ListRunsQuery): Promise<RunRow[]> {
    await this.#begin()
    const states = await Promise.all((await this.#dir.runIds()).map((runId) => this.#dir.runState(runId)))
    const rows: RunRow[] = []
    for (const state of states) {
      if (state.error) throw state.error
      if (state.row) rows.push(state.row)
    }
    const matching = rows
      .filter((run) => statusMatches(run.status, query.status))
      .filter((run) => query.workflowName === undefined || run.workflowName === query.workflowName)
      .filter((run) => query.threadId === undefined || run.threadId === query.threadId)
      .sort(compareRunsNewestFirst)
    return page(matching, (run) => run.runId, query.before, query.limit).map((run) => ({ ...run }))
  }

  async updateRun(runId: string, patch: RunPatch): Promise<RunRow | RunChanged | undefined> {
    this.#layout.runDir(runId)
    return this.#write(runId, async (state) => {
      if (state.error) throw state.error
      if (!state.row) return undefined
      if (swapFails(state.row, patch.swap)) return RUN_CHANGED
      const updated = applyRunPatch(state.row, patch)
      await this.#writeRunFile(updated, false)
      state.row = updated
      state.lagging = false
      return { ...updated }
    })
  }

  async deleteRun(runId: string): Promise<boolean> {
    const runDir = this.#layout.runDir(runId)
    return this.#write(runId, async (state) => {
      if (!state.row && !state.error) return false
      const index = await this.#dir.index()
      // Move the directory out of sight in one step, so a crash never leaves half a run.
      const doomed = join(this.#layout.runsDir, `.deleted-${randomBytes(8).toString('hex')}`)
      await rename(runDir, doomed)
      await syncDirectory(this.#layout.runsDir)
      for (const [id, entry] of [...index]) if (entry.runId === runId) index.delete(id)
      this.#dir.forgetRun(runId)
      await this.leases.forget(runId)
      try {
        await rm(doomed, { recursive: true, force: true })
      } catch (err) {
        // The run is already gone; what is left is garbage the next open removes.
        this.#warn(`deleted run ${runId}, but removing its files at ${doomed} failed (${(err as Error).message}); they are removed the next time the store is opened`)
      }
      return true
    })
  }

  /** One `FileBatch` renamed into place in an order that keeps every prefix consistent (see {@link FileCommits}). */
  async commit(request: CommitRequest): Promise<CommitResult> {
    return this.#commits.commit(request)
  }

  async getCheckpoints(checkpointIds: readonly string[]): Promise<CheckpointRow[]> {
    for (const id of checkpointIds) assertSafeId(id, 'checkpointId')
    await this.#begin()
    return this.#checkpoints.get(checkpointIds)
  }

  async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    if ('runId' in query) this.#layout.runDir(query.runId)
    await this.#begin()
    return this.#checkpoints.latest(query)
  }

  async listCheckpoints(query: CheckpointListing): Promise<CheckpointHeaderRow[]> {
    if (query.runId !== undefined) this.#layout.runDir(query.runId)
    await this.#begin()
    const rows = await this.#checkpoints.list(query)
    return query.rows === true ? rows : rows.map(header)
  }

  async readLists(runId: string, ranges: readonly ListRange[]): Promise<string[][]> {
    this.#layout.runDir(runId)
    for (const range of ranges) this.#layout.listFile(runId, range.id)
    await this.#begin()
    return this.#lists.read(runId, ranges)
  }

  /** Read under the run's lock, so no commit of this process lands half-way through. */
  async loadRun(runId: string, { recent }: { recent: number }): Promise<RunLoad> {
    this.#layout.runDir(runId)
    await this.#begin()
    return this.#dir.withRunLock(runId, async () => {
      const run = await this.getRun(runId)
      const checkpoints = await this.#checkpoints.list({ runId, limit: recent })
      const wanted = [...(retainedListLengths(checkpoints) ?? retainedListLengths([])!)].map(([id, n]) => ({ id, n }))
      const lists = (await this.#lists.read(runId, wanted)).map((items, k) => ({ id: wanted[k]!.id, items }))
      return { run, checkpoints, lists: lists.filter((list) => list.items.length > 0), effects: await this.#effects.list(runId) }
    })
  }

  async deleteCheckpoints(runId: string, checkpointIds: readonly string[]): Promise<number> {
    this.#layout.runDir(runId)
    return this.#write(runId, async (state) => {
      const index = await this.#dir.index()
      if (state.row && state.lagging) {
        // Persist the lastSeq the files imply before removing them, so it never moves back.
        await this.#writeRunFile(state.row, false)
        state.lagging = false
      }
      const doomed = new Set(checkpointIds)
      const dir = this.#layout.checkpointsDir(runId)
      // Recorded first: a checkpoint whose parent is gone without this record was removed behind the store's back.
      const removing = state.checkpoints.filter((cp) => doomed.has(cp.id)).map((cp) => cp.id)
      if (removing.length > 0) await appendLines(deletedCheckpointsFile(this.#layout, runId), removing)
      let deleted = 0
      for (const file of state.checkpoints.filter((cp) => doomed.has(cp.id))) {
        await rm(join(dir, file.name), { force: true })
        state.checkpoints = state.checkpoints.filter((cp) => cp !== file)
        if (index.get(file.id)?.runId === runId) index.delete(file.id)
        deleted++
      }
      if (deleted > 0) await syncDirectory(dir)
      await this.#writes.delete(runId, [...doomed])
      await this.#collectLists(runId, state.checkpoints)
      return deleted
    })
  }

  async listEffects(runId: string, callIds?: readonly string[]): Promise<EffectRow[]> {
    this.#layout.effectsDir(runId)
    for (const callId of callIds ?? []) this.#layout.effectFile(runId, callId)
    await this.#begin()
    if (callIds === undefined) return this.#effects.list(runId)
    const rows = await Promise.all(callIds.map((callId) => this.#effects.get(runId, callId)))
    return rows.filter((row) => row !== undefined).sort((a, b) => a.startedAt - b.startedAt)
  }

  async deleteEffects(runId: string): Promise<number> {
    this.#layout.effectsDir(runId)
    await this.#beginWrite()
    return this.#dir.withRunLock(runId, () => this.#effects.deleteAll(runId))
  }

  async putWrites(rows: readonly PendingWriteRow[]): Promise<void> {
    for (const runId of new Set(rows.map((row) => row.runId))) {
      this.#layout.runDir(runId)
      await this.#beginWrite()
      await this.#dir.withRunLock(runId, () => this.#writes.put(rows.filter((row) => row.runId === runId)))
    }
  }

  async listWrites(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRow[]> {
    this.#layout.runDir(runId)
    await this.#begin()
    const rows: PendingWriteRow[] = []
    for (const checkpointId of checkpointIds) rows.push(...(await this.#writes.read(runId, checkpointId)))
    return rows
  }

  async rewrite(request: RewriteRequest): Promise<void> {
    const { runId } = request
    this.#layout.runDir(runId)
    await this.#write(runId, async (state) => {
      const dir = this.#layout.checkpointsDir(runId)
      for (const row of request.checkpoints) {
        const file = state.checkpoints.find((cp) => cp.id === row.id)
        const read = file && (await readCheckpointFile(this.#layout, runId, file))
        if (read?.state !== 'ok') continue
        await writeFileAtomic(join(dir, file!.name), JSON.stringify({ ...read.row, body: row.body, lists: row.lists, digest: row.digest }))
      }
      await this.#lists.rewrite(runId, request.items)
      for (const effect of request.effects) await this.#effects.rewrite(runId, effect)
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

  /** Before a write: the engine is open and the directory prepared. */
  async #beginWrite(): Promise<void> {
    await this.#begin()
    await this.#dir.ready()
  }

  /** Run a write under the run's lock; if it fails, forget what is cached of the run. */
  async #write<T>(runId: string, fn: (state: RunState) => Promise<T>): Promise<T> {
    await this.#beginWrite()
    return this.#dir.withRunLock(runId, async () => {
      const state = await this.#dir.runState(runId, { writing: true })
      try {
        if (state.leftovers.length > 0) await this.#dir.removeLeftovers(runId, state)
        const result = await fn(state)
        this.#dir.restamp(state, runId)
        return result
      } catch (err) {
        this.#dir.forgetRun(runId)
        throw err
      }
    })
  }

  async #writeRunFile(row: RunRow, create: boolean): Promise<void> {
    if (create) {
      await ensureDirectory(this.#layout.checkpointsDir(row.runId))
      await ensureDirectory(this.#layout.listsDir(row.runId))
    }
    await writeFileAtomic(this.#layout.runFile(row.runId), JSON.stringify(row))
  }

  /** Cut or remove list files to what the remaining checkpoints reference. */
  async #collectLists(runId: string, remaining: readonly CheckpointFile[]): Promise<void> {
    const keep = await this.#checkpoints.retainedLists(runId, remaining)
    if (keep) await this.#lists.collect(runId, keep)
  }
}
