import { createHash, randomBytes } from 'node:crypto'
import { closeSync, constants, fstatSync, fsync, openSync, readSync, realpathSync, renameSync, rmSync, writeSync } from 'node:fs'
import { mkdir, open, readdir, realpath } from 'node:fs/promises'
import { hostname } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { assertJsonText } from '../../../core/codec.js'
import { CairnError, StoreError } from '../../../core/errors.js'
import { processIsGone } from '../../../core/process-alive.js'

/**
 * The file-system primitives of the file store: bounded reads of regular files, atomic
 * whole-file writes, and directory fsyncs.
 */

/**
 * A temp file's name beside `path`: it starts with `.`, so no scan mistakes it for data, and
 * names the process writing it (see {@link isTempOfDeadWriter}).
 */
export function tempPathFor(path: string): string {
  tempCount = (tempCount + 1) % TEMP_COUNT_LIMIT
  return join(dirname(path), `.${basename(path)}.${process.pid}-${HOST_TAG}-${TEMP_PREFIX}${tempCount.toString(16).padStart(6, '0')}.tmp`)
}

/**
 * The last 12 hex digits of a temp file's name: 6 drawn once by this process (a later process
 * with the same pid does not pick the names a crashed one left), then a counter.
 */
const TEMP_PREFIX = randomBytes(3).toString('hex')
const TEMP_COUNT_LIMIT = 0x1000000
let tempCount = 0

/**
 * Whether a temp file of {@link writeFileAtomic} was left by a process that is gone: its name
 * names a process of this machine that no longer exists. Only such a file may be removed; any
 * other may be the next file of a live writer (in this process or another one), whose rename
 * would fail if it vanished. A temp file of another machine, or in another naming, stays: it is
 * invisible to every read.
 */
export function isTempOfDeadWriter(name: string): boolean {
  const match = /\.(\d+)-([0-9a-f]{8})-[0-9a-f]{12}\.tmp$/.exec(name)
  if (!match || match[2] !== HOST_TAG) return false
  const pid = Number(match[1])
  if (pid === process.pid) return false
  return processIsGone(pid)
}

/** This machine, in temp file names (a short hash: a host name may hold any character). */
const HOST_TAG = createHash('sha256').update(hostname()).digest('hex').slice(0, 8)

/** Create `path` (it must not exist) holding `text`, and fsync it before returning. */
export async function writeNewFileSynced(path: string, text: string): Promise<void> {
  const handle = await open(path, 'wx')
  try {
    await handle.writeFile(text, 'utf8')
    await handle.sync()
  } finally {
    await handle.close()
  }
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
  await assertRealDirectory(path)
  if (first === undefined) return
  for (let dir = path; ; dir = dirname(dir)) {
    await syncDirectory(dirname(dir))
    if (dir === first || dirname(dir) === dir) return
  }
}

/**
 * The store's own files are regular files in its own directories, and nothing else is followed:
 * a file is opened without following a symbolic link (`O_NOFOLLOW`), without blocking on a FIFO
 * (`O_NONBLOCK`), and read only when it is a regular file no larger than a limit; a directory
 * written into must be the directory its path names (no symbolic link on the way, checked with
 * `realpath` against a store root that is itself resolved), so a save never lands outside the
 * store.
 */
const READ_FLAGS = constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0)

/** The largest JSON file (a run, a checkpoint row, an effect) the store reads. */
export const MAX_JSON_FILE_BYTES = 256 * 1024 * 1024
/** The largest run log the store reads. */
export const MAX_LOG_FILE_BYTES = 2 * 1024 * 1024 * 1024

/** Refuse to write into `directory` unless it is itself (no symbolic link anywhere on its path). */
export async function assertRealDirectory(directory: string): Promise<void> {
  let real: string
  try {
    real = await realpath(directory)
  } catch (err) {
    if (isNotFound(err)) return
    throw err
  }
  if (real !== directory) throw symbolicLinkOnTheWay(directory, real)
}

function symbolicLinkOnTheWay(directory: string, real: string): StoreError {
  return new StoreError(`${directory} leads to ${real} through a symbolic link; the file store writes only inside its own directory: replace the link with the directory it should be`)
}

/** `path` with every symbolic link resolved, also when its last parts do not exist yet. */
export function resolveRoot(path: string): string {
  try {
    return realpathSync(path)
  } catch (err) {
    if (!isNotFound(err) || dirname(path) === path) throw err
    return join(resolveRoot(dirname(path)), basename(path))
  }
}

/** A directory's entry names, or none when it does not exist. */
export async function listDirectory(path: string): Promise<string[]> {
  await assertRealDirectory(path)
  try {
    return await readdir(path)
  } catch (err) {
    if (isNotFound(err)) return []
    throw err
  }
}

/** A file as JSON: missing, parsed, or unreadable (not JSON). */
export type JsonFile = { state: 'missing' } | { state: 'parsed'; value: unknown } | { state: 'invalid'; reason: string }

