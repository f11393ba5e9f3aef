import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { open, readFile, rm } from 'node:fs/promises'
import { RunBusyError } from '../../../core/errors.js'

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
  for (let attempt = 0; ; attempt++) {
    try {
      const handle = await open(path, 'wx')
      try {
        await handle.writeFile(owner, 'utf8')
        await handle.sync()
      } finally {
        await handle.close()
      }
      return { release: () => releaseLock(path, owner) }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
    const holder = (await readFile(path, 'utf8').catch(() => '')).trim()
    if (attempt < 3 && (holder === '' || holderIsGone(holder))) {
      // Empty (its writer died between create and write) or left by a dead process: replace it.
      await rm(path, { force: true })
      continue
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
}

async function releaseLock(path: string, owner: string): Promise<void> {
  const holder = await readFile(path, 'utf8').catch(() => undefined)
  if (holder?.trim() === owner) await rm(path, { force: true })
}

/** Whether the lock names a process of this machine that no longer exists (or this one: a lock it let go of). */
function holderIsGone(holder: string): boolean {
  const match = /^(.+):(\d+):[0-9a-f]+$/.exec(holder)
  if (!match || match[1] !== hostname()) return false
  const pid = Number(match[2])
  if (pid === process.pid) return true
  try {
    process.kill(pid, 0)
    return false
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH'
  }
}

function describe(holder: string): string {
  const match = /^(.+):(\d+):[0-9a-f]+$/.exec(holder)
  return match ? `process ${match[2]} on ${match[1]}` : `another process (${holder || 'unknown'})`
}
