import { createHash, randomBytes } from 'node:crypto'
import { closeSync, constants, fstatSync, fsync, openSync, readSync, realpathSync, renameSync, rmSync, writeSync } from 'node:fs'
import { mkdir, open, readdir } from 'node:fs/promises'
import { hostname } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { assertJsonText } from '../../../core/codec.js'
import { CairnError, StoreError } from '../../../core/errors.js'
import { processIsGone } from '../../../core/process-alive.js'

/**
 * The file-system primitives of the file store: bounded reads of regular files, atomic
 * whole-file writes, and directory fsyncs. The store's own files are regular files in its own
 * directories, and nothing else is followed: a file is opened without following a symbolic link
 * (`O_NOFOLLOW`), without blocking on a FIFO (`O_NONBLOCK`), and read only when it is a regular
 * file no larger than a limit; a directory written into must be the directory its path names (no
 * symbolic link on the way, checked with `realpath` against a store root that is itself
 * resolved), so a save never lands outside the store.
 */

const NO_FOLLOW = (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0)
/** The largest JSON file (a head, the lease table) the store reads. */
const MAX_JSON_FILE_BYTES = 256 * 1024 * 1024
/** The largest run log the store reads. */
const MAX_LOG_FILE_BYTES = 2 * 1024 * 1024 * 1024
/** This machine, in temp file names (a short hash: a host name may hold any character). */
const HOST_TAG = createHash('sha256').update(hostname()).digest('hex').slice(0, 8)
/**
 * The last 12 hex digits of a temp file's name: 6 drawn once by this process (a later process
 * with the same pid does not pick the names a crashed one left), then a counter.
 */
const TEMP_PREFIX = randomBytes(3).toString('hex')
let tempCount = 0

/**
 * A temp file's name beside `path`: it starts with `.`, so no scan mistakes it for data, and
 * names the process writing it (see {@link isTempOfDeadWriter}).
 */
export function tempPathFor(path: string): string {
  tempCount = (tempCount + 1) % 0x1000000
  return join(dirname(path), `.${basename(path)}.${process.pid}-${HOST_TAG}-${TEMP_PREFIX}${tempCount.toString(16).padStart(6, '0')}.tmp`)
}

/**
 * Whether a temp file was left by a process of this machine that is gone. Only such a file may be
 * removed; any other may be the next file of a live writer, whose rename would fail if it
 * vanished. A temp file of another machine stays: it is invisible to every read.
 */
export function isTempOfDeadWriter(name: string): boolean {
  const match = /\.(\d+)-([0-9a-f]{8})-[0-9a-f]{12}\.tmp$/.exec(name)
  if (!match || match[2] !== HOST_TAG) return false
  const pid = Number(match[1])
  return pid !== process.pid && processIsGone(pid)
}

/** Create `path` (it must not exist) holding `bytes`, and fsync it before returning. */
export async function writeNewFileSynced(path: string, bytes: string | Buffer): Promise<void> {
  await withFile(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, (fd) => {
    writeAll(fd, typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes)
    return fsyncAsync(fd)
  })
}

