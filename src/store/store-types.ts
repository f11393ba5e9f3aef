import type { JsonObject } from '../core/codec.js'

// The store's shared types. This file imports nothing of the store, so any store file can import it.

/**
 * Where a run stands: `queued` waits for a worker, `paused` for an answer, `sleeping` for its
 * wake time, `waiting` for an external event; the last three hold no lease and no process.
 */
export type RunStatus = 'queued' | 'running' | 'paused' | 'sleeping' | 'waiting' | 'completed' | 'failed' | 'cancelled'

/** Every run status. */
export const RUN_STATUSES: readonly RunStatus[] = ['queued', 'running', 'paused', 'sleeping', 'waiting', 'completed', 'failed', 'cancelled']

/** The statuses of a run that stopped to wait (an answer, a time, an event) and that `requeuePaused` queues again. */
export const WAITING_STATUSES: readonly RunStatus[] = ['paused', 'sleeping', 'waiting']

/** The statuses after which a run never runs again. */
export const FINISHED_STATUSES: readonly RunStatus[] = ['completed', 'failed', 'cancelled']

/** One durable run: an agent run or a workflow run. */
export interface RunRecord {
  runId: string
  status: RunStatus
  name: string | null
  threadId: string | null
  workflowName: string | null
  /** Hash of the configuration that started the run (see `hashValue`). */
  configSignature: string | null
  /** Highest checkpoint seq ever saved in this run (0 before the first). Never decreases. */
  lastSeq: number
  /** Unix milliseconds. */
  createdAt: number
  updatedAt: number
  metadata: JsonObject
}

/** What `createRun` takes; everything but the id is optional. */
export interface CreateRunInput {
  runId?: string
  status?: RunStatus
  name?: string | null
  threadId?: string | null
  workflowName?: string | null
  configSignature?: string | null
  metadata?: JsonObject
  /** When the run started (Unix milliseconds); defaults to now. An import keeps the exported start. */
  createdAt?: number
}

/** A partial update of a run. `metadata` replaces the stored metadata whole. */
export interface UpdateRunInput {
  status?: RunStatus
  name?: string | null
  threadId?: string | null
  workflowName?: string | null
  configSignature?: string | null
  metadata?: JsonObject
}

/** Filters for `listRuns`, newest first; `before` is an exclusive run-id cursor. */
export interface ListRunsQuery {
  status?: RunStatus | readonly RunStatus[]
  workflowName?: string
  threadId?: string
  limit?: number
  before?: string
}

/** Everything about a checkpoint except its payload: what history listings return. */
export interface CheckpointInfo {
  id: string
  /** The same as `id`, under the name workflow code uses (`latest.checkpointId`). */
  checkpointId: string
  runId: string
  /** The checkpoint this one continues from, in this run or (for a fork) another. */
  parentId: string | null
  /** Position in the run, strictly increasing. */
  seq: number
  /** Which layer wrote it: `agent`, `runner`, `workflow`, or your own. */
  kind: string
  /** The boundary it was written at: a name its writer chooses; the store never interprets it. */
  phase: string
  /** Version of the payload format of `kind`; migrations upgrade older ones on load. */
  schemaVersion: number
  /** Unix milliseconds. */
  createdAt: number
  workflowName: string | null
  /** A terminal checkpoint holds a finished run's result; prune always keeps it. */
  terminal: boolean
  metadata: JsonObject
}

/** A stored checkpoint with its payload, as `load` and `getLatest` return it. */
export interface CheckpointRecord<P = unknown> extends CheckpointInfo {
  payload: P
}

/**
 * What `save` takes. `id` and `createdAt` default to a fresh id and now; `seq` to one above the
 * run's latest (a given one must be above it). A missing run is created, `running`.
 */
export interface CheckpointInput<P = unknown> {
  id?: string
  runId: string
  parentId?: string | null
  seq?: number
  kind: string
  phase: string
  /** Defaults to the current version of `kind` in the store's schema registry, else 1. */
  schemaVersion?: number
  createdAt?: number
  workflowName?: string | null
  terminal?: boolean
  metadata?: JsonObject
  payload: P
}

/** Which latest checkpoint to fetch. */
export type LatestQuery = { runId: string; workflowName?: never } | { workflowName: string; runId?: never }

/**
 * Filters for `listCheckpoints`, newest first; `before` is an exclusive checkpoint-id cursor.
 * Each header is verified against its record's digest: an unreadable or altered record is a
 * `CheckpointCorruptionError` naming it, never skipped silently.
 */
export interface ListCheckpointsQuery {
  runId?: string
  workflowName?: string
  limit?: number
  before?: string
  /** Default true; `false` lists headers as stored, for a tool that checks each record itself (`verifyRun`). */
  verify?: boolean
  /** What a checked listing does with a bad record: `'throw'` (default), or `'skip'` it with a warning (`onWarning`). */
  unreadable?: 'throw' | 'skip'
}

/** Where a side effect stands: `pending` (intent recorded), `started` (without an outcome: an unknown outcome), `succeeded` or `failed`. */
export type EffectStatus = 'pending' | 'started' | 'succeeded' | 'failed'

/** Every effect status. */
export const EFFECT_STATUSES: readonly EffectStatus[] = ['pending', 'started', 'succeeded', 'failed']

/** The write-ahead record of one side effect, written before it starts. */
export interface EffectIntent {
  runId: string
  /** Unique within the run, stable across attempts (a tool-use id). */
  callId: string
  /** What runs (a tool name). */
  name: string
  /** `hashValue` of the name and canonical input. */
  inputHash: string
  /** Passed to the effect so the outside world can deduplicate retries. */
  idempotencyKey: string
}

