import { mkdir, open, rename, rm, stat, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import type { JsonObject } from '../../core/codec.js'
import { InvalidArgumentError, StoreError } from '../../core/errors.js'
import { KeyedLock } from '../../core/keyed-lock.js'
import { syncDirectory, tempPathFor, writeNewFileSynced } from '../backends/file/driver.js'
import { assertId } from '../encoding/validate.js'
import { eventTexts, EventWaiters, limitOf, seqOf, type ReadEventsOptions, type RunEventLog, type StoredRunEvent, type WaitForEventsOptions } from './run-event-log.js'

/** How often, at most, a wait checks the file for another process's appends. */
const MAX_POLL_MS = 80
/** The most a read takes from the file at once. */
const READ_CHUNK = 1 << 20
const NEWLINE = 0x0a

/**
 * The `FileStore`'s {@link RunEventLog}: one append-only file per run,
 * `<directory>/events/<runId>.jsonl`, one event per line, written only by the process that
 * executes the run (each append one write, then fsync) and only read by everyone else. A cursor
 * is the byte offset just past its event's line. A line a crash left without its newline is
 * never read, and the next owner cuts it off before it appends.
 */
export class FileEventLog implements RunEventLog {
  readonly #dir: string
  readonly #waiters = new EventWaiters(MAX_POLL_MS)
  /** Files this process appends to, opened once (the torn tail cut off). */
  readonly #open = new Map<string, Promise<{ handle: FileHandle; size: number }>>()
  /** One write at a time per run file, in call order. */
  readonly #queues = new KeyedLock()

  constructor(directory: string) {
    this.#dir = join(directory, 'events')
  }

  append(runId: string, events: readonly JsonObject[], texts: readonly string[] = eventTexts(events)): Promise<string[]> {
    assertId(runId, 'runId')
    if (events.length === 0) return Promise.resolve([])
    return this.#queues.run(runId, () => this.#appendNow(runId, texts))
  }

  async read(runId: string, options: ReadEventsOptions = {}): Promise<StoredRunEvent[]> {
    assertId(runId, 'runId')
    let offset = seqOf(options.after)
    const limit = limitOf(options.limit)
    const out: StoredRunEvent[] = []
    const handle = await this.#openForRead(runId)
    if (!handle) return out
    try {
      await assertLineStart(handle, runId, offset)
      let buffer = Buffer.alloc(READ_CHUNK)
      while (out.length < limit) {
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, offset)
        let start = 0
        for (let i = 0; i < bytesRead && out.length < limit; i++) {
          if (buffer[i] !== NEWLINE) continue
          const line = buffer.subarray(start, i).toString('utf8')
          out.push({ cursor: String(offset + i + 1), event: JSON.parse(line) as JsonObject })
          start = i + 1
        }
        if (bytesRead < buffer.length) break
        // A full buffer without a newline holds the start of a line longer than it: read it again, twice as large.
        if (start === 0) buffer = Buffer.alloc(buffer.length * 2)
        offset += start
      }
      return out
    } catch (err) {
      if (err instanceof InvalidArgumentError) throw err
      throw new StoreError(`run ${runId}: cannot read its event file: ${(err as Error).message}`, { runId, cause: err })
    } finally {
      await handle.close()
    }
  }

  waitForMore(runId: string, after: string | undefined, options: WaitForEventsOptions): Promise<boolean> {
    assertId(runId, 'runId')
    const offset = seqOf(after)
    return this.#waiters.wait(runId, () => this.#hasLineAfter(runId, offset), options)
  }

  async deleteRun(runId: string): Promise<number> {
    assertId(runId, 'runId')
    await this.#close(runId)
    const size = await this.#size(runId)
    await rm(this.#path(runId), { force: true })
    return size > 0 ? 1 : 0
  }

  /**
   * The new log is written beside the old one, synced, and renamed over it (then the directory
   * is synced): a crash leaves one whole file or the other. Queued behind this process's appends.
   */
  replace(runId: string, events: readonly JsonObject[]): Promise<void> {
    assertId(runId, 'runId')
    return this.#queues.run(runId, () => this.#replaceNow(runId, events))
  }

  async close(): Promise<void> {
    this.#waiters.notify()
    await Promise.all([...this.#open.keys()].map((runId) => this.#close(runId)))
  }

  /** Close the run's file opened for appending, if it is. */
  async #close(runId: string): Promise<void> {
    const opened = this.#open.get(runId)
    this.#open.delete(runId)
    await (await opened?.catch(() => undefined))?.handle.close()
  }

  async #appendNow(runId: string, texts: readonly string[]): Promise<string[]> {
    try {
      const file = await this.#forAppend(runId)
      const lines = texts.map((text) => Buffer.from(`${text}\n`))
      let end = file.size
      const cursors = lines.map((line) => String((end += line.length)))
      await file.handle.write(Buffer.concat(lines), 0, end - file.size, file.size)
      await file.handle.datasync()
      file.size = end
      this.#waiters.notify(runId)
      return cursors
    } catch (err) {
      this.#open.delete(runId)
      throw new StoreError(`run ${runId}: cannot append to its event file: ${(err as Error).message}`, { runId, cause: err })
    }
  }

  async #replaceNow(runId: string, events: readonly JsonObject[]): Promise<void> {
    await this.#close(runId)
    const path = this.#path(runId)
    const temporary = tempPathFor(path)
    try {
      await mkdir(this.#dir, { recursive: true })
      await writeNewFileSynced(temporary, events.map((event) => `${JSON.stringify(event)}\n`).join(''))
      await rename(temporary, path)
      await syncDirectory(this.#dir)
      this.#waiters.notify(runId)
    } catch (err) {
      await rm(temporary, { force: true }).catch(() => {})
      throw new StoreError(`run ${runId}: cannot rewrite its event file: ${(err as Error).message}`, { runId, cause: err })
    }
  }

  /** The run's file, opened for appending: a tail left without its newline (a crash mid-write) is cut off. */
  #forAppend(runId: string): Promise<{ handle: FileHandle; size: number }> {
    let opened = this.#open.get(runId)
    if (!opened) {
      opened = (async () => {
        await mkdir(this.#dir, { recursive: true })
        const handle = await open(this.#path(runId), 'a+')
        const { size } = await handle.stat()
        const complete = await newlineEnd(handle, 0, size, 'last')
        if (complete < size) await handle.truncate(complete)
        return { handle, size: complete }
      })()
      this.#open.set(runId, opened)
      opened.catch(() => this.#open.delete(runId))
    }
    return opened
  }

  async #openForRead(runId: string): Promise<FileHandle | undefined> {
    try {
      return await open(this.#path(runId), 'r')
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ENOENT') return undefined
      throw new StoreError(`run ${runId}: cannot open its event file: ${(err as Error).message}`, { runId, cause: err })
    }
  }

  async #hasLineAfter(runId: string, offset: number): Promise<boolean> {
    const size = await this.#size(runId)
    if (size <= offset) return false
    const handle = await this.#openForRead(runId)
    if (!handle) return false
    try {
      // A line ends somewhere before the size read above, or it is still being written.
      return (await newlineEnd(handle, offset, size, 'first')) > 0
    } finally {
      await handle.close()
    }
  }

  #size(runId: string): Promise<number> {
    return stat(this.#path(runId)).then((s) => s.size, () => 0)
  }

  #path(runId: string): string {
    return join(this.#dir, `${encodeURIComponent(runId)}.jsonl`)
  }
}

/**
 * A cursor is the offset just past a newline (or 0). One that is not — a cursor of this log
 * before `rekey` rewrote it with lines of other sizes — is refused by name rather than read from
 * the middle of a line.
 */
async function assertLineStart(handle: FileHandle, runId: string, offset: number): Promise<void> {
  if (offset === 0) return
  const byte = Buffer.alloc(1)
  const { bytesRead } = await handle.read(byte, 0, 1, offset - 1)
  if (bytesRead === 1 && byte[0] === NEWLINE) return
  const { size } = await handle.stat()
  // Past the end is a cursor of lines not written yet (a crash cut them off): nothing to read.
  if (offset > size) return
  throw new InvalidArgumentError(`cursor ${offset} is not the end of an event in run ${runId}'s event file: the log was rewritten since that cursor was read (a rekey re-seals it); read the run's events again from the start`)
}

/**
 * The offset just past the first (or last) newline between offsets `from` and `to` of the file, or
 * 0 when there is none. Read a chunk at a time, however long the line (an event may carry a large output).
 */
async function newlineEnd(handle: FileHandle, from: number, to: number, which: 'first' | 'last'): Promise<number> {
  const buffer = Buffer.alloc(Math.min(Math.max(to - from, 0), 64 * 1024))
  for (let done = 0; done < to - from; done += buffer.length) {
    const length = Math.min(buffer.length, to - from - done)
    const start = which === 'first' ? from + done : to - done - length
    const chunk = buffer.subarray(0, (await handle.read(buffer, 0, length, start)).bytesRead)
    const at = which === 'first' ? chunk.indexOf(NEWLINE) : chunk.lastIndexOf(NEWLINE)
    if (at >= 0) return start + at + 1
  }
  return 0
}
