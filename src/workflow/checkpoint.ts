import { isPlainObject, type JsonObject } from '../core/codec.js'
import { CheckpointCorruptionError, CheckpointError, SchemaVersionError } from '../core/errors.js'
import { defaultSchemas } from '../core/schema.js'
import type { CheckpointInfo, CheckpointRecord } from '../store/checkpoint-store.js'
import type { RequestInfoEvent } from './events.js'
import type { ExecutorState } from './checkpoint-types.js'
import type { GraphSignature } from './checkpoint-types.js'
import { isMessageStop, type MessageStop } from './waits.js'

/** The `kind` of workflow checkpoint records in a `CheckpointStore`. */
export const WORKFLOW_CHECKPOINT_KIND = 'workflow'

/** The version of the {@link WorkflowCheckpoint} format this code writes. */
export const WORKFLOW_CHECKPOINT_VERSION = 1

defaultSchemas.define(WORKFLOW_CHECKPOINT_KIND, WORKFLOW_CHECKPOINT_VERSION)

/**
 * Where a checkpoint was written: `entry` (the run's input, before any executor ran),
 * `superstep` (the end of a super step) or `responses` (answers to requests, before they are
 * delivered).
 */
export type WorkflowCheckpointPhase = 'entry' | 'superstep' | 'responses'

/** The source id of a run's input message. */
export const INPUT_SOURCE = '$input'
/** The source id of a response to a request. */
export const RESPONSE_SOURCE = '$response'

/**
 * A message in flight: sent (or given) in one super step, delivered in the next. `stop` says
 * where its handler stopped (a sleep, a wait for an event) when it was handled before.
 */
export type WorkflowMessage = (
  | {
      kind: 'message'
      /** The executor that sent it, or `$input` for the run's input. */
      sourceId: string
      targetId: string
      data: unknown
      /** Set when the message goes through a fan-in group: it waits there for the group's other sources. */
      fanIn?: string
    }
  | { kind: 'response'; sourceId: typeof RESPONSE_SOURCE; targetId: string; data: unknown; request: RequestInfoEvent }
) & { stop?: MessageStop }

/** What a workflow checkpoint's `metadata` holds. */
export interface WorkflowCheckpointMetadata {
  phase: WorkflowCheckpointPhase
  /** The store run the checkpoint belongs to. */
  runId: string
  /** The topology behind `graphSignatureHash`, so a refused resume can say what changed. */
  graphSignature: GraphSignature
}

/**
 * Everything a workflow run needs to continue, written at the end of every super step (and at
 * the entry and when responses arrive). It is the `payload` of a `kind: 'workflow'` record.
 */
export interface WorkflowCheckpoint {
  /** A UUID; the same as the store record's id. */
  checkpointId: string
  workflowName: string
  /** SHA-256 of the graph signature; a resume under another graph is refused. */
  graphSignatureHash: string
  /** The checkpoint this one continues (lineage); null for a run's entry checkpoint. */
  previousCheckpointId: string | null
  /** ISO 8601, UTC. */
  timestamp: string
  /** Messages in flight, in delivery order; each names its source. */
  messages: WorkflowMessage[]
  /** Committed shared state only. */
  state: Record<string, unknown>
  /** Each executor's `onCheckpointSave()`, by executor id. */
  executorStates: Record<string, ExecutorState>
  /** Requests waiting for an answer, by request id. */
  pendingRequestInfoEvents: Record<string, RequestInfoEvent>
  /** Super steps completed. */
  iterationCount: number
  metadata: WorkflowCheckpointMetadata
  version: number
}

/** A checkpoint's summary: what listing and inspecting return. */
export interface WorkflowCheckpointSummary {
  checkpointId: string
  runId: string
  workflowName: string
  phase: string
  iterationCount: number
  /** ISO 8601, UTC. */
  timestamp: string
  previousCheckpointId: string | null
  graphSignatureHash: string
  messageCount: number
  stateKeys: string[]
  pendingRequestCount: number
}

/** The summary a checkpoint record carries in its header metadata, so listing reads no payload. */
export function headerMetadata(checkpoint: WorkflowCheckpoint): JsonObject {
  return {
    iterationCount: checkpoint.iterationCount,
    timestamp: checkpoint.timestamp,
    previousCheckpointId: checkpoint.previousCheckpointId,
    graphSignatureHash: checkpoint.graphSignatureHash,
    messageCount: checkpoint.messages.length,
    stateKeys: Object.keys(checkpoint.state),
    pendingRequestCount: Object.keys(checkpoint.pendingRequestInfoEvents).length,
  }
}

/** Summarize a full checkpoint. */
export function summarize(checkpoint: WorkflowCheckpoint): WorkflowCheckpointSummary {
  const meta = headerMetadata(checkpoint)
  return {
    checkpointId: checkpoint.checkpointId,
    runId: checkpoint.metadata.runId,
    workflowName: checkpoint.workflowName,
    phase: checkpoint.metadata.phase,
    ...(meta as Omit<WorkflowCheckpointSummary, 'checkpointId' | 'runId' | 'workflowName' | 'phase'>),
  }
}

