import { textOf, toolUsesOf, type Message } from '../model/messages.js'
import type { CheckpointRecord, EffectRecord, EffectStatus, StoreReader } from '../store/checkpoint-store.js'
import { snapshotAtOrBefore } from './fork-run.js'
import { readDiffTails, type DiffSideRead } from './diff-tails.js'
import { loadPhase } from './phase-log.js'
import { RUNNER_KIND, type RuntimeSnapshot } from './phases.js'

/** One side of a diff. */
export interface DiffSide {
  checkpointId: string
  runId: string
  phase: string
  seq: number
  createdAt: number
  /** The checkpoint whose runtime snapshot stands for this one (itself, or the newest before it). */
  runtimeFrom: string | null
}

/** One value that differs between two checkpoints, at a dotted path. */
export interface ValueChange {
  path: string
  before: unknown
  after: unknown
}

/** One journaled call whose status differs at the two checkpoints. */
export interface EffectChange {
  callId: string
  name: string
  before: EffectStatus | null
  after: EffectStatus | null
}

/** What changed between two checkpoints: {@link diffCheckpoints}. */
export interface CheckpointDiff {
  from: DiffSide
  to: DiffSide
  /** Messages in `to` after the conversation both share. */
  messagesAppended: Message[]
  /** Messages of `from` that `to` no longer has (a fork that went another way). */
  messagesDropped: number
  /** State, counters and payload fields that differ (the conversation aside). */
  changes: ValueChange[]
  effects: EffectChange[]
}

/**
 * What changed from checkpoint `fromId` to checkpoint `toId`, of one run or of a run and its
 * fork: the messages appended, the values that differ (state keys, counters, payload fields) and
 * the effect journal entries whose status moved. A runner checkpoint without its own runtime
 * snapshot is compared through the newest snapshot at or before it. An array that extends the
 * other (the tool executions, a log) gives one change per item added or removed, at its index.
 *
 * Two runner checkpoints of one run are read past what they share: the lists of the older
 * snapshot are a prefix of the newer one's (their chain hashes say so), so only the items after
 * it are read, however long the run.
 */
export async function diffCheckpoints(store: StoreReader, fromId: string, toId: string): Promise<CheckpointDiff> {
  // Two runner checkpoints of one run: their snapshots read past the lists they share only.
  const tails = await readDiffTails(store, fromId, toId)
  if (tails) {
    const [from, to] = [sideOfTail(tails.from), sideOfTail(tails.to)]
    const offsets = new Map([...tails.offsets].map(([path, offset]) => [`runtime.${path}`, offset]))
    return diffOf(from, to, offsets, (a, b) => effectsOfCalls(store, a, b))
  }
  return diffWholeCheckpoints(store, fromId, toId)
}

/** {@link diffCheckpoints} of the two records read whole, with every effect of the run. */
export async function diffWholeCheckpoints(store: StoreReader, fromId: string, toId: string): Promise<CheckpointDiff> {
  // Two checkpoints near each other stand on one runtime snapshot: it is read once.
  const reader = loadingOnce(store)
  const [from, to] = await Promise.all([sideOf(reader, fromId), sideOf(reader, toId)])
  return diffOf(from, to, new Map(), (a, b) => effectChanges(store, a, b))
}

/**
 * The diff as text, for `cairn diff`. Each side is named by its checkpoint id, run, stored `seq`
 * and phase; `#N` is left to `cairn show`, whose numbers count the phases of the phase log too.
 */
export function formatDiff(diff: CheckpointDiff): string[] {
  const label = (side: DiffSide) =>
    `${side.checkpointId} (${side.runId} seq ${side.seq} ${side.phase})${side.runtimeFrom && side.runtimeFrom !== side.checkpointId ? `, runtime as of the snapshot ${side.runtimeFrom}` : ''}`
  const lines = [`from ${label(diff.from)}`, `  to ${label(diff.to)}`, '']
  lines.push(`messages: ${diff.messagesAppended.length} appended${diff.messagesDropped ? `, ${diff.messagesDropped} dropped` : ''}`)
  for (const message of diff.messagesAppended) lines.push(`  + ${describeMessage(message)}`)
  lines.push(`values: ${diff.changes.length} changed`)
  for (const change of diff.changes) lines.push(`  ~ ${change.path}: ${short(change.before)} -> ${short(change.after)}`)
  lines.push(`effects: ${diff.effects.length} changed`)
  for (const effect of diff.effects) lines.push(`  ~ ${effect.name} ${effect.callId}: ${effect.before ?? '(none)'} -> ${effect.after ?? '(none)'}`)
  return lines
}

