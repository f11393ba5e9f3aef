import type { RunLeases } from './leases/run-leases.js'
import type { RunEventLog } from './event-log/run-event-log.js'
import type { RunWaits } from './waits/run-waits.js'
import type { CheckpointInfo, CheckpointInput, CheckpointRecord, CheckpointTail, CreateRunInput, EffectCompletion, EffectCompletionResult, EffectIntent } from './store-types.js'
import type { EffectRecord, ForkOptions, LatestQuery, ListCheckpointsQuery, ListRunsQuery, LoadRunQuery, LoadTailsQuery, OpenedRun, OpenRunQuery } from './store-types.js'
import type { PendingWriteRecord, PruneOptions, PruneResult, PutPendingWritesInput, RunRecord, UpdateRunInput, WriteBatch } from './store-types.js'

export { FINISHED_STATUSES, WAITING_STATUSES } from './store-types.js'
export type * from './store-types.js'

/** Reading runs, checkpoints and the effect journal: what inspection tools need. */
export interface StoreReader {
  getRun(runId: string): Promise<RunRecord | undefined>
  listRuns(query?: ListRunsQuery): Promise<RunRecord[]>
  /** Throws `CheckpointNotFoundError` when absent, `CheckpointCorruptionError` when unreadable. */
  load<P = unknown>(checkpointId: string): Promise<CheckpointRecord<P>>
  /**
   * `load` for many checkpoints at once, in the order given, each list read once for all of them.
   * The records may share their list items (deeply frozen): treat them as read-only.
   */
  loadMany<P = unknown>(checkpointIds: readonly string[]): Promise<CheckpointRecord<P>[]>
  /**
   * Every checkpoint of a run (of one `kind` when given), oldest first, with the checks of `load`
   * and of a verified listing, in one read where the backend can. Records share list items, as
   * with `loadMany`.
   */
  loadRun<P = unknown>(runId: string, query?: LoadRunQuery): Promise<CheckpointRecord<P>[]>
  /**
   * `loadMany` that reads only what was added after checkpoint `after` of the same run: a list
   * `after` also holds comes back with only its newer items ({@link CheckpointTail.lists} says
   * how many were left out).
   */
  loadTails<P = unknown>(checkpointIds: readonly string[], query: LoadTailsQuery): Promise<CheckpointTail<P>[]>
  getLatest<P = unknown>(query: LatestQuery): Promise<CheckpointRecord<P> | undefined>
  /**
   * What a resume reads of a run, in one read of the backend: the run, its newest checkpoint, the
   * newest recent checkpoint `base` picks, and its effects, each checked as alone.
   */
  openRun<P = unknown>(runId: string, query?: OpenRunQuery): Promise<OpenedRun<P>>
  listCheckpoints(query?: ListCheckpointsQuery): Promise<CheckpointInfo[]>
  getEffect(runId: string, callId: string): Promise<EffectRecord | undefined>
  /** The recorded effects of some calls of one run, in the order given. */
  getEffects(runId: string, callIds: readonly string[]): Promise<EffectRecord[]>
  listEffects(runId: string): Promise<EffectRecord[]>
  /** The pending writes of some checkpoints of one run, by checkpoint in the order given, then task path, task id and index. */
  listPendingWrites(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRecord[]>
}

/** Writing a run as it executes: every write only adds to a run or moves it forward. */
export interface StoreWriter {
  createRun(input?: CreateRunInput): Promise<RunRecord>
  /** Throws `CheckpointNotFoundError` (code `run_not_found`) for an unknown run. */
  updateRun(runId: string, patch: UpdateRunInput): Promise<RunRecord>
  /** Persist a checkpoint atomically; returns its id. */
  save<P>(record: CheckpointInput<P>): Promise<string>
  /** Commit checkpoints and effect journal entries of one run atomically; returns the checkpoint ids. */
  write(batch: WriteBatch): Promise<string[]>
  /** Record an intent; if one exists for (runId, callId), count the attempt and return it. */
  recordEffectIntent(intent: EffectIntent): Promise<EffectRecord>
  /**
   * Mark a `pending` effect `started` just before its callback runs, once (a crash then leaves an
   * unknown outcome, not a silent retry); otherwise throws `EffectStartedError` (`invalid_argument` for an unknown one).
   */
  startEffect(runId: string, callId: string): Promise<EffectRecord>
  /** Record an outcome; the first outcome recorded for a call wins. */
  completeEffect(completion: EffectCompletion): Promise<EffectCompletionResult>
  /** Store pending writes of one checkpoint atomically (see {@link PendingWrite}). Optional: a fenced view has none. */
  putPendingWrites?(input: PutPendingWritesInput): Promise<void>
}

/** What one execution of a run (a `Runner`, a worker's fenced view) reads and writes. */
export interface RunStore extends StoreReader, StoreWriter {
  /** The store's lease protocol (what `WriteBatch.fence` is checked against); every built-in store has it. */
  readonly leases?: RunLeases | undefined
  /** The runs' event logs (what `runner.events()` replays and follows); every built-in store has them. */
  readonly events?: RunEventLog | undefined
  /** Timers, external events and schedules (`ctx.sleep`, `ctx.waitForEvent`, `CairnClient.schedule`), when the store keeps them. */
  readonly waits?: RunWaits | undefined
}

/** Removing and copying data, and closing the store: what an operator (or the CLI) does to a store. */
export interface StoreAdmin {
  /** Returns false when there was nothing to delete. The run's `lastSeq` is unchanged. */
  delete(checkpointId: string): Promise<boolean>
  /** Removes the run, its checkpoints and its effects. Returns false for an unknown run. */
  deleteRun(runId: string): Promise<boolean>
  fork(options: ForkOptions): Promise<CheckpointRecord>
  prune(options?: PruneOptions): Promise<PruneResult>
  close(): Promise<void>
}

/**
 * Durable storage for runs, checkpoints and the effect journal: reading ({@link StoreReader}),
 * writing ({@link StoreWriter}) and administration ({@link StoreAdmin}); `runStoreConformance`
 * from `cairn-agents/testing` checks any implementation. `save` is atomic, a run's latest
 * checkpoint never moves backwards, what `load` returns equals what was saved, and storage of a
 * payload that grows by appending is linear.
 */
export interface CheckpointStore extends RunStore, StoreAdmin {}
