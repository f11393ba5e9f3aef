import { randomBytes } from 'node:crypto'
import { link, readFile, rm, stat } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { RunBusyError, StoreError } from '../../../core/errors.js'
import { processIsGone } from '../../../core/process-alive.js'
import { LeaseTable, type LeaseEntry } from '../../leases/lease-table.js'
import { readJsonFile, writeFileAtomic, writeNewFileSynced } from './driver.js'

/**
 * The leases of a file store directory, for several workers inside one process, shared by every
 * engine the process opens on the directory. The lease state of every enqueued run lives in one
 * `leases.json` at the store's root, rewritten atomically after each change. A file store is
 * single-process: the table lives in this process's memory, so two processes running runs in one
 * directory could both believe they own a run. The first change to a lease therefore makes this
 * process the only one taking leases in the directory, with `process.lock` (see {@link lock}).
 */
export class DirectoryLeases {
  #table: Promise<LeaseTable> | undefined
  /** Writes of `leases.json`, in order. */
  #writes: Promise<void> = Promise.resolve()
  /** The owner this process wrote into `process.lock`, once it holds the lock. */
  #owner: Promise<string> | undefined

  /** `ready`: make the directory ready for a write (see `DirectoryState.ready`). */
  constructor(
    readonly root: string,
    readonly ready: () => Promise<void>,
  ) {}

  /**
   * Before a change: hold the directory's `process.lock` for this process, reading the table
   * afresh when the lock was just taken. A second process is refused with a {@link RunBusyError}
   * naming the process that holds the directory, until the first closes the store or dies. A lock
   * left by a process of this machine that is gone (SIGKILL, a crash) is taken over at once; one
   * left by another machine must be deleted by hand.
   */
  async lock(runId: string | undefined): Promise<void> {
    await this.ready()
    this.#owner ??= takeLock(this.root, runId).then(
      (owner) => {
        this.#table = undefined
        return owner
      },
      (err: unknown) => {
        this.#owner = undefined
        throw err
      },
    )
    await this.#owner
  }

  /** Let another process take leases in the directory (the last engine closed). */
  async unlock(): Promise<void> {
    const owner = this.#owner
    this.#owner = undefined
    const held = await owner?.catch(() => undefined)
    const path = join(this.root, PROCESS_LOCK_FILE)
    if (held !== undefined && (await readHolder(path).catch(() => undefined)) === held) await rm(path, { force: true })
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

/** The file holding the id of the process that owns a file store's leases. */
const PROCESS_LOCK_FILE = 'process.lock'

/** Tries to take a lock, including waits while another process breaks a stale one. */
const MAX_ATTEMPTS = 200

/** A breaker older than this was left by a process that died while breaking a stale lock. */
const STALE_BREAKER_MS = 10_000

/** Take the directory's `process.lock` (see `DirectoryLeases.lock`); returns the owner written into it. */
async function takeLock(root: string, runId: string | undefined): Promise<string> {
  const path = join(root, PROCESS_LOCK_FILE)
  const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`
  let holder = ''
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    if (await createWith(path, owner)) return owner
    const read = await readHolder(path)
    if (read === undefined) continue
    holder = read
    if (!holderIsGone(holder)) break
    await breakStale(path, holder, owner)
  }
  throw new RunBusyError({
    runId: runId ?? '',
    owner: holder,
    leaseExpiresAt: null,
    message:
      `${runId === undefined ? '' : `run ${runId}: `}the file store in ${root} is in use by ${describe(holder)}, and a file store runs runs in one process at a time; ` +
      `use SqliteStore or PostgresStore to run from several processes, or, if that process is gone, delete ${path}`,
  })
}

/** Create `path` holding `text`, whole, unless it exists: a temp file linked into place. */
async function createWith(path: string, text: string): Promise<boolean> {
  const temp = `${path}.${randomBytes(6).toString('hex')}.tmp`
  await writeNewFileSynced(temp, text)
  try {
    await link(temp, path)
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    return false
  } finally {
    await rm(temp, { force: true })
  }
}

async function readHolder(path: string): Promise<string | undefined> {
  try {
    return (await readFile(path, 'utf8')).trim()
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
}

/**
 * Remove a lock left by a dead process, under a second lock (`.break`), and only if it still
 * names that process: two processes finding one stale lock must not remove each other's new one.
 */
async function breakStale(path: string, stale: string, owner: string): Promise<void> {
  const breaker = `${path}.break`
  if (!(await createWith(breaker, owner))) {
    const since = await stat(breaker).then((s) => Date.now() - s.mtimeMs, () => 0)
    if (since > STALE_BREAKER_MS) await rm(breaker, { force: true })
    await sleep(10)
    return
  }
  try {
    if ((await readHolder(path)) === stale) await rm(path, { force: true })
  } finally {
    await rm(breaker, { force: true })
  }
}

/** Whether the lock names a process of this machine that no longer exists (or this one: a lock it let go of). */
function holderIsGone(holder: string): boolean {
  const match = /^(.+):(\d+):[0-9a-f]+$/.exec(holder)
  if (!match || match[1] !== hostname()) return false
  const pid = Number(match[2])
  if (pid === process.pid) return true
  return processIsGone(pid)
}

function describe(holder: string): string {
  const match = /^(.+):(\d+):[0-9a-f]+$/.exec(holder)
  return match ? `process ${match[2]} on ${match[1]}` : `another process (${holder || 'unknown'})`
}
