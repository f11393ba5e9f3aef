import { closeSync, constants, ftruncateSync, fstatSync, openSync, renameSync, rmSync } from 'node:fs'
import { dirname } from 'node:path'
import { assertRealDirectorySync, fsyncAsync, openForWriteSync, syncDirectory, tempPathFor, writeAllSync } from './driver.js'

/**
 * Replace `path` with `text` atomically: write a temp file in the same directory (see
 * `tempPathFor`), fsync it, rename it over the target, fsync the directory. A crash
 * leaves the old file or the new one, never a torn one.
 */
export async function writeFileAtomic(path: string, text: string): Promise<void> {
  const batch = new FileBatch()
  batch.replace(path, text)
  await batch.publish()
}

/**
 * Files replaced together with one round of syncs: each staged file is written whole to its own
 * temp file at once (see {@link writeFileAtomic}); `publish` fsyncs every temp file and every
 * appended list file together, in parallel, then renames the temp files over their targets in
 * the order they were staged and fsyncs each directory once. Every file is the old one or the new
 * one, never torn; the renames reach the disk in their order on file systems that journal them
 * in order (ext4, XFS, APFS, NTFS). What costs a sync a file costs about one sync a batch.
 */
export class FileBatch {
  readonly #staged: { fd: number; temp: string; path: string }[] = []
  readonly #appended: number[] = []
  /** Directories whose entries change when the batch is published. */
  readonly #directories = new Set<string>()
  /** Directories checked to be themselves (see {@link assertRealDirectory}). */
  readonly #checked = new Set<string>()

  /** Files staged and not yet published. */
  get size(): number {
    return this.#staged.length + this.#appended.length
  }

  /** Write `text` to a temp file beside `path`, to replace `path` when the batch is published. */
  replace(path: string, text: string): void {
    this.#checkDirectory(dirname(path))
    const temp = tempPathFor(path)
    const fd = openSync(temp, 'wx', 0o644)
    this.#staged.push({ fd, temp, path })
    writeAllSync(fd, Buffer.from(text, 'utf8'))
  }

  /**
   * Append `items` as lines to a list file (created if missing: its directory is synced too),
   * first cut to `truncateTo` bytes when given; synced when the batch is published. Returns the
   * new size.
   */
  append(path: string, items: readonly string[], truncateTo?: number): number {
    this.#checkDirectory(dirname(path))
    const fd = openForWriteSync(path, constants.O_RDWR | constants.O_CREAT)
    this.#appended.push(fd)
    if (fstatSync(fd).size === 0) this.#directories.add(dirname(path))
    if (truncateTo !== undefined) ftruncateSync(fd, truncateTo)
    const at = fstatSync(fd).size
    const bytes = Buffer.from(items.map((item) => `${item}\n`).join(''), 'utf8')
    writeAllSync(fd, bytes, at)
    return at + bytes.length
  }

  /** Sync everything staged, rename the temp files into place, sync their directories. */
  async publish(): Promise<void> {
    try {
      await Promise.all([...this.#staged.map((file) => file.fd), ...this.#appended].map((fd) => fsyncAsync(fd)))
    } catch (err) {
      this.discard()
      throw err
    }
    this.#closeAll()
    try {
      for (let file = this.#staged[0]; file !== undefined; file = this.#staged[0]) {
        renameSync(file.temp, file.path)
        this.#staged.shift()
        this.#directories.add(dirname(file.path))
      }
    } catch (err) {
      this.discard()
      throw err
    }
    await Promise.all([...this.#directories].map((directory) => syncDirectory(directory)))
    this.#directories.clear()
  }

  /** Drop what is staged: temp files are removed (best effort: the failure that led here is the one to report). */
  discard(): void {
    this.#closeAll()
    for (const file of this.#staged.splice(0)) rmSync(file.temp, { force: true })
  }

  #closeAll(): void {
    for (const fd of [...this.#staged.map((file) => file.fd), ...this.#appended.splice(0)]) {
      try {
        closeSync(fd)
      } catch {
        // Already closed (a discard after a publish that closed them).
      }
    }
    for (const file of this.#staged) file.fd = -1
  }

  #checkDirectory(directory: string): void {
    if (this.#checked.has(directory)) return
    assertRealDirectorySync(directory)
    this.#checked.add(directory)
  }
}