/** A journaled effect. */
export interface EffectRecord extends EffectIntent {
  status: EffectStatus
  /** The result (status `succeeded`) or error description (status `failed`). */
  output: unknown
  outputHash: string | null
  /** How many times an intent was recorded for this call (1 on the first attempt). */
  attempts: number
  startedAt: number
  completedAt: number | null
}

/** The outcome written after an effect finishes. */
export interface EffectCompletion {
  runId: string
  callId: string
  status: 'succeeded' | 'failed'
  output: unknown
}

/** Result of `completeEffect`: `recorded` is false when another writer's outcome was first. */
export interface EffectCompletionResult {
  recorded: boolean
  effect: EffectRecord
}

/**
 * Several writes to one run committed atomically: checkpoints (in order, each continuing the one
 * before), effect intents, starts and outcomes, and a change to the run.
 */
export interface WriteBatch {
  runId: string
  checkpoints?: readonly CheckpointInput<unknown>[]
  intents?: readonly EffectIntent[]
  /** Effects to mark `started` (see `startEffect`): when one is not `pending`, nothing is written. */
  starts?: readonly string[]
  completions?: readonly EffectCompletion[]
  /** A change to the run, applied last (the run must exist by then). */
  run?: UpdateRunInput
  /**
   * Write only while this lease holds the run, checked under the write's lock; otherwise nothing
   * is written and the write throws `LeaseLostError`. The fenced run may be another run than
   * `runId` (a subagent's child run under its parent's lease).
   */
  fence?: Fence
  /** `async`: committed without waiting for the disk (survives a process crash, not a power loss). Default `sync`. */
  durability?: 'async' | 'sync'
}

/**
 * A value one task of a graph step wrote for a checkpoint, kept until the step's next checkpoint
 * absorbs it. Keyed by `(runId, checkpointId, taskId, index)`.
 */
export interface PendingWrite {
  taskId: string
  /** Position among the task's writes: the first write of a key `>= 0` wins; a negative (special) one is replaced by the newest. */
  index: number
  channel: string
  /** Where the task sits in the graph; `''` (the default) sorts first. */
  taskPath?: string
  /** Any value the codec encodes. */
  value: unknown
}

/** A stored {@link PendingWrite}, with where it belongs. */
export interface PendingWriteRecord extends Required<PendingWrite> {
  runId: string
  checkpointId: string
  /** Unix milliseconds of the write that stored it. */
  createdAt: number
}

/** What `putPendingWrites` takes: writes of one checkpoint. */
export interface PutPendingWritesInput {
  runId: string
  checkpointId: string
  writes: readonly PendingWrite[]
}

/** What `prune` may remove. Without `runId`, every run is considered. */
export interface PruneOptions {
  runId?: string
  /** Keep this many newest checkpoints of each run (at least the latest is always kept). */
  keepLast?: number
  /** Only remove checkpoints (and finished runs' effects) created before this time. */
  olderThan?: Date | number
}

/** What `prune` removed. */
export interface PruneResult {
  checkpointsDeleted: number
  effectsDeleted: number
}

/** Fork a run: a new run whose first checkpoint continues from `checkpointId`. */
export interface ForkOptions {
  checkpointId: string
  /** Id of the new run; a fresh id by default. */
  runId?: string
  metadata?: JsonObject
}

/** Which checkpoints of a run `loadRun` reads. */
export interface LoadRunQuery {
  /** Only checkpoints of this kind (`'runner'`, a workflow's kind, …); all of them by default. */
  kind?: string
}

/** A worker's hold on a run: a write carrying it succeeds only while the fenced run still names `owner` at `epoch`. */
export interface Fence {
  runId: string
  /** A worker's id. */
  owner: string
  /** The run's lease epoch when this owner claimed it; every claim raises it by one. */
  epoch: number
}

/** What `StoreReader.openRun` looks for. */
export interface OpenRunQuery {
  /** How many of the run's newest checkpoints to look through for `base` (the newest included). Default 8. */
  recent?: number
  /** Whether a checkpoint is one the newest rests on (a full state to go on from). */
  base?: (info: CheckpointInfo) => boolean
  /**
   * Which of the run's effects to read, picked from the checkpoints read: call ids (those the
   * run goes on with; none for a run with no calls under way), or `'all'`. Default `'all'`. The
   * effects read are checked against the run's log either way: one put back to `pending`, or
   * deleted, is refused. A resume needs only the calls of the batch it goes on with, so a long
   * run is not read whole each time it resumes.
   */
  effects?: (read: { latest: CheckpointRecord | undefined; base: CheckpointRecord | undefined }) => readonly string[] | 'all'
}

/** A run as a resume reads it (see `StoreReader.openRun`). */
export interface OpenedRun<P = unknown> {
  run: RunRecord | undefined
  latest: CheckpointRecord<P> | undefined
  /** The newest of the recent checkpoints `base` says yes to (the latest itself when it does); undefined when none does. */
  base: CheckpointRecord<P> | undefined
  /** The effects `effects` picked (every one of the run by default), oldest first. */
  effects: EffectRecord[]
}

/** What {@link StoreReader.loadTails} reads after. */
export interface LoadTailsQuery {
  /** A checkpoint of the same run: the lists it holds are read from its end on. */
  after: string
}

/** A record whose list-stored arrays hold only their newer items. */
export interface CheckpointTail<P = unknown> {
  record: CheckpointRecord<P>
  /** Every array of the payload stored as a list. */
  lists: ListTail[]
}

/** One list-stored array of a {@link CheckpointTail}. */
export interface ListTail {
  /** Keys from the payload's root (`['runtime', 'messages']`). */
  path: string[]
  /** Leading items not read: the array holds items `skipped` to `length - 1`. */
  skipped: number
  length: number
}
