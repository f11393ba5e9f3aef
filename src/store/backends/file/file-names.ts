import { join } from 'node:path'
import { assertId } from '../../encoding/validate.js'

/**
 * Where everything of a file store lives, and the one place ids become path segments:
 *
 * ```
 * <root>/runs/<runId>/log.jsonl    every change of the run, one frame a line
 * <root>/runs/<runId>/head.json    how far the log reached when last synced
 * <root>/keys/<keyId>.check        a signing key's check value
 * <root>/leases.json, process.lock the leases of the process running runs
 * <root>/events/<runId>.jsonl      the run's event log
 * ```
 *
 * Run, checkpoint and list ids must be valid ids (see `assertId`: never a path; checked before
 * anything is written, and a checkpoint id is written in the clear in its frame's header). In a path
 * they are written with every character outside `[a-z0-9_.@-]` as `%xx` (so `Run:1` is
 * `%52un%3a1`), which keeps two ids distinct on case-insensitive file systems and keeps `:` out
 * of Windows paths; Cairn's own ids are lowercase UUIDs and appear unchanged.
 */
export class FileLayout {
  readonly runsDir: string
  readonly keysDir: string

  constructor(readonly root: string) {
    this.runsDir = join(root, 'runs')
    this.keysDir = join(root, 'keys')
  }

  runDir(runId: string): string {
    return join(this.runsDir, idToName(runId, 'runId'))
  }

  logFile(runId: string): string {
    return join(this.runDir(runId), 'log.jsonl')
  }

  headFile(runId: string): string {
    return join(this.runDir(runId), 'head.json')
  }

  keyCheckFile(keyId: string): string {
    return join(this.keysDir, `${idToName(keyId, 'keyId')}.check`)
  }
}

const PLAIN_CHAR = /[a-z0-9_.@-]/
const WINDOWS_DEVICE = /^(con|prn|aux|nul|com\d|lpt\d)(\.|$)/i

/** The path segment of an id; throws `InvalidArgumentError` for an invalid id. */
function idToName(id: string, what: string): string {
  assertId(id, what)
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
  try {
    return idToName(id, 'id') === name ? id : undefined
  } catch {
    return undefined
  }
}
