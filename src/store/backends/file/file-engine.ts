import { access, rename, rm } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { randomBytes } from 'node:crypto'
import { CheckpointCorruptionError, InvalidArgumentError, StoreError } from '../../../core/errors.js'
import type { ListRunsQuery } from '../../checkpoint-store.js'
import type { CheckpointListing, CommitRequest, CommitResult, ListRange, RewriteRequest, RunLoad, StorageEngine } from '../../engine/storage-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, EffectRow, PendingWriteRow, RunPatch, RunRow } from '../../engine/rows.js'
import { retainedListLengths, RUN_LOG_LIST } from '../../engine/list-retention.js'
import { compareCheckpointsNewestFirst, compareRunsNewestFirst, page, statusMatches } from '../../engine/row-order.js'
import { checkCommit } from '../../engine/commit-checks.js'
import { applyRunPatch, carryProgress } from '../../engine/run-patch.js'
import { acquireDirectory, deletedCheckpointsFile, releaseDirectory, type DirectoryState, type RunState } from './directory-state.js'
import { type EffectEdits, FileEffects } from './file-effects.js'
import { FileLeases } from './file-leases.js'
import { FileWrites } from './file-writes.js'
import { appendLines, ensureDirectory, readIfExists, readLines, resolveRoot, syncDirectory } from './driver.js'
import { FileBatch, writeFileAtomic } from './file-batch.js'
import { type AppendPlan, FileLists } from './file-lists.js'
import { assertSafeId, checkpointFileName, type CheckpointFile, type FileLayout } from './file-names.js'
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

  async updateRun(runId: string, patch: RunPatch): Promise<RunRow | undefined> {
    this.#layout.runDir(runId)
    return this.#write(runId, async (state) => {
      if (state.error) throw state.error
      if (!state.row) return undefined
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

  /**
   * Files cannot change together atomically, so a commit is one `FileBatch` whose files are
   * renamed into place in an order that keeps every prefix consistent: the effect files, the
   * checkpoint files in seq order, then run.json (the new last seq, with the run patch). The
   * list lines they reference are appended and synced with the temp files, before any rename.
   * The whole batch costs one round of syncs; the run's log is appended after it. A crash
   * part-way leaves the effects and the first checkpoints of the batch, each whole, with run.json
   * behind them (read as a crash's remains). A fence is checked first, under the run's lock (a
   * claim skips a locked run).
   */
  async commit(request: CommitRequest): Promise<CommitResult> {
    const { rows, appends, run, effects, runPatch, fence } = request
    assertCommit(request, this.#layout)
    const leases = fence && (await this.leases.table())
    return this.#write(run.runId, async (state) => {
      if (state.error) throw state.error
      const held = fence && leases?.check(fence)
      if (held && !held.held) return { ok: false, reason: 'fenced' }
      const index = await this.#dir.index()
      const stored = new Map<string, EffectRow['status'] | undefined>()
      for (const callId of effects?.starts ?? []) stored.set(callId, (await this.#effects.get(run.runId, callId))?.status)
      // The list lengths are checked as the appends are planned (below): a list file may hold a torn tail to cut.
      const refused = checkCommit(request, { lastSeq: lastSeqOf(state), hasCheckpoint: (id) => index.has(id), effectStatus: (callId) => stored.get(callId) })
      if (refused) return refused
      const files = rows.map((row) => ({ seq: row.seq, id: row.id, name: checkpointFileName(row.seq, row.id) }))
      // Claim the ids before the next await, so a concurrent commit in another run cannot take them.
      for (const file of files) index.set(file.id, { runId: run.runId, file })
      try {
        const plans = await this.#lists.plan(run.runId, appends)
        if (!plans) {
          for (const file of files) index.delete(file.id)
          return { ok: false, reason: 'list_conflict' }
        }
        // The journal first, outcomes included: a checkpoint step that fails after it leaves the
        // journal ahead of the checkpoints (a resume takes the recorded outcomes, runs nothing twice).
        // The run's log vouches for what its entries record, so it is appended last, once every
        // change it records is in place: a reader (in this process or another) that reads the log
        // and then the rows never finds the log ahead of them. A crash before leaves the log
        // behind, which forgets a transition and never refuses a run that was not rolled back.
        const logPlans = plans.filter((plan) => plan.append.listId === RUN_LOG_LIST)
        const edits = await this.#effectEdits(run.runId, effects)
        await this.#writeCommit({ state, rows, run, files, edits, runPatch, plans: plans.filter((plan) => !logPlans.includes(plan)) })
        await this.#appendLists(run.runId, logPlans)
        return held?.cancelRequested ? { ok: true, cancelRequested: true } : { ok: true }
      } catch (err) {
        for (const file of files) {
          if (!(await exists(join(this.#layout.checkpointsDir(run.runId), file.name)))) index.delete(file.id)
        }
        throw err
      }
    })
  }

  async getCheckpoints(checkpointIds: readonly string[]): Promise<CheckpointRow[]> {
    for (const id of checkpointIds) assertSafeId(id, 'checkpointId')
    await this.#begin()
    const rows: CheckpointRow[] = []
    for (const id of checkpointIds) {
      const entry = await this.#dir.find(id)
      const read = entry && (await readCheckpointFile(this.#layout, entry.runId, entry.file))
      // A corrupt file comes back as a row EngineStore rejects: it must not look absent.
      if (read && read.state !== 'missing') rows.push(read.row)
    }
    return rows
  }

  async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    if ('runId' in query) {
      this.#layout.runDir(query.runId)
      await this.#begin()
      const state = await this.#dir.runState(query.runId)
      const files = [...state.checkpoints].reverse()
      for (const [at, file] of files.entries()) {
        const read = await readCheckpointFile(this.#layout, query.runId, file)
        // The highest file, even when corrupt: falling back to an older one would rewind the run.
        if (read.state === 'missing') continue
        if (read.state === 'ok') await this.#assertParentKept(query.runId, read.row, files, at)
        return read.row
      }
      return undefined
    }
    await this.#begin()
    const rows = (await this.#allCheckpoints()).filter((row) => !isUnreadable(row) && row.workflowName === query.workflowName)
    return rows.sort(compareCheckpointsNewestFirst)[0]
  }

  async listCheckpoints(query: CheckpointListing): Promise<CheckpointHeaderRow[]> {
    const rows = query.runId !== undefined ? await this.#listRunCheckpoints({ ...query, runId: query.runId }) : await this.#listAllCheckpoints(query)
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
      const checkpoints = await this.#listRunCheckpoints({ runId, limit: recent })
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
      if (removing.length > 0) await appendLines(this.#deletedFile(runId), removing)
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

  /**
   * A commit's effect files: those it opens (intents, starts) are written before its
   * checkpoints, those it completes after them. An effect opened and completed in the same commit
   * (a caller that did not write its intent ahead) is written once, completed, after the
   * checkpoints: a crash before then leaves no entry, as on a backend whose commit is one
   * transaction.
   */
  async #effectEdits(runId: string, effects: CommitRequest['effects']): Promise<EffectEdits> {
    const edits: EffectEdits = new Map()
    for (const intent of effects?.intents ?? []) await this.#effects.recordIntent(intent, edits)
    for (const callId of effects?.starts ?? []) await this.#effects.start(runId, callId, edits)
    // A completion replaces its effect's edit, so an effect opened and completed here is written once.
    for (const completion of effects?.completions ?? []) await this.#effects.complete(completion, edits)
    return edits
  }


  async #writeRunFile(row: RunRow, create: boolean): Promise<void> {
    if (create) {
      await ensureDirectory(this.#layout.checkpointsDir(row.runId))
      await ensureDirectory(this.#layout.listsDir(row.runId))
    }
    await writeFileAtomic(this.#layout.runFile(row.runId), JSON.stringify(row))
  }

  /** Append to list files in a batch of their own. */
  async #appendLists(runId: string, plans: readonly AppendPlan[]): Promise<void> {
    if (plans.length === 0) return
    const batch = new FileBatch()
    try {
      const written = await this.#lists.stage(batch, runId, plans)
      await batch.publish()
      written()
    } catch (err) {
      batch.discard()
      throw err
    }
  }

  async #writeCommit(params: {
    state: RunState
    rows: readonly CheckpointRow[]
    run: RunRow
    files: CheckpointFile[]
    edits: EffectEdits
    runPatch: RunPatch | undefined
    plans: AppendPlan[]
  }): Promise<void> {
    const { state, rows, run, files, edits, runPatch, plans } = params
    if (!state.row) {
      // Written before the checkpoints: at the seq the files show now, its progress digest (given for the commit's last seq) carried there.
      const created = carryProgress({ ...run, lastSeq: rows[rows.length - 1]?.seq ?? run.lastSeq }, lastSeqOf(state))
      await this.#writeRunFile(created, true)
      state.row = created
    }
    const last = rows[rows.length - 1]
    // The progress digest (or signature) of the new last seq lands in the same write as the last seq.
    const seal = run.seal === undefined ? {} : { seal: run.seal }
    const advanced = last ? { ...state.row, lastSeq: last.seq, updatedAt: Math.max(state.row.updatedAt, last.createdAt), ...seal } : state.row
    const updated = runPatch ? applyRunPatch(advanced, runPatch) : advanced
    // The list lines and every file are synced together; only then are the files renamed into
    // place, so none appears before every line it references is durable.
    const batch = new FileBatch()
    try {
      if (edits.size > 0) await ensureDirectory(this.#layout.effectsDir(run.runId))
      for (const [path, stored] of edits) batch.replace(path, JSON.stringify(stored))
      const listsWritten = await this.#lists.stage(batch, run.runId, plans)
      if (rows.length > 0) await ensureDirectory(this.#layout.checkpointsDir(run.runId))
      for (const [i, row] of rows.entries()) batch.replace(join(this.#layout.checkpointsDir(run.runId), files[i]!.name), JSON.stringify(row))
      if (updated !== state.row) batch.replace(this.#layout.runFile(run.runId), JSON.stringify(updated))
      await batch.publish()
      listsWritten()
    } catch (err) {
      batch.discard()
      throw err
    }
    // The new checkpoints and the row that records them appear to this process's readers at once
    // (no await between): a reader never pairs the old row with a newer checkpoint.
    state.checkpoints.push(...files)
    state.row = updated
    if (last) state.lagging = false
  }

  async #listAllCheckpoints(query: CheckpointListing): Promise<CheckpointRow[]> {
    await this.#begin()
    const rows = (await this.#allCheckpoints())
      .filter((row) => query.workflowName === undefined || isUnreadable(row) || row.workflowName === query.workflowName)
      .sort(compareCheckpointsNewestFirst)
    return page(rows, (row) => row.id, query.before, query.limit)
  }

  async #listRunCheckpoints(query: CheckpointListing & { runId: string }): Promise<CheckpointRow[]> {
    const { runId, workflowName, before, limit } = query
    this.#layout.runDir(runId)
    await this.#begin()
    const files = [...(await this.#dir.runState(runId)).checkpoints].reverse()
    // An unreadable file is listed (as a row EngineStore refuses), whatever the filter: never skipped.
    const matches = (row: CheckpointRow | undefined): row is CheckpointRow =>
      row !== undefined && (workflowName === undefined || isUnreadable(row) || row.workflowName === workflowName)
    let start = 0
    if (before !== undefined) {
      const at = files.findIndex((file) => file.id === before)
      const cursor = files[at]
      if (!cursor || !matches(await this.#readListed(runId, cursor))) return []
      start = at + 1
    }
    const rows: CheckpointRow[] = []
    for (let i = start; i < files.length && (limit === undefined || rows.length < limit); i += READ_BATCH) {
      const batch = await Promise.all(files.slice(i, i + READ_BATCH).map((file) => this.#readListed(runId, file)))
      for (const [k, row] of batch.entries()) {
        if (!matches(row) || (limit !== undefined && rows.length >= limit)) continue
        await this.#assertParentKept(runId, row, files, i + k)
        rows.push(row)
      }
    }
    return rows
  }

  /**
   * A checkpoint whose parent is missing where a seq is skipped before it: the parent was removed.
   * Through `deleteCheckpoints` (prune, delete) the removal is recorded; otherwise a file was
   * removed behind the store's back, and history, listing and the chain would silently skip it.
   * (`files` newest first; the one at `at + 1` is the next older file.)
   */
  async #assertParentKept(runId: string, row: CheckpointRow, files: readonly CheckpointFile[], at: number): Promise<void> {
    const older = files[at + 1]
    const parentId = row.parentId
    if (older === undefined || typeof parentId !== 'string' || parentId === older.id || row.seq === older.seq + 1) return
    if (files.some((file) => file.id === parentId)) return
    const recorded = await readIfExists(this.#deletedFile(runId))
    if (recorded && readLines(recorded, Number.MAX_SAFE_INTEGER).includes(parentId)) return
    throw new CheckpointCorruptionError(
      `checkpoint ${row.id} (#${row.seq}) of run ${runId} continues checkpoint ${parentId}, whose file is missing from ${this.#layout.checkpointsDir(runId)} and was not deleted through the store: ` +
        'a checkpoint file was removed behind its back; restore it from a backup',
      { runId, checkpointId: row.id },
    )
  }

  /** The ids of the run's checkpoints deleted through the store, one a line. */
  #deletedFile(runId: string): string {
    return deletedCheckpointsFile(this.#layout, runId)
  }

  /** Every checkpoint of every run (what cross-run queries scan), unreadable ones as rows that fail their checks. */
  async #allCheckpoints(): Promise<CheckpointRow[]> {
    const rows: CheckpointRow[] = []
    for (const runId of await this.#dir.runIds()) {
      const state = await this.#dir.runState(runId)
      for (let i = 0; i < state.checkpoints.length; i += READ_BATCH) {
        const batch = await Promise.all(state.checkpoints.slice(i, i + READ_BATCH).map((file) => this.#readListed(runId, file)))
        for (const row of batch) if (row) rows.push(row)
      }
    }
    return rows
  }

  /**
   * A checkpoint for a listing: an unreadable file is listed as the row its file name gives (ids
   * and seq only), which fails EngineStore's checks and is reported naming the checkpoint; a
   * file removed since the scan is left out.
   */
  async #readListed(runId: string, file: CheckpointFile): Promise<CheckpointRow | undefined> {
    const read = await readCheckpointFile(this.#layout, runId, file)
    if (read.state === 'missing') return undefined
    return read.state === 'ok' ? read.row : unreadable.add(read.row) && read.row
  }

  /** Cut or remove list files to what the remaining checkpoints reference. */
  async #collectLists(runId: string, remaining: readonly CheckpointFile[]): Promise<void> {
    const rows = await Promise.all(
      remaining.map(async (file) => {
        const read = await readCheckpointFile(this.#layout, runId, file)
        // An unreadable row's refs are unknown: an unparsable `lists` makes GC keep every item.
        return read.state === 'ok' ? read.row : read.state === 'corrupt' ? { lists: '' } : undefined
      }),
    )
    const keep = retainedListLengths(rows.filter((row) => row !== undefined))
    if (keep) await this.#lists.collect(runId, keep)
  }
}

const READ_BATCH = 32

/** Rows standing for checkpoint files that could not be read, as listed. */
const unreadable = new WeakSet<CheckpointRow>()

function isUnreadable(row: CheckpointRow): boolean {
  return unreadable.has(row)
}

/** Validate every id and item of a commit before anything touches the disk. */
function assertCommit({ rows, appends, run, effects }: CommitRequest, layout: FileLayout): void {
  layout.runDir(run.runId)
  for (const row of rows) {
    checkpointFileName(row.seq, row.id)
    if (!Number.isSafeInteger(row.seq) || row.seq < 1) {
      throw new InvalidArgumentError(`checkpoint seq must be a positive integer, got ${String(row.seq)}`, { runId: row.runId })
    }
    if (run.runId !== row.runId) {
      throw new InvalidArgumentError(`commit of run ${row.runId} carries a run row for ${run.runId}`, { runId: row.runId })
    }
  }
  for (const append of appends) {
    layout.listFile(run.runId, append.listId)
    if (append.items.some((item) => item.includes('\n'))) {
      throw new InvalidArgumentError(`list ${append.listId} of run ${run.runId}: an item contains a raw newline`, { runId: run.runId })
    }
  }
  for (const effect of [...(effects?.intents ?? []), ...(effects?.completions ?? [])]) {
    if (effect.runId !== run.runId) throw new InvalidArgumentError(`commit of run ${run.runId} carries an effect of run ${effect.runId}`)
    layout.effectFile(effect.runId, effect.callId)
  }
}

function lastSeqOf(state: RunState): number {
  return Math.max(state.row?.lastSeq ?? 0, state.checkpoints[state.checkpoints.length - 1]?.seq ?? 0)
}

function header(row: CheckpointRow): CheckpointHeaderRow {
  const { body: _body, lists: _lists, digest: _digest, ...rest } = row
  return rest
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path)
    return true
  } catch {
    return false
  }
}
