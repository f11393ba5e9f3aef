/**
 * How the SQLite engine stores the columns of a checkpoint row from schema version 7 on. Each
 * compact form is a value the text form never takes, so rows written before keep their text and
 * read as they are:
 *
 * - `parent_id` `''`: the run's previous checkpoint (the one with the next lower seq), resolved by
 *   the statements that read the column (see `sql.ts`); a deletion first writes the id out in the
 *   row that follows (see `adoptParent`). Ids are never empty, so `''` is no id of its own.
 * - `kind` and `phase`: one control character, U+0001 for the first name of {@link STORED_NAMES}
 *   and so on (a name that is itself such a character is stored as a blob of its UTF-8 bytes).
 * - `lists`: `''` for a row without lists (`[]`); list refs are never empty text.
 * - `digest`: a blob of the bytes of a hex digest (16 bytes for the 32 characters a row carries).
 * - `metadata`: the runner's usual metadata in a few characters (see `compact-metadata.ts`).
 *
 * Codes are text rather than numbers or blobs: the columns have TEXT affinity (SQLite would store
 * a number as its text), and each blob read costs a Buffer. The digest covers the fields as read
 * back, so a stored form decodes to exactly the text it replaces, and a value of an unexpected
 * type is passed on for `EngineStore` to reject.
 */

/** Names stored as their position in this list. Append only: a stored position never changes meaning. */
export const STORED_NAMES: readonly string[] = [
  'runner',
  'run_started',
  'step_started',
  'pre_llm',
  'post_llm',
  'pre_tool_batch',
  'post_tool_batch',
  'pre_subagent_batch',
  'post_subagent_batch',
  'run_paused',
  'run_terminal',
  'agent',
  'after_model',
  'after_tools',
]

const NAME_CODES = new Map(STORED_NAMES.map((name, k) => [name, String.fromCharCode(k + 1)]))
const CODED_NAMES = new Map(STORED_NAMES.map((name, k) => [String.fromCharCode(k + 1), name]))
const HEX_DIGEST = /^(?:[0-9a-f]{32}|[0-9a-f]{64})$/
const NO_LISTS = '[]'

/** The stored form of a kind or phase. */
export function storedName(name: string): string | Buffer {
  const code = NAME_CODES.get(name)
  if (code !== undefined) return code
  // A name that is itself a code is kept apart from it as bytes.
  return CODED_NAMES.has(name) ? Buffer.from(name, 'utf8') : name
}

/** A kind or phase as read back. */
export function nameOf(stored: unknown): unknown {
  if (typeof stored === 'string') return stored.length === 1 ? (CODED_NAMES.get(stored) ?? stored) : stored
  return Buffer.isBuffer(stored) ? stored.toString('utf8') : stored
}

/** The stored form of a row's list refs. */
export function storedLists(lists: string): string {
  return lists === NO_LISTS ? '' : lists
}

/** List refs as read back. */
export function listsOf(stored: unknown): unknown {
  return stored === '' ? NO_LISTS : stored
}

/** The stored form of a digest: the bytes of a hex digest, any other text (a signature) as it is. */
export function storedDigestColumn(digest: string): string | Buffer {
  return HEX_DIGEST.test(digest) ? Buffer.from(digest, 'hex') : digest
}

/** A digest as read back. */
export function digestOf(stored: unknown): unknown {
  return Buffer.isBuffer(stored) && (stored.length === 16 || stored.length === 32) ? stored.toString('hex') : stored
}

/** The stored `parent_id`: `''` when the parent is the checkpoint stored just before in the run. */
export function storedParent(parentId: string | null, previousId: string | undefined): string | null {
  return parentId !== null && parentId === previousId ? '' : parentId
}
