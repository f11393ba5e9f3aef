import { rename, rm } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { randomBytes } from 'node:crypto'
import { InvalidArgumentError, StoreError } from '../../../core/errors.js'
import type { CommitRequest, CommitResult, ListRange } from '../../engine/storage-engine.js'
import { InProcessEngine, type RunChange } from '../../engine/in-process-engine.js'
import { assertId } from '../../encoding/validate.js'
import { TableLeases } from '../../leases/lease-table.js'
import { DirectoryState } from './directory-state.js'
import { ensureDirectory, readRegular, resolveRoot, syncDirectory, writeFileAtomic } from './driver.js'
import type { RunLog } from './file-log.js'

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
export class FileEngine extends InProcessEngine<RunLog> {
  readonly #dir: DirectoryState
  readonly #warn: (message: string) => void
  #closed = false
  /**
   * The lease protocol, for several workers in this process (see `DirectoryLeases`). A change of a
   * run holds the run's write lock, and a claim skips runs with a write in progress (as
   * `SKIP LOCKED` does), so a write checked against the old epoch always lands before the new
   * owner starts.
   */
  readonly leases: TableLeases

  constructor(options: FileEngineOptions) {
    super()
    // Resolved once: every path below it must then be itself (see `assertRealDirectory`).
    this.#dir = DirectoryState.acquire(resolveRoot(resolve(options.directory)))
    this.#warn = options.onWarning ?? ((message) => process.emitWarning(message, 'CairnWarning'))
    const leases = this.#dir.leases
    this.leases = new TableLeases({
      table: async (change) => {
        if (change) await leases.lock(change.runId)
        return leases.table()
      },
      row: (runId) => this.#dir.runLog(runId).row,
      busy: (runId) => this.#dir.locks.has(runId),
      change: (runId, fn) =>
        this.write(runId, (log) =>
          fn(log.row && { ...log.row }, async (row, rowFirst) => {
            if (row && rowFirst) await this.store(log, { r: row }, true)
            await leases.save(await leases.table())
            if (row && !rowFirst) await this.store(log, { r: row }, true)
          }),
        ),
      persist: (table) => leases.save(table),
    })
  }

  async getKeyCheck(keyId: string): Promise<string | undefined> {
    return readRegular(this.#dir.layout.keyCheckFile(keyId), 0, 1024)?.toString('utf8')
  }

  async putKeyCheck(keyId: string, value: string): Promise<string> {
    const stored = await this.getKeyCheck(keyId)
    if (stored !== undefined) return stored
    await ensureDirectory(this.#dir.layout.keysDir)
    await writeFileAtomic(this.#dir.layout.keyCheckFile(keyId), value)
    return value
  }

  async deleteRun(runId: string): Promise<boolean> {
    const { runsDir } = this.#dir.layout
    return this.#locked(runId, async (log) => {
      if (!log.row && !log.error && log.ino === undefined) return false
      // Move the directory out of sight in one step, so a crash never leaves half a run.
      const doomed = join(runsDir, `.deleted-${randomBytes(8).toString('hex')}`)
      await rename(this.#dir.layout.runDir(runId), doomed)
      await syncDirectory(runsDir)
      this.#dir.forgetRun(runId)
      await this.#dir.leases.forget(runId)
      try {
        await rm(doomed, { recursive: true, force: true })
      } catch (err) {
        // The run is already gone; what is left is garbage the next open removes.
        this.#warn(`deleted run ${runId}, but removing its files at ${doomed} failed (${(err as Error).message}); they are removed the next time the store is opened`)
      }
      return log.row !== undefined
    })
  }

  /** One frame appended to the run's log (see `InProcessEngine.commit`), its ids checked before anything touches the disk. */
  override async commit(request: CommitRequest): Promise<CommitResult> {
    assertCommit(request)
    return super.commit(request)
  }

  override async readLists(runId: string, ranges: readonly ListRange[]): Promise<string[][]> {
    for (const range of ranges) assertId(range.id, 'listId')
    return super.readLists(runId, ranges)
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    await this.#dir.idle()
    if (this.#dir.release()) await this.#dir.leases.unlock()
  }

  /**
   * Before a read (`runId` checked, when given): the engine is open. A read never writes, so it
   * never prepares the directory.
   */
  #assertOpen(runId?: string): void {
    if (runId !== undefined) this.#dir.layout.runDir(runId)
    if (this.#closed) throw new StoreError(`the file engine on ${this.#dir.layout.root} is closed`, { code: 'store_closed' })
  }

  /** A run's folded log, for a read; a run that cannot be read throws. */
  protected async read(runId: string): Promise<RunLog> {
    this.#assertOpen(runId)
    const log = this.#dir.runLog(runId)
    if (log.error) throw log.error
    return log
  }

  protected async allRuns(): Promise<RunLog[]> {
    this.#assertOpen()
    return this.#dir.allRuns()
  }

  protected async find(checkpointId: string): Promise<RunLog | undefined> {
    assertId(checkpointId, 'checkpointId')
    this.#assertOpen()
    return this.#dir.find(checkpointId)
  }

  /** Run a write under the run's lock; if it fails, forget what is cached of the run. */
  protected write<T>(runId: string, fn: (log: RunLog) => Promise<T>): Promise<T> {
    return this.#locked(runId, async (log) => {
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

  /** `fn` with the run's log (even one that cannot be used), under the run's lock, the directory ready for a write. */
  async #locked<T>(runId: string, fn: (log: RunLog) => Promise<T>): Promise<T> {
    this.#assertOpen(runId)
    await this.#dir.ready()
    return this.#dir.locks.run(runId, async () => fn(this.#dir.runLog(runId, true)))
  }

  protected claimIds<T>(checkpointIds: readonly string[], fn: () => Promise<T>): Promise<T | 'taken'> {
    return this.#dir.claimIds(checkpointIds, fn)
  }

  protected store(log: RunLog, change: RunChange, sync: boolean): Promise<void> {
    return this.#dir.append(log, change, sync)
  }

  protected storeWhole(log: RunLog): Promise<void> {
    return this.#dir.compact(log)
  }
}

/** Validate every id of a commit before anything touches the disk. */
function assertCommit({ rows, appends, run, effects }: CommitRequest): void {
  assertId(run.runId, 'runId')
  for (const row of rows) {
    assertId(row.id, 'checkpointId')
    if (!Number.isSafeInteger(row.seq) || row.seq < 1) {
      throw new InvalidArgumentError(`checkpoint seq must be a positive integer, got ${String(row.seq)}`, { runId: row.runId })
    }
    if (run.runId !== row.runId) {
      throw new InvalidArgumentError(`commit of run ${row.runId} carries a run row for ${run.runId}`, { runId: row.runId })
    }
  }
  for (const append of appends) assertId(append.listId, 'listId')
  for (const effect of [...(effects?.intents ?? []), ...(effects?.completions ?? [])]) {
    if (effect.runId !== run.runId) throw new InvalidArgumentError(`commit of run ${run.runId} carries an effect of run ${effect.runId}`)
  }
}