/** A message in one line: role, text and tool calls or results. */
export function describeMessage(message: Message): string {
  const parts: string[] = []
  const text = textOf(message)
  if (text) parts.push(JSON.stringify(text.length > 80 ? `${text.slice(0, 79)}…` : text))
  for (const use of toolUsesOf(message)) parts.push(`call ${use.name} ${use.toolUseId}`)
  for (const block of message.content) if ('toolResult' in block) parts.push(`result of ${block.toolResult.toolUseId} (${block.toolResult.status})`)
  return `${message.role}: ${parts.join(', ')}`
}

/**
 * The diff of two sides. Their messages, and the arrays of their values that `offsets` names (by
 * dotted path), may be tails that start at one index past a prefix the two share: compared from
 * there, they give what the whole arrays give.
 */
async function diffOf(from: Side, to: Side, offsets: ReadonlyMap<string, number>, effects: (from: Side, to: Side) => Promise<EffectChange[]>): Promise<CheckpointDiff> {
  const prefix = commonPrefix(from.messages, to.messages)
  const changes: ValueChange[] = []
  compare(from.value, to.value, '', changes, offsets)
  return {
    from: from.side,
    to: to.side,
    messagesAppended: to.messages.slice(prefix),
    messagesDropped: from.messages.length - prefix,
    changes,
    effects: await effects(from, to),
  }
}

interface Side {
  side: DiffSide
  messages: Message[]
  value: unknown
  /** The runtime snapshot standing for a runner checkpoint (undefined for other kinds, and terminal ones). */
  runtime: RuntimeSnapshot | undefined
}

async function sideOf(store: StoreReader, checkpointId: string): Promise<Side> {
  const record = await loadPhase<Record<string, unknown>>(store, checkpointId)
  const side = { checkpointId: record.id, runId: record.runId, phase: record.phase, seq: record.seq, createdAt: record.createdAt, runtimeFrom: null as string | null }
  if (record.kind !== RUNNER_KIND) {
    return { side, messages: [], value: { phase: record.phase, metadata: record.metadata, payload: record.payload }, runtime: undefined }
  }
  const snapshot = await runtimeAt(store, record)
  const runtime = snapshot?.payload.runtime as RuntimeSnapshot | undefined
  side.runtimeFrom = snapshot?.id ?? null
  const { runtime: _own, ...payload } = record.payload
  const { messages = [], ...rest } = runtime ?? ({} as Partial<RuntimeSnapshot>)
  return { side, messages, value: { phase: record.phase, payload, runtime: rest }, runtime }
}

/** A side read by {@link readDiffTails}: its runtime's lists may be tails. */
function sideOfTail(read: DiffSideRead): Side {
  const { record, runtime } = read
  const side = { checkpointId: record.id, runId: record.runId, phase: record.phase, seq: record.seq, createdAt: record.createdAt, runtimeFrom: read.snapshotId }
  const { runtime: _own, ...payload } = record.payload
  const { messages, ...rest } = runtime
  return { side, messages, value: { phase: record.phase, payload, runtime: rest }, runtime }
}

async function runtimeAt(store: StoreReader, record: CheckpointRecord<Record<string, unknown>>): Promise<CheckpointRecord<Record<string, unknown>> | undefined> {
  try {
    return await snapshotAtOrBefore(store, record)
  } catch {
    return undefined
  }
}

/** `store`, whose `load` of one id is read from it once (for the duration of one diff). */
function loadingOnce(store: StoreReader): StoreReader {
  const loads = new Map<string, Promise<CheckpointRecord>>()
  const load = (id: string) => {
    const loading = loads.get(id) ?? store.load(id)
    loads.set(id, loading)
    return loading
  }
  return new Proxy(store, {
    get(target, property) {
      if (property === 'load') return load
      const value: unknown = Reflect.get(target, property, target)
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value
    },
  })
}

function commonPrefix(a: readonly Message[], b: readonly Message[]): number {
  let i = 0
  // The store hands out the shared items of a conversation once: the same object is the same message.
  while (i < a.length && i < b.length && (a[i] === b[i] || JSON.stringify(a[i]) === JSON.stringify(b[i]))) i++
  return i
}

/**
 * Record every path where `a` and `b` differ. Arrays of equal length are compared item by item;
 * so is an array that extends the other (the items past the shorter one are added or removed),
 * and an array `offsets` names, which holds the items of both sides past a prefix they share
 * (its items are numbered from the offset). Other arrays differ whole.
 */