/** Summarize a listed header, or undefined when it is not a workflow checkpoint. */
export function summarizeHeader(info: CheckpointInfo): WorkflowCheckpointSummary | undefined {
  const m = info.metadata
  if (info.kind !== WORKFLOW_CHECKPOINT_KIND || typeof m.iterationCount !== 'number' || !Array.isArray(m.stateKeys)) return undefined
  return {
    checkpointId: info.id,
    runId: info.runId,
    workflowName: info.workflowName ?? '',
    phase: info.phase,
    iterationCount: m.iterationCount,
    timestamp: typeof m.timestamp === 'string' ? m.timestamp : new Date(info.createdAt).toISOString(),
    previousCheckpointId: typeof m.previousCheckpointId === 'string' ? m.previousCheckpointId : null,
    graphSignatureHash: typeof m.graphSignatureHash === 'string' ? m.graphSignatureHash : '',
    messageCount: typeof m.messageCount === 'number' ? m.messageCount : 0,
    stateKeys: m.stateKeys.filter((key): key is string => typeof key === 'string'),
    pendingRequestCount: typeof m.pendingRequestCount === 'number' ? m.pendingRequestCount : 0,
  }
}

/**
 * The workflow checkpoint in a loaded record, its shape checked: another kind of record is a
 * `CheckpointError`, a malformed payload a `CheckpointCorruptionError` naming the field.
 */
export function readWorkflowCheckpoint(record: CheckpointRecord): WorkflowCheckpoint {
  const ids = { runId: record.runId, checkpointId: record.id }
  if (record.kind !== WORKFLOW_CHECKPOINT_KIND) {
    throw new CheckpointError('checkpoint_invalid', `checkpoint ${record.id} is a ${record.kind} checkpoint, not a workflow checkpoint`, ids)
  }
  const p = record.payload as Partial<WorkflowCheckpoint> | null
  const problem = shapeProblem(p)
  if (problem !== undefined) {
    throw new CheckpointCorruptionError(`workflow checkpoint ${record.id} of run ${record.runId} is malformed: ${problem}`, ids)
  }
  const checkpoint = p as WorkflowCheckpoint
  if (checkpoint.version !== WORKFLOW_CHECKPOINT_VERSION) {
    throw new SchemaVersionError({ kind: WORKFLOW_CHECKPOINT_KIND, found: checkpoint.version, supported: WORKFLOW_CHECKPOINT_VERSION })
  }
  return checkpoint
}

function shapeProblem(p: Partial<WorkflowCheckpoint> | null): string | undefined {
  if (!isPlainObject(p)) return 'the payload is not an object'
  for (const key of ['checkpointId', 'workflowName', 'graphSignatureHash', 'timestamp'] as const) {
    if (typeof p[key] !== 'string') return `${key} is not a string`
  }
  if (p.previousCheckpointId !== null && typeof p.previousCheckpointId !== 'string') return 'previousCheckpointId is not a string or null'
  if (!Array.isArray(p.messages) || !p.messages.every(isMessage)) return 'messages is not a list of in-flight messages'
  for (const key of ['state', 'executorStates', 'pendingRequestInfoEvents', 'metadata'] as const) {
    if (!isPlainObject(p[key])) return `${key} is not an object`
  }
  const meta = p.metadata as Partial<WorkflowCheckpointMetadata>
  if (meta.phase !== 'entry' && meta.phase !== 'superstep' && meta.phase !== 'responses') return 'metadata.phase is not entry, superstep or responses'
  if (typeof meta.runId !== 'string') return 'metadata.runId is not a string'
  if (!Object.values(p.executorStates as object).every(isPlainObject)) return 'an executor state is not an object'
  if (!Object.entries(p.pendingRequestInfoEvents as object).every(([id, e]) => isRequest(e) && e.requestId === id)) {
    return 'pendingRequestInfoEvents holds a malformed request'
  }
  if (!Number.isSafeInteger(p.iterationCount) || (p.iterationCount as number) < 0) return 'iterationCount is not a count'
  if (typeof p.version !== 'number') return 'version is not a number'
  return undefined
}

function isMessage(value: unknown): value is WorkflowMessage {
  if (!isPlainObject(value) || typeof value.sourceId !== 'string' || typeof value.targetId !== 'string') return false
  if (value.stop !== undefined && !isMessageStop(value.stop)) return false
  if (value.kind === 'message') return value.fanIn === undefined || typeof value.fanIn === 'string'
  return value.kind === 'response' && isRequest(value.request)
}

function isRequest(value: unknown): value is RequestInfoEvent {
  return (
    isPlainObject(value) &&
    value.type === 'request_info' &&
    typeof value.requestId === 'string' &&
    typeof value.executorId === 'string' &&
    typeof value.iteration === 'number' &&
    (value.responseSchema === undefined || isPlainObject(value.responseSchema))
  )
}
