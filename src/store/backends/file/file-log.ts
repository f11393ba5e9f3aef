import { createHash } from 'node:crypto'
import { CheckpointCorruptionError } from '../../../core/errors.js'
import { applyChange, emptyRunState, unreadableRow, type RunChange, type RunState } from '../../engine/in-process-engine.js'
import { carryProgress } from '../../engine/run-patch.js'

/**
 * The log of one run: the file store's only record of it. Each change of the run (a commit, a
 * change of its row, pending writes, its effects deleted) is one frame, one line:
 *
 * ```
 * <check> <seq>:<checkpointId>,… <record JSON>\n
 * ```
 *
 * `<check>` is 32 hex digits of the SHA-256 of the previous frame's check and the rest of the
 * line, so every frame vouches for the one before it: an edited frame, or one removed from the
 * middle, makes the check of a complete frame fail. The checkpoint ids (`-` for none) are in the
 * clear so that even a frame that fails its check names what it held. A last frame without its
 * newline is a write cut short (never acknowledged): it is not read, and the next write cuts it
 * off. The record is the change (see {@link RunChange} for its fields and their order), and `g`:
 * the log's generation (its first frame only; a compaction writes the next one).
 */
export interface LogRecord extends RunChange {
  g?: number
}

/** One run as its log folds to, and where the log's reading stopped. */
export interface RunLog extends RunState {
  /** Why the run cannot be used (a frame other than a checkpoint's failed its check, or a rollback): thrown by every call that needs the run. */
  error: Error | undefined
  /** Complete frames read, the check of the last one, and the byte offset just after it. */
  frames: number
  check: string
  end: number
  gen: number
  /** The log file this state was read from (its inode), or undefined when there is none. */
  ino: bigint | undefined
}

export function emptyLog(runId: string): RunLog {
  return { ...emptyRunState(runId), error: undefined, frames: 0, check: '', end: 0, gen: 0, ino: undefined }
}

/** A frame's bytes, chained to `previous` (the check of the frame before it). Returns the frame and its check. */
export function encodeFrame(previous: string, record: LogRecord): { bytes: Buffer; check: string } {
  const ids = record.c && record.c.length > 0 ? record.c.map((row) => `${row.seq}:${row.id}`).join(',') : '-'
  const rest = `${ids} ${JSON.stringify(record)}`
  const check = frameCheck(previous, rest)
  return { bytes: Buffer.from(`${check} ${rest}\n`, 'utf8'), check }
}

function frameCheck(previous: string, rest: string): string {
  return createHash('sha256').update(previous).update(' ').update(rest).digest('hex').slice(0, 32)
}

const CHECK = /^[0-9a-f]{32}$/

/**
 * Fold the complete frames of `bytes` (the log from `log.end` on) into `log`. Stops before a
 * last frame without its newline. A frame that fails its check is not applied: its checkpoints
 * are kept as rows of their ids only (reported as corrupt when read), and when it names none the
 * whole run is refused. Returns the check of frame number `mark` when it is among those read.
 */
export function foldFrames(log: RunLog, bytes: Buffer, path: string, mark?: number): string | undefined {
  let marked: string | undefined
  const base = log.end
  eachLine(bytes, (line, end) => {
    log.end = base + end
    log.frames++
    const { stored, rest } = splitFrame(line)
    const ok = chains(log.check, line)
    log.check = CHECK.test(stored) ? stored : frameCheck(log.check, line)
    const record = ok ? parseRecord(rest) : undefined
    if (record) applyRecord(log, record)
    else damaged(log, rest, path)
    if (log.frames === mark) marked = log.check
  })
  return marked
}

/**
 * The checkpoint ids the complete frames of `bytes` name in their headers, read without checking
 * or folding the frames: what the directory's id index needs of a run.
 */
export function frameIds(bytes: Buffer): string[] {
  const ids: string[] = []
  eachLine(bytes, (line) => {
    for (const named of namedCheckpoints(splitFrame(line).rest) ?? []) ids.push(named.id)
  })
  return ids
}

/** The checkpoints a frame's header names (`<seq>:<id>,… ` after its check); undefined when it names none or is damaged. */
function namedCheckpoints(rest: string): { seq: number; id: string }[] | undefined {
  const header = /^(\d+:[A-Za-z0-9_.:@-]+(,\d+:[A-Za-z0-9_.:@-]+)*) /.exec(rest)?.[1]
  return header?.split(',').map((pair) => {
    const colon = pair.indexOf(':')
    return { seq: Number(pair.slice(0, colon)), id: pair.slice(colon + 1) }
  })
}

