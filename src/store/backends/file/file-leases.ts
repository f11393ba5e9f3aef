import { join } from 'node:path'
import { StoreError } from '../../../core/errors.js'
import { LeaseTable, type LeaseEntry } from '../../leases/lease-table.js'
import { readJsonFile, writeFileAtomic } from './driver.js'
import { lockDirectory, type ProcessLock } from './process-lock.js'

/**
 * The leases of a file store directory, for several workers inside one process, shared by every
 * engine the process opens on the directory (a file store is single-process: the first change to
 * a lease takes the directory's `process.lock`, and a second process is refused with
 * `RunBusyError` until the first closes the store or dies). The lease state of every enqueued run
 * lives in one `leases.json` at the store's root, rewritten atomically after each change.
 */
export class DirectoryLeases {
  /** The lease table, loaded on first use. */
  #table: Promise<LeaseTable> | undefined
  /** Writes of `leases.json`, in order. */
  #writes: Promise<void> = Promise.resolve()
  #processLock: Promise<ProcessLock> | undefined

  /** `ready`: make the directory ready for a write (see `DirectoryState.ready`). */
  constructor(
    readonly root: string,
    readonly ready: () => Promise<void>,
  ) {}

  /**
   * Hold the directory's leases for this process (see `lockDirectory`), before a change: the table
   * lives in this process's memory, and is read afresh when the lock was just taken. Throws
   * `RunBusyError` while another live process holds it.
   */
  async lock(runId: string | undefined): Promise<void> {
    await this.ready()
    this.#processLock ??= lockDirectory(this.root, runId).then(
      (lock) => {
        this.#table = undefined
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
  async unlock(): Promise<void> {
    const lock = this.#processLock
    this.#processLock = undefined
    const held = await lock?.catch(() => undefined)
    await held?.release()
  }

  /** The lease table, loaded from `leases.json` on first use. */
  table(): Promise<LeaseTable> {
    this.#table ??= Promise.resolve()
      .then(() => {
        const path = join(this.root, 'leases.json')
        const file = readJsonFile(path)
        if (file.state === 'missing') return new LeaseTable()
        if (file.state === 'invalid' || !Array.isArray(file.value)) {
          throw new StoreError(`the lease file ${path} is corrupt; delete it to drop every lease (runs then start over from their queues' defaults)`)
        }
        return new LeaseTable(file.value as [string, LeaseEntry][])
      })
      .catch((err: unknown) => {
        this.#table = undefined
        throw err
      })
    return this.#table
  }

  /** Write the table as it is now, after every write queued before. */
  async save(table: LeaseTable): Promise<void> {
    const write = this.#writes.then(() => writeFileAtomic(join(this.root, 'leases.json'), JSON.stringify(table.entries())))
    this.#writes = write.catch(() => undefined)
    await write
  }

  /** Drop a deleted run's entry. */
  async forget(runId: string): Promise<void> {
    if (this.#table === undefined) return
    const table = await this.#table
    if (table.get(runId) === undefined) return
    table.delete(runId)
    await this.save(table)
  }

  /** Wait for the writes of `leases.json` in progress. */
  async idle(): Promise<void> {
    await this.#writes
  }
}
