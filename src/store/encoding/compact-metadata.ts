/**
 * The compact stored form of the metadata the runner gives most checkpoints, used by the SQL
 * engines from their schema version 7. Metadata is stored as JSON text
 * of an object, so it always starts with `{`; a stored value that does not is a compact form:
 *
 * | stored  | metadata                                         |
 * | ------- | ------------------------------------------------ |
 * | `f<n>`  | `{"step":<n>,"snapshot":false}`                  |
 * | `t<n>`  | `{"step":<n>,"snapshot":true}`                   |
 * | `c<n>`  | `{"step":<n>,"snapshot":false,"coalesced":true}` |
 *
 * A compact form reads back as exactly the text it replaced, so digests over the metadata text
 * verify unchanged; any other stored text is returned as it is (and rejected later if it is not
 * an object).
 */

const PLAIN = /^\{"step":(0|[1-9][0-9]{0,14}),"snapshot":(true|false)\}$/
const COALESCED = /^\{"step":(0|[1-9][0-9]{0,14}),"snapshot":false,"coalesced":true\}$/
const COMPACT = /^([ftc])(0|[1-9][0-9]{0,14})$/

/** The stored form of a checkpoint's metadata text. */
export function storedMetadata(metadata: string): string {
  // Checked first without a regular expression: most metadata of other shapes is longer.
  if (metadata.length > 58 || !metadata.startsWith('{"step":')) return metadata
  const plain = PLAIN.exec(metadata)
  if (plain) return `${plain[2] === 'true' ? 't' : 'f'}${plain[1]!}`
  const coalesced = COALESCED.exec(metadata)
  return coalesced ? `c${coalesced[1]!}` : metadata
}

/** A checkpoint's metadata text as read back from its stored form. */
export function metadataOf(stored: unknown): unknown {
  if (typeof stored !== 'string' || stored.startsWith('{')) return stored
  const compact = COMPACT.exec(stored)
  if (!compact) return stored
  const step = compact[2]!
  if (compact[1] === 'c') return `{"step":${step},"snapshot":false,"coalesced":true}`
  return `{"step":${step},"snapshot":${compact[1] === 't' ? 'true' : 'false'}}`
}
