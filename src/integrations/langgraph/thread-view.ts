import type { CheckpointRecord, PendingWriteRecord, RunRecord, StoreReader } from '../../store/checkpoint-store.js'
import { LANGGRAPH_KIND } from './identity.js'

/**
 * A LangGraph thread as an operator reads it in `cairn runs`, `cairn show` and the inspector. This
 * file reads what `CairnSaver` stored without LangGraph installed: the checkpoint headers, the
 * checkpoint's channel versions and the pending writes. Values a custom serde wrote as bytes are
 * shown as such; JSON is shown as JSON.
 */

/** Where a thread stands, from its latest checkpoint. */
export type ThreadState = 'interrupted' | 'done' | 'pending' | 'empty'

/** One thread namespace (a Cairn run written by `CairnSaver`), in a listing. */
export interface ThreadSummary {
  runId: string
  threadId: string
  checkpointNs: string
  /** `interrupted`: waiting on `interrupt()`; `done`: no node left to run; `pending`: nodes to run. */
  state: ThreadState
  /** LangGraph's step of the latest checkpoint (-1 for the input checkpoint). */
  step: number | null
  /** The nodes the latest checkpoint will run next. */
  next: string[]
  /** The values passed to `interrupt()` that no `Command({ resume })` has answered yet. */
  interrupts: unknown[]
  checkpoints: number
  updatedAt: number
}

/** One LangGraph checkpoint of a thread, oldest first: a line of `cairn show`. */
export interface ThreadEntry {
  index: number
  /** The Cairn checkpoint id (`lg.…`), which `cairn show --payload`, `diff` and `fork` take. */
  checkpointId: string
  /** LangGraph's own checkpoint id. */
  langgraphId: string
  /** `input`, `loop`, `update` or `fork`. */
  source: string
  step: number | null
  /** The nodes whose writes this checkpoint applied. */
  writers: string[]
  next: string[]
  createdAt: number
  sinceStartMs: number
}

/** A thread namespace's state and its checkpoints: what `cairn show` prints. */
export interface ThreadTimeline {
  summary: ThreadSummary
  entries: ThreadEntry[]
}

/**
 * Summarize a run written by `CairnSaver` (a thread namespace) from its latest checkpoint and that
 * checkpoint's pending writes; undefined for any other run.
 */
export async function summarizeThread(store: StoreReader, run: RunRecord): Promise<ThreadSummary | undefined> {
  if (!isThreadRun(run)) return undefined
  const place = placeOf(run)
  const latest = await store.getLatest<SavedPayload>({ runId: run.runId })
  const checkpoints = await countCheckpoints(store, run.runId)
  if (!latest || latest.kind !== LANGGRAPH_KIND) {
    return { runId: run.runId, ...place, state: 'empty', step: null, next: [], interrupts: [], checkpoints, updatedAt: run.updatedAt }
  }
  const writes = await store.listPendingWrites(run.runId, [latest.id])
  const next = nextNodes(latest)
  const interrupts = openInterrupts(writes)
  const state: ThreadState = interrupts.length > 0 ? 'interrupted' : next.length === 0 ? 'done' : 'pending'
  return { runId: run.runId, ...place, state, step: metadataOf(latest).step, next, interrupts, checkpoints, updatedAt: latest.createdAt }
}

/**
 * The timelines of a LangGraph thread, one per namespace, found by its thread id or by the run id of
 * one namespace; empty when `id` is neither.
 */
export async function buildThreadTimelines(store: StoreReader, id: string): Promise<ThreadTimeline[]> {
  const run = await store.getRun(id)
  const runs = run ? (isThreadRun(run) ? [run] : []) : (await store.listRuns({ threadId: id, limit: 1000 })).filter((r) => isThreadRun(r) && placeOf(r).threadId === id)
  const timelines: ThreadTimeline[] = []
  for (const thread of runs) timelines.push({ summary: (await summarizeThread(store, thread))!, entries: await threadEntries(store, thread) })
  return timelines
}

