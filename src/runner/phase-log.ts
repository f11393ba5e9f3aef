import type { JsonObject } from '../core/codec.js'
import { CheckpointCorruptionError, CheckpointNotFoundError } from '../core/errors.js'
import type { CheckpointInfo, CheckpointInput, CheckpointRecord, StoreReader } from '../store/checkpoint-store.js'
import type { RunnerCheckpoint, RunnerPhase } from './phases.js'

/**
 * One light phase of a runner run (`step_started`, `pre_llm`, `pre_tool_batch`, …) as its phase
 * log keeps it: the phase, the step, its light payload, when it was recorded (Unix ms) and which
 * process recorded it. Light phases carry no runtime snapshot, so they are not stored as rows of
 * their own: they ride in the `phaseLog` metadata of the stored checkpoint that commits them.
 */
export interface PhaseLogEntry {
  phase: RunnerPhase
  step: number
  at: number
  by: string
  payload: JsonObject
}

/**
 * A stored runner checkpoint's phase log (its metadata key `phaseLog`): `before`, the light
 * phases recorded since the run's previous stored checkpoint, oldest first; `after`, light phases
 * recorded after the checkpoint's own phase and made durable with it (a write-ahead commit before
 * tools run commits the `pre_tool_batch` that follows the model response's checkpoint).
 */
export interface PhaseLog {
  before?: PhaseLogEntry[]
  after?: PhaseLogEntry[]
}

/** The metadata key a runner checkpoint keeps its phase log under. */
export const PHASE_LOG_KEY = 'phaseLog'

/**
 * Separates a stored checkpoint's id from a light phase's position in its log: `<id>~<n>`. A
 * stored id never holds it (see `assertId`), and URLs keep it as it is.
 */
const SEPARATOR = '~'

/** `entries` put first in the `before` log of `record` (a staged checkpoint not yet written). */
export function withLogBefore(record: CheckpointInput, entries: readonly PhaseLogEntry[]): CheckpointInput {
  if (entries.length === 0) return record
  const log = { ...logOf(record.metadata), before: [...entries, ...(logOf(record.metadata).before ?? [])] }
  return { ...record, metadata: Object.assign({}, record.metadata, { [PHASE_LOG_KEY]: log as unknown as JsonObject }) }
}

/** `entries` appended to the `after` log of `record` (a staged checkpoint not yet written). */
export function withLogAfter(record: CheckpointInput, entries: readonly PhaseLogEntry[]): CheckpointInput {
  if (entries.length === 0) return record
  const log = { ...logOf(record.metadata), after: [...(logOf(record.metadata).after ?? []), ...entries] }
  return { ...record, metadata: Object.assign({}, record.metadata, { [PHASE_LOG_KEY]: log as unknown as JsonObject }) }
}

/**
 * A staged checkpoint turned into the light phases it stands for: its `before` log, its own
 * phase with its payload but no runtime snapshot, its `after` log. The async writer does this to a
 * snapshot a newer one supersedes before either is written (see `CheckpointWriter.stage`): the
 * phase stays in the run's history, and the run stores one row less.
 */
export function asLightPhases(record: CheckpointInput, by: string): PhaseLogEntry[] {
  const log = logOf(record.metadata)
  const { runtime: _runtime, ...payload } = record.payload as JsonObject
  const step = record.metadata?.step
  const own: PhaseLogEntry = { phase: record.phase as RunnerPhase, step: typeof step === 'number' ? step : 0, at: record.createdAt ?? Date.now(), by, payload }
  return [...(log.before ?? []), own, ...(log.after ?? [])]
}

/**
 * Every phase a stored runner checkpoint stands for, in the order they happened: its `before`
 * log, itself, its `after` log. A light phase comes back as a record of its own, whose id is
 * `<stored id>~<n>`, whose `createdAt` is when it was recorded, and whose metadata holds its
 * `step`, `writer` and `storedIn` (the id of the stored checkpoint that carries it). Any other
 * record comes back alone, unchanged.
 */
export function expandPhases<R extends CheckpointInfo>(record: R): R[] {
  const { before, after } = lightPhasesOf(record)
  if (before.length === 0 && after.length === 0) return [record]
  const light = (entry: PhaseLogEntry, n: number): R => {
    const id = lightIdOf(record.id, n)
    const info: CheckpointInfo = {
      id,
      checkpointId: id,
      runId: record.runId,
      parentId: record.parentId,
      seq: record.seq,
      kind: record.kind,
      phase: entry.phase,
      schemaVersion: record.schemaVersion,
      createdAt: entry.at,
      workflowName: record.workflowName,
      terminal: false,
      metadata: { step: entry.step, snapshot: false, writer: entry.by, storedIn: record.id },
    }
    // A header (a listing) stays a header; a record gets the light payload.
    return ('payload' in record ? { ...info, payload: entry.payload } : info) as R
  }
  return [...before.map((entry, n) => light(entry, n)), record, ...after.map((entry, n) => light(entry, before.length + n))]
}

/**
 * The light phases a stored checkpoint carries, checked: its `before` log and its `after` log
 * (empty when it has none). The entry at position `n` of `[...before, ...after]` is the phase
 * `<stored id>~<n>` ({@link lightIdOf}). A malformed log is a `CheckpointCorruptionError`.
 */
export function lightPhasesOf(record: CheckpointInfo): { before: readonly PhaseLogEntry[]; after: readonly PhaseLogEntry[] } {
  const log = logOf(record.metadata)
  const before = log.before ?? []
  const after = log.after ?? []
  if (!Array.isArray(before) || !Array.isArray(after)) assertLog(record, [null])
  assertLog(record, before)
  assertLog(record, after)
  return { before, after }
}

