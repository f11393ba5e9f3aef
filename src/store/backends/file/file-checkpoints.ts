import { CheckpointCorruptionError } from '../../../core/errors.js'
import type { CheckpointListing } from '../../engine/storage-engine.js'
import type { CheckpointHeaderRow, CheckpointRow } from '../../engine/rows.js'
import { retainedListLengths } from '../../engine/list-retention.js'
import { compareCheckpointsNewestFirst, page } from '../../engine/row-order.js'
import { deletedCheckpointsFile, type DirectoryState } from './directory-state.js'
import { readIfExists, readLines } from './driver.js'
import type { CheckpointFile, FileLayout } from './file-names.js'
import { readCheckpointFile } from './file-rows.js'

/**
 * Reading a file store's checkpoint files: by id, the latest, and listings of one run or of
 * every run. A file that cannot be read is never skipped: it comes back as a row that fails
 * `EngineStore`'s checks (so it is reported naming the checkpoint), and a checkpoint whose parent
 * file was removed behind the store's back is a `CheckpointCorruptionError`.
 */
export class FileCheckpoints {
  readonly #dir: DirectoryState
  readonly #layout: FileLayout

  constructor(dir: DirectoryState) {
    this.#dir = dir
    this.#layout = dir.layout
  }

  /** The rows of these checkpoints that exist, in the order asked. */
  async get(checkpointIds: readonly string[]): Promise<CheckpointRow[]> {
    const rows: CheckpointRow[] = []
    for (const id of checkpointIds) {
      const entry = await this.#dir.find(id)
      const read = entry && (await readCheckpointFile(this.#layout, entry.runId, entry.file))
      // A corrupt file comes back as a row EngineStore rejects: it must not look absent.
      if (read && read.state !== 'missing') rows.push(read.row)
    }
    return rows
  }

  /** The newest checkpoint of a run, or of a workflow over every run. */
  async latest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    if ('runId' in query) {
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
    const rows = (await this.#all()).filter((row) => !isUnreadable(row) && row.workflowName === query.workflowName)
    return rows.sort(compareCheckpointsNewestFirst)[0]
  }

  /** A listing, newest first, as whole rows. */
  async list(query: CheckpointListing): Promise<CheckpointRow[]> {
    return query.runId !== undefined ? this.#listRun({ ...query, runId: query.runId }) : this.#listAll(query)
  }

  /** How many items of each list the run's remaining checkpoints reference (see `retainedListLengths`). */
  async retainedLists(runId: string, remaining: readonly CheckpointFile[]): Promise<ReadonlyMap<string, number> | undefined> {
    const rows = await Promise.all(
      remaining.map(async (file) => {
        const read = await readCheckpointFile(this.#layout, runId, file)
        // An unreadable row's refs are unknown: an unparsable `lists` makes GC keep every item.
        return read.state === 'ok' ? read.row : read.state === 'corrupt' ? { lists: '' } : undefined
      }),
    )
    return retainedListLengths(rows.filter((row) => row !== undefined))
  }

  async #listAll(query: CheckpointListing): Promise<CheckpointRow[]> {
    const rows = (await this.#all())
      .filter((row) => query.workflowName === undefined || isUnreadable(row) || row.workflowName === query.workflowName)
      .sort(compareCheckpointsNewestFirst)
    return page(rows, (row) => row.id, query.before, query.limit)
  }

  async #listRun(query: CheckpointListing & { runId: string }): Promise<CheckpointRow[]> {
    const { runId, workflowName, before, limit } = query
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
    const recorded = await readIfExists(deletedCheckpointsFile(this.#layout, runId))
    if (recorded && readLines(recorded, Number.MAX_SAFE_INTEGER).includes(parentId)) return
    throw new CheckpointCorruptionError(
      `checkpoint ${row.id} (#${row.seq}) of run ${runId} continues checkpoint ${parentId}, whose file is missing from ${this.#layout.checkpointsDir(runId)} and was not deleted through the store: ` +
        'a checkpoint file was removed behind its back; restore it from a backup',
      { runId, checkpointId: row.id },
    )
  }

  /** Every checkpoint of every run (what cross-run queries scan), unreadable ones as rows that fail their checks. */
  async #all(): Promise<CheckpointRow[]> {
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
}

/** A listing's row without its contents. */
export function header(row: CheckpointRow): CheckpointHeaderRow {
  const { body: _body, lists: _lists, digest: _digest, ...rest } = row
  return rest
}

const READ_BATCH = 32

/** Rows standing for checkpoint files that could not be read, as listed. */
const unreadable = new WeakSet<CheckpointRow>()

function isUnreadable(row: CheckpointRow): boolean {
  return unreadable.has(row)
}