/** Every LangGraph checkpoint of a thread namespace, oldest first, described. */
async function threadEntries(store: StoreReader, run: RunRecord): Promise<ThreadEntry[]> {
  const records = store.loadRun
    ? await store.loadRun<SavedPayload>(run.runId, { kind: LANGGRAPH_KIND })
    : await loadAll(store, run.runId)
  const start = records[0]?.createdAt ?? run.createdAt
  const byLangGraphId = new Map(records.map((record) => [headerOf(record)?.checkpointId, record]))
  return records.map((record, i) => {
    const header = headerOf(record)
    const parent = header?.parentId ? byLangGraphId.get(header.parentId) : undefined
    const { source, step } = metadataOf(record)
    return {
      index: i + 1,
      checkpointId: record.id,
      langgraphId: header?.checkpointId ?? '',
      source,
      step,
      writers: writersOf(record, parent),
      next: nextNodes(record),
      createdAt: record.createdAt,
      sinceStartMs: record.createdAt - start,
    }
  })
}

/** The lines `cairn show` prints for a thread namespace. */
export function formatThreadTimeline({ summary, entries }: ThreadTimeline): string[] {
  const ns = summary.checkpointNs === '' ? '' : `  namespace ${JSON.stringify(summary.checkpointNs)}`
  const lines = [`LangGraph thread ${JSON.stringify(summary.threadId)}${ns}  (run ${summary.runId})`, `  ${describeState(summary)}`, '']
  const idWidth = Math.max(10, ...entries.map((entry) => entry.checkpointId.length))
  lines.push(`   ${'#'.padStart(3)}  ${'ms'.padStart(6)}  ${'step'.padStart(4)}  ${'source'.padEnd(7)}${'checkpoint'.padEnd(idWidth + 2)}what happened`)
  for (const entry of entries) {
    const what = [entry.writers.length > 0 ? `written by ${entry.writers.join(', ')}` : '', entry.next.length > 0 ? `next: ${entry.next.join(', ')}` : 'nothing left to run']
    lines.push(`   ${String(entry.index).padStart(3)}  ${String(entry.sinceStartMs).padStart(6)}  ${String(entry.step ?? '').padStart(4)}  ${entry.source.padEnd(7)}${entry.checkpointId.padEnd(idWidth + 2)}${what.filter(Boolean).join('; ')}`)
  }
  return lines
}

/** A thread's state in one line. */
function describeState(summary: ThreadSummary): string {
  switch (summary.state) {
    case 'interrupted':
      return `interrupted at step ${summary.step}, waiting for an answer to ${summary.interrupts.map((value) => JSON.stringify(value)).join(', ')} (next: ${summary.next.join(', ')})`
    case 'done':
      return `done at step ${summary.step}`
    case 'pending':
      return `at step ${summary.step}, next: ${summary.next.join(', ')}`
    case 'empty':
      return 'no checkpoint yet'
  }
}

/** Whether a run is a thread namespace written by `CairnSaver`. */
function isThreadRun(run: RunRecord): boolean {
  const place = run.metadata?.langgraph as { threadId?: unknown; checkpointNs?: unknown } | undefined
  return run.name === LANGGRAPH_KIND && typeof place === 'object' && place !== null && typeof place.threadId === 'string' && typeof place.checkpointNs === 'string'
}

interface SavedPayload {
  checkpoint: { channel_versions?: Record<string, string | number>; versions_seen?: Record<string, Record<string, string | number>> }
}

interface Header {
  checkpointId: string
  parentId: string | null
  metadata: unknown
  stored: Record<string, string | number>
}

function placeOf(run: RunRecord): { threadId: string; checkpointNs: string } {
  const place = run.metadata.langgraph as { threadId: string; checkpointNs: string }
  return { threadId: place.threadId, checkpointNs: place.checkpointNs }
}

function headerOf(record: CheckpointRecord): Header | undefined {
  const header = record.metadata?.langgraph as unknown
  return typeof header === 'object' && header !== null ? (header as Header) : undefined
}