function compare(a: unknown, b: unknown, path: string, out: ValueChange[], offsets: ReadonlyMap<string, number>): void {
  if (a === b || JSON.stringify(a) === JSON.stringify(b)) return
  if (isObject(a) && isObject(b)) {
    for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) compare(a[key], b[key], path ? `${path}.${key}` : key, out, offsets)
    return
  }
  if (Array.isArray(a) && Array.isArray(b) && (a.length === b.length || offsets.has(path) || extends_(a, b))) {
    const start = offsets.get(path) ?? 0
    for (let i = 0; i < Math.max(a.length, b.length); i++) compare(a[i], b[i], `${path}[${start + i}]`, out, offsets)
    return
  }
  out.push({ path, before: a, after: b })
}

/** Whether the longer of two arrays starts with every item of the shorter. */
function extends_(a: readonly unknown[], b: readonly unknown[]): boolean {
  const [short, long] = a.length <= b.length ? [a, b] : [b, a]
  return short.every((item, i) => item === long[i] || JSON.stringify(item) === JSON.stringify(long[i]))
}

/**
 * Where each journaled call stood at each side: a runner checkpoint knows it from its
 * conversation (a call with a result there had completed; one the pending model response asks
 * for had its intent, except at `post_llm`, which is written before any intent, so a fork made
 * there and its source agree); other checkpoints fall back to the journal's times.
 */
async function effectChanges(store: StoreReader, from: Side, to: Side): Promise<EffectChange[]> {
  // One read of the journal when both sides are of one run.
  const journal = store.listEffects(from.side.runId)
  const other = from.side.runId === to.side.runId ? journal : store.listEffects(to.side.runId)
  return changesOf(statusAt(await journal, from), statusAt(await other, to))
}

/**
 * {@link effectChanges} for two sides read by {@link readDiffTails}: their messages hold only
 * what follows the conversation both share, so a call answered there has one status at both
 * sides and no change; only the calls answered in the tails or pending in either runtime can
 * differ, and only their journal entries are read.
 */
async function effectsOfCalls(store: StoreReader, from: Side, to: Side): Promise<EffectChange[]> {
  const calls = new Set([...callsIn(from), ...callsIn(to)])
  const effects = calls.size === 0 ? [] : await store.getEffects(from.side.runId, [...calls])
  const [before, after] = [statusAt(effects, from), statusAt(effects, to)]
  return changesOf(before, after)
}

/** The calls a runner side answers in its messages or has pending. */
function callsIn(side: Side): string[] {
  const answered = side.messages.flatMap((m) => m.content.flatMap((block) => ('toolResult' in block ? [block.toolResult.toolUseId] : [])))
  const pending = side.runtime?.pending_llm_response ? toolUsesOf(side.runtime.pending_llm_response).map((use) => use.toolUseId) : []
  return [...answered, ...pending]
}

function changesOf(before: Map<string, { name: string; status: EffectStatus }>, after: Map<string, { name: string; status: EffectStatus }>): EffectChange[] {
  const changes: EffectChange[] = []
  for (const callId of new Set([...before.keys(), ...after.keys()])) {
    const a = before.get(callId)
    const b = after.get(callId)
    if (a?.status !== b?.status) changes.push({ callId, name: (a ?? b)!.name, before: a?.status ?? null, after: b?.status ?? null })
  }
  return changes
}

function statusAt(effects: readonly EffectRecord[], side: Side): Map<string, { name: string; status: EffectStatus }> {
  if (side.runtime === undefined) {
    const at = side.side.createdAt
    return new Map(effects.filter((e) => e.startedAt <= at).map((e) => [e.callId, { name: e.name, status: e.completedAt !== null && e.completedAt <= at ? e.status : 'pending' }]))
  }
  const answered = new Set(side.messages.flatMap((m) => m.content.flatMap((block) => ('toolResult' in block ? [block.toolResult.toolUseId] : []))))
  const pending = new Set(side.runtime.pending_llm_response ? toolUsesOf(side.runtime.pending_llm_response).map((use) => use.toolUseId) : [])
  const closed = side.side.phase === 'post_tool_batch' || side.side.phase === 'post_subagent_batch'
  const intentsWritten = side.side.phase !== 'post_llm'
  const statuses = new Map<string, { name: string; status: EffectStatus }>()
  for (const e of effects) {
    if (answered.has(e.callId) || (closed && pending.has(e.callId))) statuses.set(e.callId, { name: e.name, status: e.status })
    else if (pending.has(e.callId) && intentsWritten) statuses.set(e.callId, { name: e.name, status: 'pending' })
  }
  return statuses
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function short(value: unknown): string {
  const text = value === undefined ? '(none)' : JSON.stringify(value)
  return text.length > 70 ? `${text.slice(0, 69)}…` : text
}
