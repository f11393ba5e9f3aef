import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { link, readFile, rm, stat } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import { RunBusyError } from '../../../core/errors.js'
import { writeNewFileSynced } from './driver.js'
import { processIsGone } from '../../../core/process-alive.js'

/** The file holding the id of the process that owns a file store's leases. */
export const PROCESS_LOCK_FILE = 'process.lock'

/** A file store directory's leases, held by this process until {@link ProcessLock.release}. */
export interface ProcessLock {
  release(): Promise<void>
}

/**
 * Make this process the only one that takes leases in a file store directory. A file store keeps
 * its lease table in this process's memory, so two processes running runs in one directory could
 * both believe they own a run; the second process is refused at its first lease instead, with a
 * {@link RunBusyError} naming the process that holds the directory. A lock left by a process of
 * this machine that is gone (SIGKILL, a crash) is taken over at once; one left by another machine
 * must be deleted by hand.
 */
export async function lockDirectory(root: string, runId: string | undefined): Promise<ProcessLock> {
  const path = join(root, PROCESS_LOCK_FILE)
  const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`
  let holder = ''
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    if (await createWith(path, owner)) return { release: () => releaseLock(path, owner) }
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

/** Tries to take a lock, including waits while another process breaks a stale one. */
const MAX_ATTEMPTS = 200

/** A breaker older than this was left by a process that died while breaking a stale lock. */
const STALE_BREAKER_MS = 10_000

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

async function releaseLock(path: string, owner: string): Promise<void> {
  if ((await readHolder(path).catch(() => undefined)) === owner) await rm(path, { force: true })
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
