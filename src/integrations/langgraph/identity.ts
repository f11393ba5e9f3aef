import { sha256 } from '../../core/hash.js'

/** The `kind` of every checkpoint a `CairnSaver` writes, and the `name` of its runs. */
export const LANGGRAPH_KIND = 'langgraph'

/** Where one LangGraph checkpoint namespace of one thread lives: a Cairn run. */
export interface ThreadNamespace {
  threadId: string
  checkpointNs: string
}

/**
 * The Cairn run of a thread's namespace. Thread ids and namespaces are free text (a namespace
 * holds `|` and `:`), so the id is a digest of both, kept apart by JSON: two different pairs never
 * share a run. The pair itself is kept on the run (`threadId`, metadata).
 */
export function runIdOf(place: ThreadNamespace): string {
  return digestOf(JSON.stringify([place.threadId, place.checkpointNs]))
}

/**
 * The Cairn checkpoint id of a LangGraph checkpoint id in a thread's namespace: a digest, so
 * `getTuple` by id is one read of the store by its primary key, and the same LangGraph id in
 * another thread or namespace is another checkpoint.
 */
export function checkpointKeyOf(place: ThreadNamespace, checkpointId: string): string {
  return digestOf(JSON.stringify([place.threadId, place.checkpointNs, checkpointId]))
}

/** Ids recently made: every put and putWrites of a thread names its run and the same few checkpoints again. */
const RECENT_IDS = 1024
const recent = new Map<string, string>()

/**
 * The first 128 bits of the text's SHA-256, in hex: no two threads share an id but by a collision
 * nobody can aim at an existing thread, and every row and index entry that names a run or a
 * checkpoint stays short (a 64-digit id made each superstep write 6 % more WAL frames).
 */
function digestOf(text: string): string {
  const known = recent.get(text)
  if (known !== undefined) return known
  const id = `lg.${sha256(text).slice(0, 32)}`
  if (recent.size >= RECENT_IDS) recent.delete(recent.keys().next().value!)
  recent.set(text, id)
  return id
}
