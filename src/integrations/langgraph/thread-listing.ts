import type { ChannelVersions, CheckpointMetadata } from '@langchain/langgraph-checkpoint'
import type { CheckpointInfo, CheckpointStore, RunRecord } from '../../store/checkpoint-store.js'
import { compareCodePoints } from '../../store/encoding/write-rows.js'
import { LANGGRAPH_KIND, runIdOf } from './identity.js'
import type { StoredValue } from './stored-values.js'

const PAGE = 500

/** What the header (the checkpoint's Cairn metadata) says of a LangGraph checkpoint: enough to list and filter without payloads. */
export interface SavedHeader {
  threadId: string
  checkpointNs: string
  checkpointId: string
  parentId: string | null
  /** LangGraph's metadata of the checkpoint, through the saver's serde. */
  metadata: StoredValue
  /** The version of each channel whose value the checkpoint stores. */
  stored: ChannelVersions
}

/** A checkpoint header selected by a listing, with its LangGraph header. */
export interface ListedHeader {
  info: CheckpointInfo
  header: SavedHeader
}

/** What `listHeaders` selects by. */
export interface HeaderQuery {
  checkpointId: string | undefined
  /** Only checkpoints whose LangGraph id sorts before this one. */
  before: string | undefined
  limit: number | undefined
  /** Metadata fields that must equal these values. */
  filter: Record<string, unknown> | undefined
  metadataOf: (header: SavedHeader) => Promise<CheckpointMetadata>
}

/**
 * The Cairn runs of a LangGraph thread: one namespace's run when `checkpointNs` is given, else
 * every namespace of the thread, else (no thread) every LangGraph run of the store.
 */
export async function threadRuns(store: CheckpointStore, threadId: string | undefined, checkpointNs: string | undefined): Promise<string[]> {
  if (threadId !== undefined && checkpointNs !== undefined) return [runIdOf({ threadId, checkpointNs })]
  const runs: RunRecord[] = []
  let before: string | undefined
  for (;;) {
    const page = await store.listRuns({ limit: PAGE, ...(threadId === undefined ? {} : { threadId }), ...(before === undefined ? {} : { before }) })
    runs.push(...page)
    if (page.length < PAGE) break
    before = page[page.length - 1]!.runId
  }
  return runs.filter((run) => run.name === LANGGRAPH_KIND && isLangGraphRun(run, threadId, checkpointNs)).map((run) => run.runId)
}

/**
 * The headers of the runs' checkpoints that match `query`, newest LangGraph id first, at most
 * `limit`: payloads are not read. One run and no filters read only the page needed.
 */
export async function listHeaders(store: CheckpointStore, runIds: readonly string[], query: HeaderQuery): Promise<ListedHeader[]> {
  const simple = runIds.length === 1 && query.checkpointId === undefined && query.before === undefined && (query.filter === undefined || Object.keys(query.filter).length === 0)
  const selected: ListedHeader[] = []
  for (const runId of runIds) {
    for (const info of await allCheckpoints(store, runId, simple ? query.limit : undefined)) {
      const header = info.metadata?.langgraph as SavedHeader | undefined
      if (info.kind !== LANGGRAPH_KIND || typeof header !== 'object' || header === null) continue
      if (query.checkpointId !== undefined && header.checkpointId !== query.checkpointId) continue
      if (query.before !== undefined && compareCodePoints(header.checkpointId, query.before) >= 0) continue
      if (query.filter && !matches(await query.metadataOf(header), query.filter)) continue
      selected.push({ info, header })
    }
  }
  selected.sort((a, b) => compareCodePoints(b.header.checkpointId, a.header.checkpointId))
  return query.limit === undefined ? selected : selected.slice(0, Math.max(0, query.limit))
}

async function allCheckpoints(store: CheckpointStore, runId: string, limit: number | undefined): Promise<CheckpointInfo[]> {
  const infos: CheckpointInfo[] = []
  let before: string | undefined
  for (;;) {
    const size = limit === undefined ? PAGE : Math.min(PAGE, limit - infos.length)
    if (size <= 0) return infos
    const page = await store.listCheckpoints({ runId, limit: size, ...(before === undefined ? {} : { before }) })
    infos.push(...page)
    if (page.length < size) return infos
    before = page[page.length - 1]!.id
  }
}

function matches(metadata: CheckpointMetadata, filter: Record<string, unknown>): boolean {
  const fields = metadata as Record<string, unknown>
  return Object.entries(filter).every(([key, value]) => deepEqual(fields[key], value))
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  return JSON.stringify(a) === JSON.stringify(b)
}

function isLangGraphRun(run: RunRecord, threadId: string | undefined, checkpointNs: string | undefined): boolean {
  const place = run.metadata?.langgraph as { threadId?: unknown; checkpointNs?: unknown } | undefined
  if (typeof place !== 'object' || place === null || typeof place.threadId !== 'string' || typeof place.checkpointNs !== 'string') return false
  if (checkpointNs !== undefined && place.checkpointNs !== checkpointNs) return false
  return (threadId === undefined || place.threadId === threadId) && run.runId === runIdOf({ threadId: place.threadId, checkpointNs: place.checkpointNs })
}