/**
 * Whether `bytes` (read from where `log` stopped) go on from the log's last frame: their first
 * whole frame chains to it. Otherwise the file was rewritten in place, and is read again whole.
 */
export function continues(log: RunLog, bytes: Buffer): boolean {
  const newline = bytes.indexOf(0x0a)
  return newline < 0 || chains(log.check, bytes.toString('utf8', 0, newline))
}

/** Call `fn` with each complete line of `bytes` and the offset just after it. */
function eachLine(bytes: Buffer, fn: (line: string, end: number) => void): void {
  let start = 0
  for (let newline = bytes.indexOf(0x0a); newline >= 0; newline = bytes.indexOf(0x0a, start)) {
    fn(bytes.toString('utf8', start, newline), newline + 1)
    start = newline + 1
  }
}

/** A frame's line as its stored check and the rest. */
function splitFrame(line: string): { stored: string; rest: string } {
  const space = line.indexOf(' ')
  return { stored: line.slice(0, space), rest: line.slice(space + 1) }
}

/** Whether a frame's stored check is that of the frame before it (`previous`) and the rest of its line. */
function chains(previous: string, line: string): boolean {
  const space = line.indexOf(' ')
  return space > 0 && frameCheck(previous, line.slice(space + 1)) === line.slice(0, space)
}

function parseRecord(rest: string): LogRecord | undefined {
  try {
    const value = JSON.parse(rest.slice(rest.indexOf(' ') + 1)) as unknown
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? value : undefined
  } catch {
    return undefined
  }
}

function damaged(log: RunLog, rest: string, path: string): void {
  const named = namedCheckpoints(rest)
  if (named === undefined) {
    log.error ??= new CheckpointCorruptionError(
      `run ${log.runId}: frame ${log.frames} of its log ${path} is corrupt (it fails its check); restore the log from a backup, or delete the run's directory to drop the run`,
      { runId: log.runId },
    )
    return
  }
  for (const { id, seq } of named) {
    applyChange(log, { c: [unreadableRow(log.runId, id, seq)] })
    // The run went on to this seq: removing the damaged checkpoint must not make an older one its latest.
    if (log.row && log.row.lastSeq < seq) log.row = carryProgress(log.row, seq)
  }
}

/** Apply one record to the folded state (what a write does to the state it keeps, too). */
export function applyRecord(log: RunLog, record: LogRecord): void {
  if (record.g !== undefined && log.frames <= 1) log.gen = record.g
  applyChange(log, record)
}

/**
 * A log of the next generation holding what `log` holds now (a compaction): the run row, lists,
 * effects and pending writes in its first frame, then one frame per checkpoint.
 */
export function compactedLog(log: RunLog): Buffer {
  const base: LogRecord = { g: log.gen + 1 }
  if (log.row) base.r = log.row
  if (log.lists.size > 0) base.a = [...log.lists].map(([id, items]) => [id, 0, items])
  if (log.effects.size > 0) base.e = [...log.effects.values()]
  const writes = [...log.writes.values()].flatMap((map) => [...map.values()])
  if (writes.length > 0) base.w = writes
  let check = ''
  const frames = [base, ...log.checkpoints.map((row) => ({ c: [row] }))].map((record) => {
    const frame = encodeFrame(check, record)
    check = frame.check
    return frame.bytes
  })
  return Buffer.concat(frames)
}

/** The head file: how far the log reached when it was last synced (see `checkHead`). */
export interface LogHead {
  g: number
  n: number
  h: string
}

/**
 * Refuse a log that is shorter than, or differs from, what its head file recorded: its last
 * frames were removed (a rollback). A log of a newer generation than the head is a compaction
 * whose head was not written yet.
 */
export function checkHead(log: RunLog, head: LogHead | undefined, headAt: string | undefined, path: string): void {
  if (!head || log.error) return
  const rolledBack = log.gen < head.g || (log.gen === head.g && (log.frames < head.n || (head.n > 0 && headAt !== head.h)))
  if (!rolledBack) return
  log.error = new CheckpointCorruptionError(
    `run ${log.runId}: its log ${path} holds ${log.frames} frames of generation ${log.gen}, but the store had synced ${head.n} frames of generation ${head.g} ` +
      'with other contents: frames were removed or replaced behind the store\'s back (a rollback); restore the log from a backup',
    { runId: log.runId },
  )
}

export function isLogHead(value: unknown): value is LogHead {
  const head = value as Partial<LogHead> | null
  return typeof head === 'object' && head !== null && Number.isSafeInteger(head.g) && Number.isSafeInteger(head.n) && typeof head.h === 'string'
}
