import { lstatSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import { join } from 'node:path'
import type { RunRow } from '../../engine/rows.js'
import { carryProgress } from '../../engine/run-patch.js'
import type { LeaseTable } from '../../leases/lease-table.js'
import { ensureDirectory, isTempFileName, isTempOfDeadWriter, listDirectory } from './driver.js'
import { FileLayout, nameToId, parseCheckpointFileName, type CheckpointFile } from './file-names.js'
import { readRunFile } from './file-rows.js'
import { lockDirectory, type ProcessLock } from './process-lock.js'
import { KeyedLock } from '../../../core/keyed-lock.js'

/** What the store knows of one run, loaded from disk once and kept up to date by its writes. */
export interface RunState {
  /** run.json, with `lastSeq` raised to the highest checkpoint file's seq; undefined if absent. */
  row: RunRow | undefined
  /** Why run.json cannot be read: thrown by every call that needs the run. */
  error: Error | undefined
  /** run.json's `lastSeq` is behind a checkpoint file (a crash between the two writes). */
  lagging: boolean
  /** The run's checkpoint files, by ascending seq. */
  checkpoints: CheckpointFile[]
  /** Temp files seen in the run's checkpoint directory when it was read; the run's next write removes those of dead writers. */
  leftovers: string[]
  /** What the run's files looked like when this state was read (see {@link runStamp}). */
  stamp: string
}

/** Where a checkpoint is: the id index entry. */
export interface IndexEntry {
  runId: string
  file: CheckpointFile
}

/** A list file whose first `lines` lines end at byte `bytes`, which is also its size. */
export interface ListState {
  lines: number
  bytes: number
}

/**
 * Locks and caches of one store directory, shared by every `FileEngine` this process opens on
 * it, so two handles on one directory see each other's writes and never interleave them.
 */
export class DirectoryState {
  readonly layout: FileLayout
  /** Open engines using this state. */
  refs = 0
  readonly lists = new Map<string, ListState>()
  /** The lease table (`leases.json`), loaded on first use; see `FileLeases`. */
  leases: Promise<LeaseTable> | undefined
  /** Writes of `leases.json`, in order. */
  leaseWrites: Promise<void> = Promise.resolve()
  readonly #locks = new KeyedLock()
  #processLock: Promise<ProcessLock> | undefined
  readonly #runs = new Map<string, Promise<RunState>>()
  #ready: Promise<void> | undefined
  #index: Promise<Map<string, IndexEntry>> | undefined

  constructor(root: string) {
    this.layout = new FileLayout(root)
  }

  /**
   * Before a write: create the directory if missing and clear what a crashed `deleteRun` left
   * behind. A read never calls it: reading changes nothing on disk (another process may be
   * writing the store).
   */
  async ready(): Promise<void> {
    this.#ready ??= this.#prepare().catch((err: unknown) => {
      this.#ready = undefined
      throw err
    })
    return this.#ready
  }

  /**
   * Hold the directory's leases for this process (see `lockDirectory`); `onLocked` runs once,
   * when the lock is first taken. Throws `RunBusyError` while another live process holds it.
   * What was read before is forgotten: the process that held the lock may have written since.
   */
  async lockLeases(runId: string | undefined, onLocked: () => void): Promise<void> {
    await this.ready()
    this.#processLock ??= lockDirectory(this.layout.root, runId).then(
      (lock) => {
        this.#runs.clear()
        this.lists.clear()
        this.#index = undefined
        onLocked()
        return lock
      },
      (err: unknown) => {
        this.#processLock = undefined
        throw err
      },
    )
    await this.#processLock
  }

  /** Let another process take leases in the directory (the last engine closed). */
  async unlockLeases(): Promise<void> {
    const lock = this.#processLock
    this.#processLock = undefined
    const held = await lock?.catch(() => undefined)
    await held?.release()
  }

  /** Run `fn` after every earlier write to `runId` has settled. */
  withRunLock<T>(runId: string, fn: () => Promise<T>): Promise<T> {
    return this.#locks.run(runId, fn)
  }

  /** Whether a write to `runId` is in progress or waiting (a claim skips such a run). */
  isLocked(runId: string): boolean {
    return this.#locks.has(runId)
  }

  /** Wait for every write in progress. */
  async idle(): Promise<void> {
    await Promise.allSettled([this.#locks.idle(), this.leaseWrites])
  }

  /**
   * What is known of a run: read from disk when it is not cached, or when its files changed since
   * it was read (another process wrote the run; see {@link runStamp}). While this process writes
   * the run, a read takes the state its writer keeps current, so it never pairs the new files of a
   * change half-way with the old run.json; a writer (`writing`, under the run's lock) always checks.
   */
  async runState(runId: string, options: { writing?: boolean } = {}): Promise<RunState> {
    const writing = options.writing === true
    let state = this.#runs.get(runId)
    if (state && (writing || !this.isLocked(runId))) {
      const cached = await state.catch(() => undefined)
      if (cached && cached.stamp !== runStamp(this.layout, runId) && this.#runs.get(runId) === state) this.#runs.delete(runId)
      state = this.#runs.get(runId)
    }
    if (!state) {
      state = this.#loadRun(runId, writing)
      this.#runs.set(runId, state)
      void state.catch(() => {
        if (this.#runs.get(runId) === state) this.#runs.delete(runId)
      })
    }
    return state
  }

  /** Drop what is cached of a run (after it is deleted, or after a write failed half-way). */
  forgetRun(runId: string): void {
    this.#runs.delete(runId)
    for (const key of [...this.lists.keys()]) if (key.startsWith(`${runId}\u0000`)) this.lists.delete(key)
  }

  /**
   * Where a checkpoint's file is. An id not in the index may have been written by another process
   * since it was built: the index is built again once before the id is taken as absent.
   */
  async find(checkpointId: string): Promise<IndexEntry | undefined> {
    const entry = (await this.index()).get(checkpointId)
    if (entry) return entry
    if (this.#locks.size > 0) return undefined
    this.#index = undefined
    return (await this.index()).get(checkpointId)
  }

  /** Checkpoint id → where its file is, over every run. Built from file names on first use. */
  async index(): Promise<Map<string, IndexEntry>> {
    this.#index ??= this.#buildIndex().catch((err: unknown) => {
      this.#index = undefined
      throw err
    })
    return this.#index
  }

  /** The ids of every run directory (with or without a run.json). */
  async runIds(): Promise<string[]> {
    const ids: string[] = []
    for (const name of await listDirectory(this.layout.runsDir)) {
      const id = nameToId(name)
      if (id !== undefined) ids.push(id)
    }
    return ids
  }

  async #prepare(): Promise<void> {
    await ensureDirectory(this.layout.runsDir)
    for (const name of await listDirectory(this.layout.runsDir)) {
      if (name.startsWith('.deleted-')) await rm(join(this.layout.runsDir, name), { recursive: true, force: true })
    }
  }

  /** Note that this process changed the run's files: its cached state is what they now hold. */
  restamp(state: RunState, runId: string): void {
    state.stamp = runStamp(this.layout, runId)
  }

  /**
   * Read a run from disk. run.json behind its checkpoint files is either a crash between the two
   * writes or another process's commit half-way (its checkpoints renamed into place, run.json
   * next): a reader reads again for a moment (up to half a second) before taking it as a crash's
   * remains (and carrying the progress forward, as a writer does at once).
   */
  async #loadRun(runId: string, writing: boolean): Promise<RunState> {
    for (let attempt = 0; ; attempt++) {
      const leftovers: string[] = []
      // Stamped first: a write landing while the files are read makes the next use read them again.
      const stamp = runStamp(this.layout, runId)
      const [run, checkpoints] = await Promise.all([readRunFile(this.layout, runId), this.#scanCheckpoints(runId, leftovers)])
      const highest = checkpoints[checkpoints.length - 1]?.seq ?? 0
      const lagging = run.row !== undefined && run.row.lastSeq < highest
      if (lagging && !writing && attempt < LAGGING_READS) {
        await sleep(LAGGING_PAUSE_MS)
        continue
      }
      const row = run.row && carryProgress(run.row, Math.max(run.row.lastSeq, highest))
      return { row, error: run.error, lagging, checkpoints, leftovers, stamp }
    }
  }

  /**
   * Remove the temp files a crashed write of this run left, once, under the run's lock (a writer
   * calls it): only those whose writing process is gone, never one a live writer is about to
   * rename.
   */
  async removeLeftovers(runId: string, state: RunState): Promise<void> {
    const names = state.leftovers
    state.leftovers = []
    const dir = this.layout.checkpointsDir(runId)
    for (const name of names) if (isTempOfDeadWriter(name)) await rm(join(dir, name), { force: true })
  }

  async #buildIndex(): Promise<Map<string, IndexEntry>> {
    const index = new Map<string, IndexEntry>()
    for (const runId of await this.runIds()) {
      for (const file of await this.#scanCheckpoints(runId)) index.set(file.id, { runId, file })
    }
    return index
  }

  /** A run's checkpoint files by seq; the names of temp files go to `temps` (read only: nothing is removed here). */
  async #scanCheckpoints(runId: string, temps?: string[]): Promise<CheckpointFile[]> {
    const dir = this.layout.checkpointsDir(runId)
    const files: CheckpointFile[] = []
    for (const name of await listDirectory(dir)) {
      const file = parseCheckpointFileName(name)
      if (file) files.push(file)
      else if (isTempFileName(name)) temps?.push(name)
    }
    return files.sort(compareFiles)
  }
}

const directories = new Map<string, DirectoryState>()

/** The shared state of the directory at `root` (an absolute path). */
export function acquireDirectory(root: string): DirectoryState {
  let state = directories.get(root)
  if (!state) {
    state = new DirectoryState(root)
    directories.set(root, state)
  }
  state.refs++
  return state
}

/** Let go of a directory's state; the last engine to close drops it. */
export function releaseDirectory(state: DirectoryState): void {
  state.refs--
  if (state.refs === 0 && directories.get(state.layout.root) === state) directories.delete(state.layout.root)
}

/** How many times, at most, a reader reads a run again while run.json is behind its checkpoints. */
const LAGGING_READS = 100
const LAGGING_PAUSE_MS = 5

/**
 * What a run's files look like: inode, size and times of run.json and of the record of deleted
 * checkpoints. Every commit that adds checkpoints, and every change of the run row, replaces
 * run.json (a new inode); removing checkpoints through the store appends to that record. A
 * cached state whose stamp differs from the disk's is read again.
 */
export function runStamp(layout: FileLayout, runId: string): string {
  return [layout.runFile(runId), deletedCheckpointsFile(layout, runId)]
    .map((path) => {
      const stat = lstatSync(path, { bigint: true, throwIfNoEntry: false })
      return stat ? `${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}` : '-'
    })
    .join('/')
}

/** The ids of the run's checkpoints deleted through the store, one a line. */
export function deletedCheckpointsFile(layout: FileLayout, runId: string): string {
  return join(layout.runDir(runId), 'deleted-checkpoints.jsonl')
}

export function compareFiles(a: CheckpointFile, b: CheckpointFile): number {
  return a.seq - b.seq || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
}

/** A run's last seq: run.json's, or its highest checkpoint file's when run.json is behind it. */
export function lastSeqOf(state: RunState): number {
  return Math.max(state.row?.lastSeq ?? 0, state.checkpoints[state.checkpoints.length - 1]?.seq ?? 0)
}