export function readJsonFile(path: string): JsonFile {
  // Read synchronously: these files are small (a checkpoint row, a run, an effect), and for
  // small files the promise API's per-call overhead dominates — listing 1,000 checkpoints took
  // 56 ms with readFile and 7 ms with readFileSync (bench:store). Only a regular file of bounded
  // size is read, so no read blocks on a FIFO or runs on without end (/dev/zero).
  let bytes: Buffer
  try {
    const read = readRegularSync(path, MAX_JSON_FILE_BYTES)
    if (typeof read === 'string') return { state: 'invalid', reason: read.replace(/^is /, '') }
    bytes = read
  } catch (err) {
    if (isNotFound(err)) return { state: 'missing' }
    if (isLink(err)) return { state: 'invalid', reason: 'a symbolic link, which the store never follows' }
    throw err
  }
  try {
    const text = bytes.toString('utf8')
    assertJsonText(text, { what: 'file' })
    return { state: 'parsed', value: JSON.parse(text) as unknown }
  } catch (err) {
    return { state: 'invalid', reason: err instanceof CairnError ? err.message : `not valid JSON (${(err as Error).message})` }
  }
}

export function isNotFound(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === 'ENOENT'
}

function isLink(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === 'ELOOP'
}

function notRegular(path: string, err: unknown): Error {
  if (isLink(err)) return new StoreError(`${path} is a symbolic link, which the file store never follows: replace it with the file it should be`, { cause: err })
  return err as Error
}

/** Why a file's stat rules it out, or undefined for a regular file within the limit. */
function fileProblem(stat: { isFile(): boolean; size: number }, maxBytes: number): string | undefined {
  if (!stat.isFile()) return 'is not a regular file (a FIFO, device or directory)'
  if (stat.size > maxBytes) return `is ${stat.size} bytes, more than the ${maxBytes} the store reads`
  return undefined
}

/** A regular file's bytes from offset `from`, or why it is refused; throws ENOENT and ELOOP as they come. */
function readRegularSync(path: string, maxBytes: number, from = 0): Buffer | string {
  const fd = openSync(path, READ_FLAGS)
  try {
    const stat = fstatSync(fd)
    const problem = fileProblem(stat, maxBytes)
    if (problem) return problem
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

/**
 * A file's bytes from offset `from`, or `undefined` when it does not exist; anything but a
 * regular file within the size limit is refused.
 */
export function readRegular(path: string, from = 0, maxBytes = MAX_LOG_FILE_BYTES): Buffer | undefined {
  let read
  try {
    read = readRegularSync(path, maxBytes, from)
  } catch (err) {
    if (isNotFound(err)) return undefined
    throw notRegular(path, err)
  }
  if (typeof read === 'string') throw new StoreError(`${path} ${read}; the file store reads only the regular files it wrote`)
  return read
}

/**
 * Replace `path` with `bytes` atomically: write a temp file in the same directory (see
 * `tempPathFor`), fsync it, rename it over the target, fsync the directory. A crash leaves the
 * old file or the new one, never a torn one.
 */
export async function writeFileAtomic(path: string, bytes: string | Buffer): Promise<void> {
  assertRealDirectorySync(dirname(path))
  const temp = tempPathFor(path)
  const fd = openForWriteSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL)
  try {
    writeAllSync(fd, typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes)
    await fsyncAsync(fd)
  } catch (err) {
    closeSync(fd)
    rmSync(temp, { force: true })
    throw err
  }
  closeSync(fd)
  renameSync(temp, path)
  await syncDirectory(dirname(path))
}

/** Write all of `bytes` at `position` (default: the current offset) of an open file. */
export function writeAllSync(fd: number, bytes: Buffer, position?: number): void {
  let at = 0
  while (at < bytes.length) at += writeSync(fd, bytes, at, bytes.length - at, position === undefined ? null : position + at)
}

/** fsync an open file on the I/O thread pool (several go in parallel). */
export function fsyncAsync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fsync(fd, (err) => (err ? reject(err) : resolve())))
}

/** {@link assertRealDirectory}, synchronously (one `realpath(3)` call). */
export function assertRealDirectorySync(directory: string): void {
  let real: string
  try {
    real = realpathSync.native(directory)
  } catch (err) {
    if (isNotFound(err)) return
    throw err
  }
  if (real !== directory) throw symbolicLinkOnTheWay(directory, real)
}

/** {@link openForWrite}, synchronously: an open file descriptor. */
export function openForWriteSync(path: string, flags: number): number {
  let fd: number
  try {
    fd = openSync(path, flags | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0), 0o644)
  } catch (err) {
    throw notRegular(path, err)
  }
  if (!fstatSync(fd).isFile()) {
    closeSync(fd)
    throw new StoreError(`${path} is not a regular file (a FIFO, device or directory); the file store writes only the regular files it made`)
  }
  return fd
}
