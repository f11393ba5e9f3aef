import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { InvalidArgumentError } from '../../../core/errors.js'

/**
 * Where everything of a file store lives, and the one place ids become path segments:
 *
 * ```
 * <root>/runs/<runId>/run.json
 * <root>/runs/<runId>/checkpoints/<seq padded to 12>-<checkpointId>.json
 * <root>/runs/<runId>/lists/<listId>.jsonl
 * <root>/runs/<runId>/effects/x<hex of callId>.json   (h<sha256>.json for a long callId)
 * ```
 *
 * Run, checkpoint and list ids must be safe ids (checked before any path is built). In a path
 * they are written with every character outside `[a-z0-9_.@-]` as `%xx` (so `Run:1` is
 * `%52un%3a1`), which keeps two ids distinct on case-insensitive file systems and keeps `:` out
 * of Windows paths; Cairn's own ids are lowercase UUIDs and appear unchanged.
 */
export class FileLayout {
  readonly runsDir: string

  constructor(readonly root: string) {
    this.runsDir = join(root, 'runs')
  }

  runDir(runId: string): string {
    return join(this.runsDir, idToName(runId, 'runId'))
  }

  runFile(runId: string): string {
    return join(this.runDir(runId), 'run.json')
  }

  checkpointsDir(runId: string): string {
    return join(this.runDir(runId), 'checkpoints')
  }

  listsDir(runId: string): string {
    return join(this.runDir(runId), 'lists')
  }

  listFile(runId: string, listId: string): string {
    return join(this.listsDir(runId), `${idToName(listId, 'listId')}.jsonl`)
  }

  effectsDir(runId: string): string {
    return join(this.runDir(runId), 'effects')
  }

  effectFile(runId: string, callId: string): string {
    return join(this.effectsDir(runId), effectFileName(callId))
  }

  /** The directory of the key check values, one file per key id. */
  get keysDir(): string {
    return join(this.root, 'keys')
  }

  keyCheckFile(keyId: string): string {
    return join(this.keysDir, `${idToName(keyId, 'keyId')}.check`)
  }
}

/** A checkpoint file: its seq and id are in its name, so neither needs the file to be readable. */
export interface CheckpointFile {
  seq: number
  id: string
  name: string
}

const SAFE_ID = /^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,199}$/
const PLAIN_CHAR = /[a-z0-9_.@-]/
const WINDOWS_DEVICE = /^(con|prn|aux|nul|com\d|lpt\d)(\.|$)/i
const SEQ_DIGITS = 12

/**
 * Throw unless `id` is a safe id: 1–200 letters, digits or `_ . : @ -`, not starting with `.` or
 * `-`, without `..`. Anything else (a `/`, a `\`, NUL, `..`) could escape the store's directory.
 */
export function assertSafeId(id: unknown, what: string): asserts id is string {
  if (typeof id !== 'string' || !SAFE_ID.test(id) || id.includes('..')) {
    throw new InvalidArgumentError(
      `file store: ${what} ${JSON.stringify(id)} is not a safe id (1-200 letters, digits or _ . : @ -, not starting with . or -, no '..'); refusing to use it in a path`,
    )
  }
}

/** The path segment of a safe id. */
export function idToName(id: string, what: string): string {
  assertSafeId(id, what)
  let name = ''
  for (let i = 0; i < id.length; i++) {
    const char = id.charAt(i)
    const plain = PLAIN_CHAR.test(char) && !(char === '.' && i === id.length - 1) && !(i === 0 && WINDOWS_DEVICE.test(id))
    name += plain ? char : `%${char.charCodeAt(0).toString(16).padStart(2, '0')}`
  }
  return name
}

/** The id a path segment stands for, or `undefined` for a name this store did not write. */
export function nameToId(name: string): string | undefined {
  const id = name.replace(/%([0-9a-f]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))
  if (!SAFE_ID.test(id) || id.includes('..')) return undefined
  return idToName(id, 'id') === name ? id : undefined
}

export function checkpointFileName(seq: number, id: string): string {
  return `${String(seq).padStart(SEQ_DIGITS, '0')}-${idToName(id, 'checkpointId')}.json`
}

/** Parse a checkpoint file name; `undefined` for a temp file or anything else. */
export function parseCheckpointFileName(name: string): CheckpointFile | undefined {
  const match = /^(\d+)-(.+)\.json$/.exec(name)
  if (!match?.[1] || !match[2]) return undefined
  const seq = Number(match[1])
  const id = nameToId(match[2])
  return Number.isSafeInteger(seq) && seq > 0 && id !== undefined ? { seq, id, name } : undefined
}

/** The list id of a list file name, or `undefined`. */
export function parseListFileName(name: string): string | undefined {
  return name.endsWith('.jsonl') ? nameToId(name.slice(0, -'.jsonl'.length)) : undefined
}

/**
 * Effect call ids are free-form (a model's tool-use id), so they are never used as they are:
 * the file name is `x` and the hex of the id's UTF-8 bytes, or `h` and its SHA-256 when that
 * would be long. The row inside names the call id, so the name never needs decoding.
 */
export function effectFileName(callId: string): string {
  const hex = Buffer.from(callId, 'utf8').toString('hex')
  return hex.length <= 200 ? `x${hex}.json` : `h${createHash('sha256').update(callId, 'utf8').digest('hex')}.json`
}

/** Whether a file name is one `effectFileName` produces. */
export function isEffectFileName(name: string): boolean {
  return /^(x([0-9a-f]{2})*|h[0-9a-f]{64})\.json$/.test(name)
}