/** The JSON a serde stored (`{ t: 'json', s }`), or undefined for bytes and other forms. */
function jsonOf(stored: unknown): unknown {
  if (typeof stored !== 'object' || stored === null) return undefined
  const value = stored as { t?: unknown; s?: unknown; j?: unknown; items?: unknown }
  if (Array.isArray(value.items)) return value.items.map(jsonOf)
  if (value.t !== 'json') return undefined
  if ('j' in value) return value.j
  if (typeof value.s !== 'string') return undefined
  try {
    return JSON.parse(value.s) as unknown
  } catch {
    return undefined
  }
}

function metadataOf(record: CheckpointRecord): { source: string; step: number | null } {
  const metadata = jsonOf(headerOf(record)?.metadata) as { source?: unknown; step?: unknown } | undefined
  return { source: typeof metadata?.source === 'string' ? metadata.source : record.phase, step: typeof metadata?.step === 'number' ? metadata.step : null }
}

const versionOf = (value: string | number | undefined): number => (typeof value === 'number' ? value : typeof value === 'string' ? Number.parseFloat(value) || 0 : 0)

/**
 * The nodes a checkpoint runs next: LangGraph triggers node X through the channel `branch:to:X`,
 * and X is due when the checkpoint holds a value of that channel newer than the version X has seen.
 */
function nextNodes(record: CheckpointRecord<SavedPayload> | CheckpointRecord): string[] {
  const header = headerOf(record)
  const seen = (record.payload as SavedPayload | undefined)?.checkpoint?.versions_seen ?? {}
  const next: string[] = []
  for (const [channel, version] of Object.entries(header?.stored ?? {})) {
    if (channel === '__start__') {
      if (versionOf(version) > versionOf(seen.__start__?.__start__)) next.push('__start__')
      continue
    }
    if (!channel.startsWith('branch:to:')) continue
    const node = channel.slice('branch:to:'.length)
    if (versionOf(version) > versionOf(seen[node]?.[channel])) next.push(node)
  }
  return next.sort()
}

/**
 * The nodes whose writes a checkpoint applied: those whose seen versions moved since its parent.
 * LangGraph also keeps versions seen under `__input__` and `__interrupt__` (what its interrupt
 * checks have seen), which are no nodes.
 */
function writersOf(record: CheckpointRecord, parent: CheckpointRecord | undefined): string[] {
  const seen = (record.payload as SavedPayload | undefined)?.checkpoint?.versions_seen ?? {}
  const before = (parent?.payload as SavedPayload | undefined)?.checkpoint?.versions_seen ?? {}
  const writers: string[] = []
  for (const [node, versions] of Object.entries(seen)) {
    if (node === '__input__' || node === '__interrupt__') continue
    const earlier = before[node] ?? {}
    if (Object.entries(versions).some(([channel, version]) => versionOf(version) > versionOf(earlier[channel]))) writers.push(node)
  }
  return writers.sort()
}

/** Values of `interrupt()` calls written to a checkpoint that no resume write answers. */
function openInterrupts(writes: readonly PendingWriteRecord[]): unknown[] {
  if (writes.some((write) => write.channel === '__resume__')) return []
  const values: unknown[] = []
  for (const write of writes.filter((w) => w.channel === '__interrupt__')) {
    const json = jsonOf(write.value)
    for (const item of Array.isArray(json) ? json : [json]) {
      const value = (item as { value?: unknown } | undefined)?.value
      values.push(value === undefined ? item : value)
    }
  }
  return values
}

async function countCheckpoints(store: StoreReader, runId: string): Promise<number> {
  let count = 0
  let before: string | undefined
  for (;;) {
    const page = await store.listCheckpoints({ runId, limit: 500, verify: false, ...(before === undefined ? {} : { before }) })
    count += page.length
    if (page.length < 500) return count
    before = page[page.length - 1]!.id
  }
}

async function loadAll(store: StoreReader, runId: string): Promise<CheckpointRecord<SavedPayload>[]> {
  const ids: string[] = []
  let before: string | undefined
  for (;;) {
    const page = await store.listCheckpoints({ runId, limit: 500, ...(before === undefined ? {} : { before }) })
    ids.push(...page.filter((info) => info.kind === LANGGRAPH_KIND).map((info) => info.id))
    if (page.length < 500) break
    before = page[page.length - 1]!.id
  }
  ids.reverse()
  return store.loadMany<SavedPayload>(ids)
}