/** The id of the light phase at position `n` of stored checkpoint `storedId`'s log: `<stored id>~<n>`. */
export function lightIdOf(storedId: string, n: number): string {
  return `${storedId}${SEPARATOR}${n}`
}

/**
 * A run's history (`runner.history`) from its stored runner checkpoints, oldest first: each
 * stored checkpoint's light phases and itself, in the order of {@link expandPhases}, with the
 * writer each one says or inherits. Made straight from the phase logs, without the expanded records.
 */
export function historyOf(records: readonly CheckpointRecord<Record<string, unknown>>[], threadId: string | null): RunnerCheckpoint[] {
  const entries: RunnerCheckpoint[] = []
  let writer: string | null = null
  for (const record of records) {
    const { before, after } = lightPhasesOf(record)
    const { id, runId, schemaVersion } = record
    // A light phase names its process (`by`, a string once checked).
    const light = (entry: PhaseLogEntry, n: number): void => {
      writer = entry.by
      entries.push({ checkpointId: lightIdOf(id, n), runId, threadId, schemaVersion, phase: entry.phase, step: entry.step, payload: entry.payload, timestampMs: entry.at, writer })
    }
    for (let n = 0; n < before.length; n++) light(before[n]!, n)
    const step = record.metadata.step
    writer = writerOf(record) ?? (record.phase === 'run_started' ? null : writer)
    entries.push({ checkpointId: id, runId, threadId, schemaVersion, phase: record.phase as RunnerPhase, step: typeof step === 'number' ? step : 0, payload: record.payload, timestampMs: record.createdAt, writer })
    for (let n = 0; n < after.length; n++) light(after[n]!, before.length + n)
  }
  return entries
}

/** `expandPhases` over many records, in order. */
export function expandAll<R extends CheckpointInfo>(records: readonly R[]): R[] {
  return records.flatMap((record) => expandPhases(record))
}

/** The phases a staged checkpoint stands for (its log and itself), in order: what a commit makes durable. */
export function phasesOf(record: CheckpointInput, id: string): { checkpointId: string; phase: string; step: number }[] {
  const log = logOf(record.metadata)
  const before = log.before ?? []
  const own = { checkpointId: id, phase: record.phase, step: typeof record.metadata?.step === 'number' ? record.metadata.step : 0 }
  const light = (entry: PhaseLogEntry, n: number) => ({ checkpointId: lightIdOf(id, n), phase: entry.phase, step: entry.step })
  return [...before.map((entry, n) => light(entry, n)), own, ...(log.after ?? []).map((entry, n) => light(entry, before.length + n))]
}

/** The id of the stored checkpoint that holds `checkpointId` (itself, for a stored one). */
export function storedIdOf(checkpointId: string): string {
  const at = checkpointId.indexOf(SEPARATOR)
  return at < 0 ? checkpointId : checkpointId.slice(0, at)
}

/**
 * Load any checkpoint a history lists: a stored one (`store.load`), or a light phase kept in a
 * stored checkpoint's phase log (`<stored id>~<n>`). Throws `CheckpointNotFoundError` when the
 * stored checkpoint has no such phase.
 */
export async function loadPhase<P = unknown>(store: Pick<StoreReader, 'load'>, checkpointId: string): Promise<CheckpointRecord<P>> {
  const stored = storedIdOf(checkpointId)
  const record = await store.load<P>(stored)
  if (stored === checkpointId) return record
  const found = expandPhases<CheckpointRecord<P>>(record).find((phase) => phase.id === checkpointId)
  if (!found) {
    throw new CheckpointNotFoundError(`checkpoint ${checkpointId} is not in the phase log of checkpoint ${stored} of run ${record.runId}; list the run's phases with \`cairn show ${record.runId}\``, {
      runId: record.runId,
      checkpointId: stored,
    })
  }
  return found
}

function logOf(metadata: JsonObject | undefined): PhaseLog {
  const log = metadata?.[PHASE_LOG_KEY]
  return typeof log === 'object' && log !== null && !Array.isArray(log) ? log : {}
}

/** A phase log that is not one (an entry without its phase, step, time, writer or payload) is a corrupt checkpoint. */
function assertLog(record: CheckpointInfo, entries: readonly unknown[]): void {
  for (const entry of entries) {
    const e = entry as Partial<PhaseLogEntry> | null
    const ok =
      typeof e === 'object' && e !== null && typeof e.phase === 'string' && Number.isInteger(e.step) && typeof e.at === 'number' && typeof e.by === 'string' && typeof e.payload === 'object' && e.payload !== null && !Array.isArray(e.payload)
    if (!ok) {
      throw new CheckpointCorruptionError(`checkpoint ${record.id} of run ${record.runId} has a malformed phase log entry (each needs phase, step, at, by and a payload object)`, {
        runId: record.runId,
        checkpointId: record.id,
      })
    }
  }
}

/**
 * Who wrote a runner checkpoint, as far as it says: a light phase names its process; a stored
 * one written under a worker's lease names the lease; a `run_started` names its process.
 * `undefined` when it says nothing (the writer of the last `run_started` before it, then).
 */
export function writerOf(record: CheckpointRecord<Record<string, unknown>>): string | undefined {
  if (typeof record.metadata.writer === 'string') return record.metadata.writer
  const lease = record.metadata.lease as JsonObject | undefined
  if (lease && typeof lease.owner === 'string') return `lease ${lease.owner} epoch ${scalar(lease.epoch)}`
  const owner = record.payload.owner as JsonObject | undefined
  if (record.phase === 'run_started' && owner && typeof owner.pid === 'number') return `pid ${owner.pid} on ${scalar(owner.host)}`
  return undefined
}

function scalar(value: unknown): string {
  return typeof value === 'string' || typeof value === 'number' ? String(value) : JSON.stringify(value)
}