/** Make a directory's entries durable. (Windows cannot open a directory; NTFS journals them.) */
export async function syncDirectory(path: string): Promise<void> {
  if (process.platform === 'win32') return
  const handle = await open(path, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

/** `mkdir -p`, then fsync the parent of every directory it created so they survive a crash. */
export async function ensureDirectory(path: string): Promise<void> {
  const first = await mkdir(path, { recursive: true })
  assertRealDirectory(path)
  if (first === undefined) return
  for (let dir = path; ; dir = dirname(dir)) {
    await syncDirectory(dirname(dir))
    if (dir === first || dirname(dir) === dir) return
  }
}

/** Refuse to write into `directory` unless it is itself (no symbolic link anywhere on its path). */
export function assertRealDirectory(directory: string): void {
  let real: string
  try {
    real = realpathSync.native(directory)
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return
    throw err
  }
  if (real !== directory) {
    throw new StoreError(`${directory} leads to ${real} through a symbolic link; the file store writes only inside its own directory: replace the link with the directory it should be`)
  }
}

/** `path` with every symbolic link resolved, also when its last parts do not exist yet. */
export function resolveRoot(path: string): string {
  try {
    return realpathSync(path)
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT' || dirname(path) === path) throw err
    return join(resolveRoot(dirname(path)), basename(path))
  }
}

/** A directory's entry names, or none when it does not exist. */
export async function listDirectory(path: string): Promise<string[]> {
  assertRealDirectory(path)
  try {
    return await readdir(path)
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return []
    throw err
  }
}

/** A file as JSON: missing, parsed, or unreadable (not JSON). */
export type JsonFile = { state: 'missing' } | { state: 'parsed'; value: unknown } | { state: 'invalid'; reason: string }

/** A small JSON file, read synchronously (for small files the promise API's overhead dominates). */
export function readJsonFile(path: string): JsonFile {
  const bytes = readBounded(path, MAX_JSON_FILE_BYTES, 0)
  if (bytes === undefined) return { state: 'missing' }
  if (typeof bytes === 'string') return { state: 'invalid', reason: bytes.replace(/^is /, '') }
  try {
    const text = bytes.toString('utf8')
    assertJsonText(text, { what: 'file' })
    return { state: 'parsed', value: JSON.parse(text) as unknown }
  } catch (err) {
    return { state: 'invalid', reason: err instanceof CairnError ? err.message : `not valid JSON (${(err as Error).message})` }
  }
}

/**
 * A file's bytes from offset `from`, or `undefined` when it does not exist; anything but a
 * regular file within the size limit is refused.
 */
export function readRegular(path: string, from = 0, maxBytes = MAX_LOG_FILE_BYTES): Buffer | undefined {
  const bytes = readBounded(path, maxBytes, from)
  if (typeof bytes === 'string') throw new StoreError(`${path} ${bytes}; the file store reads only the regular files it wrote`)
  return bytes
}

/**
 * Replace `path` with `bytes` atomically: write a temp file in the same directory (see
 * `tempPathFor`), fsync it, rename it over the target, fsync the directory. A crash leaves the
 * old file or the new one, never a torn one.
 */
export async function writeFileAtomic(path: string, bytes: string | Buffer): Promise<void> {
  assertRealDirectory(dirname(path))
  const temp = tempPathFor(path)
  try {
    await writeNewFileSynced(temp, bytes)
  } catch (err) {
    rmSync(temp, { force: true })
    throw err
  }
  renameSync(temp, path)
  await syncDirectory(dirname(path))
}

/** Write all of `bytes` at `position` (default: the current offset) of an open file. */
export function writeAll(fd: number, bytes: Buffer, position?: number): void {
  let at = 0
  while (at < bytes.length) at += writeSync(fd, bytes, at, bytes.length - at, position === undefined ? null : position + at)
}

/** fsync an open file on the I/O thread pool (several go in parallel). */
export function fsyncAsync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fsync(fd, (err) => (err ? reject(err) : resolve())))
}

/** Run `fn` on a regular file opened with `flags`, never through a symbolic link, then close it. */
export async function withFile<T>(path: string, flags: number, fn: (fd: number) => Promise<T>): Promise<T> {
  let fd: number
  try {
    fd = openSync(path, flags | NO_FOLLOW, 0o644)
  } catch (err) {
    if (errnoOf(err) === 'ELOOP') throw new StoreError(`${path} is a symbolic link, which the file store never follows: replace it with the file it should be`, { cause: err })
    throw err
  }
  try {
    if (!fstatSync(fd).isFile()) throw new StoreError(`${path} is not a regular file (a FIFO, device or directory); the file store writes only the regular files it made`)
    return await fn(fd)
  } finally {
    closeSync(fd)
  }
}

/** A regular file's bytes from offset `from`, `undefined` when it does not exist, or why it is refused. */
function readBounded(path: string, maxBytes: number, from: number): Buffer | undefined | string {
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | NO_FOLLOW)
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return undefined
    if (errnoOf(err) === 'ELOOP') return 'is a symbolic link, which the file store never follows'
    throw err
  }
  try {
    const stat = fstatSync(fd)
    if (!stat.isFile()) return 'is not a regular file (a FIFO, device or directory)'
    if (stat.size > maxBytes) return `is ${stat.size} bytes, more than the ${maxBytes} the store reads`
    const bytes = Buffer.allocUnsafe(Math.max(0, stat.size - from))
    let at = 0
    while (at < bytes.length) {
      const n = readSync(fd, bytes, at, bytes.length - at, from + at)
      if (n === 0) break
      at += n
    }
    return at === bytes.length ? bytes : bytes.subarray(0, at)
  } finally {
    closeSync(fd)
  }
}

function errnoOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code
}
