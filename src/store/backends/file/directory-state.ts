import { constants, fstatSync, ftruncateSync, lstatSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { KeyedLock } from '../../../core/keyed-lock.js'
import { CheckpointCorruptionError } from '../../../core/errors.js'
import { assertRealDirectory, ensureDirectory, withFile, fsyncAsync, isTempOfDeadWriter, listDirectory, readJsonFile, readRegular, syncDirectory, writeAll, writeFileAtomic } from './driver.js'
import { applyRecord, checkHead, compactedLog, continues, emptyLog, encodeFrame, foldFrames, frameIds, isLogHead, type LogHead, type LogRecord, type RunLog } from './file-log.js'
import { FileLayout, nameToId } from './file-names.js'
import { DirectoryLeases } from './file-leases.js'

/**
 * Locks and caches of one store directory, shared by every `FileEngine` this process opens on
 * it, so two handles on one directory see each other's writes and never interleave them. Each
 * run's log is folded once and kept: a later use reads only what was appended since (another
 * process may be writing), or the whole log again when it was replaced (a compaction).
 */
export class DirectoryState {
  readonly layout: FileLayout
  readonly leases: DirectoryLeases
  /** The runs' write locks: a write to a run runs after every earlier one has settled; a claim skips a run with one in progress or waiting. */
  readonly locks = new KeyedLock()
  /** Open engines using this state. */
  #refs = 0
  readonly #runs = new Map<string, RunLog>()
  #ready: Promise<void> | undefined
  /** Checkpoint id → run id over every run, built on first use; a hit is checked against the run's log. */
  #index: Map<string, string> | undefined
  readonly #claimed = new Set<string>()
  readonly #swept = new Set<string>()
  /** Runs with a head file behind their log → whether their frames are all synced (else async commits left some unsynced). */
  readonly #dirty = new Map<string, boolean>()
  #flushTimer: NodeJS.Timeout | undefined
  #flushing: Promise<void> = Promise.resolve()

  private constructor(root: string) {
    this.layout = new FileLayout(root)
    this.leases = new DirectoryLeases(root, () => this.ready())
  }

  /** The shared state of the directory at `root` (an absolute path). */
  static acquire(root: string): DirectoryState {
    let state = directories.get(root)
    if (!state) {
      state = new DirectoryState(root)
      directories.set(root, state)
    }
    state.#refs++
    return state
  }

  /** Let go of the state; true for the last engine to close, which drops it. */
  release(): boolean {
    if (--this.#refs > 0) return false
    if (directories.get(this.layout.root) === this) directories.delete(this.layout.root)
    return true
  }

  /**
   * Before a write: create the directory if missing and clear what a crashed `deleteRun` left
   * behind. A read never calls it: reading changes nothing on disk (another process may be
   * writing the store).
   */
  async ready(): Promise<void> {
    this.#ready ??= (async () => {
      const { runsDir } = this.layout
      await ensureDirectory(runsDir)
      for (const name of await listDirectory(runsDir)) {
        if (name.startsWith('.deleted-')) await rm(join(runsDir, name), { recursive: true, force: true })
      }
    })().catch((err: unknown) => {
      this.#ready = undefined
      throw err
    })
    return this.#ready
  }

  /** Wait for every write in progress, then sync what async commits left unsynced. */
  async idle(): Promise<void> {
    await Promise.allSettled([this.locks.idle(), this.leases.idle()])
    await this.flush()
  }

  /**
   * A run as its log folds to now. The cached state is used while the log file is the one it was
   * read from and no longer than it was then; a longer log is read from where the state stopped;
   * a replaced or shorter one is read again. (The size is only ever larger than the state's end
   * for a write of another process, or a torn frame that the next write cuts off.) While this
   * process writes the run, a read takes the state its writer keeps current, so it never folds a
   * frame the writer is about to apply; a writer (`writing`, under the run's lock) always checks.
   */
  runLog(runId: string, writing = false): RunLog {
    let log = this.#runs.get(runId)
    if (log && !writing && this.locks.has(runId)) return log
    const path = this.layout.logFile(runId)
    const stat = lstatSync(path, { bigint: true, throwIfNoEntry: false })
    if (log && (stat?.ino !== log.ino || (stat !== undefined && stat.size < BigInt(log.end)))) log = undefined
    if (log && stat && stat.size > BigInt(log.end)) {
      const bytes = readRegular(path, log.end)
      if (bytes && continues(log, bytes)) foldFrames(log, bytes, path)
      else if (bytes) log = undefined
    }
    if (!log) {
      log = this.#load(runId, stat?.ino)
      this.#runs.set(runId, log)
    }
    return log
  }

  /** Every run with a directory, folded (cross-run queries); the id index is built again from them. */
  async allRuns(): Promise<RunLog[]> {
    const logs = (await this.#runIds()).map((runId) => this.runLog(runId))
    this.#index = new Map(logs.flatMap((log) => [...log.byId.keys()].map((id) => [id, log.runId] as const)))
    return logs
  }

  /**
   * The run that holds a checkpoint id. An id not in the index may have been written by another
   * process since it was built: the index is built again once before the id is taken as absent.
   */
  async find(checkpointId: string): Promise<RunLog | undefined> {
    const found = this.#lookUp(checkpointId)
    if (found) return found
    await this.#buildIndex()
    return this.#lookUp(checkpointId)
  }

  /**
   * The id index built from the runs' frame headers, which name their checkpoints' ids in the
   * clear: a run this process has not read is not folded or kept for it, so the first commit of a
   * process reads each log once and holds only the ids.
   */
  async #buildIndex(): Promise<void> {
    const index = new Map<string, string>()
    for (const runId of await this.#runIds()) {
      const ids = this.#runs.has(runId) ? this.runLog(runId).byId.keys() : frameIds(readRegular(this.layout.logFile(runId), 0) ?? Buffer.alloc(0))
      for (const id of ids) index.set(id, runId)
    }
    this.#index = index
  }

  /**
   * Whether any of these checkpoint ids is taken, in any run (see {@link find}), or claimed by a
   * commit in progress. When none is, they are claimed until `fn` settles, so a concurrent commit
   * to another run cannot take them.
   */
  async claimIds<T>(checkpointIds: readonly string[], fn: () => Promise<T>): Promise<T | 'taken'> {
    if (checkpointIds.length === 0) return fn()
    if (this.#index === undefined) await this.#buildIndex()
    if (checkpointIds.some((id) => this.#claimed.has(id) || this.#lookUp(id) !== undefined)) return 'taken'
    for (const id of checkpointIds) this.#claimed.add(id)
    try {
      return await fn()
    } finally {
      for (const id of checkpointIds) this.#claimed.delete(id)
    }
  }

  #lookUp(checkpointId: string): RunLog | undefined {
    const runId = this.#index?.get(checkpointId)
    const log = runId === undefined ? undefined : this.runLog(runId)
    return log?.byId.has(checkpointId) ? log : undefined
  }

  /** Drop what is cached of a run (after it is deleted, or after a write failed half-way). */
  forgetRun(runId: string): void {
    this.#runs.delete(runId)
    this.#dirty.delete(runId)
  }

  async #runIds(): Promise<string[]> {
    return (await listDirectory(this.layout.runsDir)).flatMap((name) => nameToId(name) ?? [])
  }

  /**
   * Append one frame to a run's log and apply it to the cached state. A torn frame a crash left
   * at the end is cut off first. `sync`: the frame is on disk before this returns; otherwise it is
   * synced within {@link FLUSH_MS} (or when the store closes).
   */
  async append(log: RunLog, record: LogRecord, sync: boolean): Promise<void> {
    const { runId } = log
    const path = this.layout.logFile(runId)
    const created = log.ino === undefined
    if (created) await ensureDirectory(this.layout.runDir(runId))
    assertRealDirectory(this.layout.runDir(runId))
    const { bytes, check } = encodeFrame(log.check, record)
    await withFile(path, constants.O_WRONLY | constants.O_CREAT, async (fd) => {
      const stat = fstatSync(fd, { bigint: true })
      if (stat.size !== BigInt(log.end)) ftruncateSync(fd, log.end)
      writeAll(fd, bytes, log.end)
      log.ino = stat.ino
      if (sync) await fsyncAsync(fd)
    })
    if (sync && created) await syncDirectory(this.layout.runDir(runId))
    log.end += bytes.length
    log.frames++
    log.check = check
    applyRecord(log, record)
    if (this.#index) for (const row of record.c ?? []) this.#index.set(row.id, runId)
    this.#dirty.set(runId, (this.#dirty.get(runId) ?? true) && sync)
    this.#flushTimer ??= setTimeout(() => void this.flush().catch(() => undefined), FLUSH_MS).unref()
  }

  /**
   * Rewrite a run's log with what its state holds (a compaction: after checkpoints are deleted,
   * or records rewritten), atomically: a new log of the next generation replaces the old one.
   */
  async compact(log: RunLog): Promise<void> {
    await writeFileAtomic(this.layout.logFile(log.runId), compactedLog(log))
    this.forgetRun(log.runId)
    await writeFileAtomic(this.layout.headFile(log.runId), JSON.stringify(headOf(this.runLog(log.runId))))
  }

  /** Sync the logs async commits wrote, and bring each head file up to its log. */
  async flush(): Promise<void> {
    if (this.#flushTimer) clearTimeout(this.#flushTimer)
    this.#flushTimer = undefined
    // Each head is taken now: it covers only frames that are synced now, or by this flush.
    const runs = [...this.#dirty].flatMap(([runId, sync]) => {
      const log = this.#runs.get(runId)
      return log && log.ino !== undefined ? [{ log, sync, head: headOf(log) }] : []
    })
    this.#dirty.clear()
    const flush = this.#flushing.then(async () => {
      let failure: Error | undefined
      for (const { log, sync, head } of runs) {
        try {
          if (!sync) await withFile(this.layout.logFile(log.runId), constants.O_RDONLY, fsyncAsync)
          if (this.#runs.get(log.runId) === log) await writeFileAtomic(this.layout.headFile(log.runId), JSON.stringify(head))
        } catch (err) {
          // A run deleted meanwhile has nothing left to sync.
          if (this.#runs.get(log.runId) === log) failure ??= err as Error
        }
      }
      if (failure !== undefined) throw failure
    })
    this.#flushing = flush.catch(() => undefined)
    await flush
  }

  /**
   * Remove the temp files a crashed compaction or head write of this run left (only those of
   * processes that are gone, never one a live writer is about to rename): once per run and process,
   * at its first write.
   */
  async removeLeftovers(runId: string): Promise<void> {
    if (this.#swept.has(runId)) return
    this.#swept.add(runId)
    const dir = this.layout.runDir(runId)
    for (const name of await listDirectory(dir)) if (isTempOfDeadWriter(name)) await rm(join(dir, name), { force: true })
  }

  /** Read a run's log from disk, checked against its head file (read first: it never runs ahead of the log). */
  #load(runId: string, ino: bigint | undefined): RunLog {
    const log = emptyLog(runId)
    if (ino === undefined) return log
    assertRealDirectory(this.layout.runDir(runId))
    const headPath = this.layout.headFile(runId)
    const headFile = readJsonFile(headPath)
    const path = this.layout.logFile(runId)
    const bytes = readRegular(path, 0)
    if (!bytes) return log
    log.ino = ino
    const head = headFile.state === 'parsed' && isLogHead(headFile.value) ? headFile.value : undefined
    const at = foldFrames(log, bytes, path, head?.n)
    if (headFile.state !== 'missing' && !head) {
      const reason = headFile.state === 'invalid' ? headFile.reason : 'not a log head'
      log.error = new CheckpointCorruptionError(`run ${runId}: its head file ${headPath} is corrupt (${reason}); restore it from a backup, or delete it to stop checking the log for rollbacks`, { runId })
    }
    checkHead(log, head, at, path)
    return log
  }
}

const directories = new Map<string, DirectoryState>()

/** How long an async commit may stay unsynced. */
const FLUSH_MS = 100

function headOf(log: RunLog): LogHead {
  return { g: log.gen, n: log.frames, h: log.check }
}
