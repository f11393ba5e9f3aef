import type { JsonObject } from '../core/codec.js'

// The store's shared types: what a run, a checkpoint, an effect and a write look like to every
// layer. This file imports nothing of the store, so any store file can import it.

/**
 * Where a run stands; `queued` is a run enqueued for workers that none has started yet;
 * `paused` waits for an answer, `sleeping` for its wake time, `waiting` for an external event
 * (or its timeout). A paused, sleeping or waiting run holds no lease and no process.
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

/** Filters for `listRuns`, newest first. `before` is a run id (exclusive cursor). */
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
 * What `save` takes. `id` and `createdAt` default to a fresh id and now; `seq` defaults to one
 * above the run's latest, and when given must be above it. The run is created (status
 * `running`) when it does not exist yet.
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
 * Filters for `listCheckpoints`, newest first. `before` is a checkpoint id (exclusive cursor).
 *
 * A listing never skips a record and never returns one it has not checked: each header is
 * verified against its record's digest, and an unreadable or altered record is a
 * `CheckpointCorruptionError` naming it. With `verify: false` the headers come as stored,
 * unchecked — for a tool that checks each record itself (`verifyRun`); with `unreadable: 'skip'`
 * a bad record is left out with a warning instead.
 */
export interface ListCheckpointsQuery {
  runId?: string
  workflowName?: string
  limit?: number
  before?: string
  /** Check each listed header against its record's digest. Default true. */
  verify?: boolean
  /**
   * What a checked listing does with an unreadable or altered record: `'throw'` (the default) a
   * `CheckpointCorruptionError` naming it, `'skip'` leave it out with a warning (`onWarning`),
   * an explicit gap.
   */
  unreadable?: 'throw' | 'skip'
}

/**
 * Where a side effect stands: `pending` (intent recorded), `started` (its callback was about to
 * run: without an outcome this is an unknown outcome), `succeeded` or `failed`.
 */
export type EffectStatus = 'pending' | 'started' | 'succeeded' | 'failed'

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
 * Several writes to one run committed atomically: checkpoints (in order, each continuing the
 * one before), effect intents, starts and outcomes, and a change to the run. The runner commits a
 * model response together with the intents of the tool calls it asks for, so one durable commit
 * covers both.
 */
export interface WriteBatch {
  runId: string
  checkpoints?: readonly CheckpointInput<unknown>[]
  intents?: readonly EffectIntent[]
  /**
   * Call ids of effects to mark `started`, a compare-and-set: when one of them is not `pending`
   * nothing of the batch is written and the write throws `EffectStartedError` (see `startEffect`).
   */
  starts?: readonly string[]
  completions?: readonly EffectCompletion[]
  /** A change to the run, applied last (the run must exist by then). */
  run?: UpdateRunInput
  /**
   * Write only while this lease holds the run (see `RunLeases`): checked under the same lock as
   * the write, so once another execution took the run over (a higher epoch) nothing is written
   * and the write throws `LeaseLostError`. The fenced run may be another run than `runId` (a
   * subagent's child run written under its parent's lease). Needs a store with `leases`.
   */
  fence?: Fence
  /**
   * `async`: the write may be committed without waiting for the disk — it survives a crash of
   * the process but an OS crash or a power loss may lose it (the runner's `async` durability;
   * SQLite commits it with `synchronous = NORMAL`). Default `sync`: on disk when it returns.
   */
  durability?: 'async' | 'sync'
}

/**
 * A value one task of a graph step wrote for a checkpoint, kept until the step's next checkpoint
 * absorbs it (LangGraph's pending writes): on a resume, the tasks that already wrote are not
 * run again. Keyed by `(runId, checkpointId, taskId, index)`.
 */
export interface PendingWrite {
  taskId: string
  /**
   * Position among the task's writes. A write with an index `>= 0` is stored once: writing the
   * same key again keeps the first value. A negative index marks a special write (an error, an
   * interrupt), which the newest write of its key replaces.
   */
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

/**
 * A worker's hold on a run. A write carrying a fence succeeds only while the row of the fenced
 * run still names `owner` at `epoch`; the check and the write happen under one lock, so a worker
 * whose lease was taken over (its epoch is behind) can never write again.
 */
export interface Fence {
  /** The leased run. Writes to other runs (a subagent's child run) may carry this run's fence. */
  runId: string
  /** Who holds the lease: a worker's id. */
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
}

/** A run as a resume reads it (see `StoreReader.openRun`). */
export interface OpenedRun<P = unknown> {
  run: RunRecord | undefined
  latest: CheckpointRecord<P> | undefined
  /** The newest of the recent checkpoints `base` says yes to (the latest itself when it does); undefined when none does. */
  base: CheckpointRecord<P> | undefined
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
  /** Every array of the payload stored as a list: where it is, the leading items left out, and its whole length. */
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
