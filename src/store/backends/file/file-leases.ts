import { join } from 'node:path'
import type { RunRow } from '../../engine/rows.js'
import { LeaseTable, TableLeases, type LeaseEntry } from '../../leases/lease-table.js'
import type { DirectoryState } from './directory-state.js'
import { readJsonFile, writeFileAtomic } from './driver.js'
import type { RunLog } from './file-log.js'
import { StoreError } from '../../../core/errors.js'

/** What the leases need of their engine: a write under a run's lock, and a change of the run row (a frame of its log). */
export interface FileRunAccess {
  write<T>(runId: string, fn: (log: RunLog) => Promise<T>): Promise<T>
  putRun(log: RunLog, row: RunRow): Promise<void>
}

/**
 * The lease protocol of a file store, for several workers inside one process (a file store is
 * single-process: the first change to a lease takes the directory's `process.lock`, and a second
 * process is refused with `RunBusyError` until the first closes the store or dies). The lease
 * state of every enqueued run lives in one `leases.json` at the store's root, rewritten
 * atomically after each change and shared in memory by every engine the process opens on the
 * directory. A change of a run holds the run's write lock, and a claim skips runs with a write in
 * progress (as `SKIP LOCKED` does), so a write checked against the old epoch always lands before
 * the new owner starts.
 */
export class FileLeases extends TableLeases {
  readonly #dir: DirectoryState

  constructor(dir: DirectoryState, runs: FileRunAccess) {
    super({
      // Before a change, this process becomes the only one taking leases in the directory (the
      // table lives in its memory), and reads the table afresh when it just took the lock.
      table: async (change) => {
        if (change) await dir.lockLeases(change.runId, () => (dir.leases = undefined))
        return loadTable(dir)
      },
      row: (runId) => dir.runLog(runId).row,
      busy: (runId) => dir.isLocked(runId),
      change: (runId, fn) =>
        runs.write(runId, (log) =>
          fn(log.row && { ...log.row }, async (row, rowFirst) => {
            if (row && rowFirst) await runs.putRun(log, row)
            await persist(dir, await loadTable(dir))
            if (row && !rowFirst) await runs.putRun(log, row)
          }),
        ),
      persist: (table) => persist(dir, table),
    })
    this.#dir = dir
  }

  /** Drop a deleted run's entry. */
  async forget(runId: string): Promise<void> {
    if (this.#dir.leases === undefined) return
    const table = await loadTable(this.#dir)
    if (table.get(runId) === undefined) return
    table.delete(runId)
    await persist(this.#dir, table)
  }
}

/** The shared lease table, loaded from `leases.json` on first use. */
function loadTable(dir: DirectoryState): Promise<LeaseTable> {
  dir.leases ??= Promise.resolve()
    .then(() => {
      const path = join(dir.layout.root, 'leases.json')
      const file = readJsonFile(path)
      if (file.state === 'missing') return new LeaseTable()
      if (file.state === 'invalid' || !Array.isArray(file.value)) {
        throw new StoreError(`the lease file ${path} is corrupt; delete it to drop every lease (runs then start over from their queues' defaults)`)
      }
      return new LeaseTable(file.value as [string, LeaseEntry][])
    })
    .catch((err: unknown) => {
      dir.leases = undefined
      throw err
    })
  return dir.leases
}

/** Write the table as it is now, after every write queued before. */
async function persist(dir: DirectoryState, table: LeaseTable): Promise<void> {
  const write = dir.leaseWrites.then(() => writeFileAtomic(join(dir.layout.root, 'leases.json'), JSON.stringify(table.entries())))
  dir.leaseWrites = write.catch(() => undefined)
  await write
}
