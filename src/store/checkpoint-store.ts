import type { RunLeases } from './leases/run-leases.js'
import type { RunEventLog } from './event-log/run-event-log.js'
import type { RunWaits } from './waits/run-waits.js'
import type {
  CheckpointInfo,
  CheckpointInput,
  CheckpointRecord,
  CheckpointTail,
  CreateRunInput,
  EffectCompletion,
  EffectCompletionResult,
  EffectIntent,
  EffectRecord,
  ForkOptions,
  LatestQuery,
  ListCheckpointsQuery,
  ListRunsQuery,
  LoadRunQuery,
  LoadTailsQuery,
  OpenedRun,
  OpenRunQuery,
  PendingWriteRecord,
  PruneOptions,
  PruneResult,
  PutPendingWritesInput,
  RunRecord,
  UpdateRunInput,
  WriteBatch,
} from './store-types.js'

export { FINISHED_STATUSES, WAITING_STATUSES } from './store-types.js'
export type * from './store-types.js'

/**
 * Reading runs, checkpoints and the effect journal: what inspection tools (timelines, diffs,
 * verification, export) need, and the read half of a {@link RunStore}.
 */
export interface StoreReader {
  getRun(runId: string): Promise<RunRecord | undefined>
  listRuns(query?: ListRunsQuery): Promise<RunRecord[]>
  /** Throws `CheckpointNotFoundError` when absent, `CheckpointCorruptionError` when unreadable. */
  load<P = unknown>(checkpointId: string): Promise<CheckpointRecord<P>>
  /**
   * `load` for many checkpoints at once, in the order given (a run's whole history): a store may
   * read each list once for all of them, so the cost follows what the run stored rather than its
   * square. The records may share their list items (deeply frozen): treat them as read-only.
   * Optional; without it, callers load one by one.
   */
  loadMany?<P = unknown>(checkpointIds: readonly string[]): Promise<CheckpointRecord<P>[]>
  /**
   * Every checkpoint of a run (of one `kind` when given), oldest first, with every check of
   * `load` and of a verified listing (a run rolled back past what its row records is refused): a
   * run's whole history in one read where the backend can. Records share their list items, as
   * with `loadMany`. Optional; without it, callers list the run's checkpoints and load them.
   */
  loadRun?<P = unknown>(runId: string, query?: LoadRunQuery): Promise<CheckpointRecord<P>[]>
  /**
   * `loadMany` that reads only what was added after checkpoint `after` of the same run: each
   * array stored as a list that `after` also holds comes back with only the items past those of
   * `after` (checked from `after`'s chain hash on), and {@link CheckpointTail.lists} says how
   * many were left out. A page of a long run costs its own items, not the conversation's.
   * Optional; without it, callers load whole records (see `loadTails` of `cairn-agents/engine`).
   */
  loadTails?<P = unknown>(checkpointIds: readonly string[], query: LoadTailsQuery): Promise<CheckpointTail<P>[]>
  getLatest<P = unknown>(query: LatestQuery): Promise<CheckpointRecord<P> | undefined>
  /**
   * What a resume reads of a run, in one read of the backend: the run, its newest checkpoint
   * (checked against the run as `getLatest` checks it), the newest recent checkpoint `base`
   * picks, and the run's effects (checked as `listEffects` checks them). Optional; without it,
   * callers read each part on its own.
   */
  openRun?<P = unknown>(runId: string, query?: OpenRunQuery): Promise<OpenedRun<P>>
  listCheckpoints(query?: ListCheckpointsQuery): Promise<CheckpointInfo[]>
  getEffect(runId: string, callId: string): Promise<EffectRecord | undefined>
  /**
   * The effects of some calls of one run (those recorded), in the order given, with the checks of
   * `getEffect` made once for all of them. Optional; without it, callers read them one by one.
   */
  getEffects?(runId: string, callIds: readonly string[]): Promise<EffectRecord[]>
  listEffects(runId: string): Promise<EffectRecord[]>
  /**
   * The pending writes of some checkpoints of one run, in one read: grouped by checkpoint in the
   * order given, each group by task path, task id and index. Optional: a store without it has no
   * place for pending writes; every built-in store has it.
   */
  listPendingWrites?(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRecord[]>
}

/**
 * Writing a run as it executes: the run row, checkpoints and the effect journal. Every write
 * only adds to a run or moves it forward; nothing here removes data (see {@link StoreAdmin}).
 */
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
   * Mark an effect `started` just before its callback runs (so a crash leaves an unknown outcome,
   * not a silent retry). A compare-and-set: only a `pending` effect becomes `started`, once; an
   * effect already started or finished throws `EffectStartedError` (code `effect_started`) with
   * its status, and an unknown one `invalid_argument`.
   */
  startEffect(runId: string, callId: string): Promise<EffectRecord>
  /** Record an outcome; the first outcome recorded for a call wins. */
  completeEffect(completion: EffectCompletion): Promise<EffectCompletionResult>
  /**
   * Store pending writes of one checkpoint atomically (see {@link PendingWrite} for which write
   * of a key wins). Deleting the checkpoint or its run deletes them. Optional, like
   * {@link StoreReader.listPendingWrites}.
   */
  putPendingWrites?(input: PutPendingWritesInput): Promise<void>
}

/**
 * What one execution of a run (a `Runner`, a worker's fenced view of the store) reads and
 * writes. A worker's fenced view is a `RunStore` and nothing more: it cannot delete, fork or
 * prune.
 */
export interface RunStore extends StoreReader, StoreWriter {
  /**
   * The store's lease protocol, when it has one: how an execution (a `Runner`, a worker) owns a
   * run, and what `WriteBatch.fence` is checked against. Every built-in store has it; a store
   * without it cannot keep two processes from executing one run at once.
   */
  readonly leases?: RunLeases | undefined
  /**
   * The runs' event logs, when the store has them: what `runner.events()` replays and follows.
   * Every built-in store has one; a run's events go with the run (`deleteRun`, `prune`).
   */
  readonly events?: RunEventLog | undefined
  /**
   * What runs wait for, when the store keeps it: timers, external events and schedules (what
   * `ctx.sleep`, `ctx.waitForEvent` and `CairnClient.schedule` stand on). The memory, SQLite and
   * Postgres stores have it.
   */
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
 * writing ({@link StoreWriter}) and administration ({@link StoreAdmin}). Cairn ships memory,
 * file, SQLite and Postgres backends, and `runStoreConformance` from `cairn-agents/testing` checks any
 * other implementation. Code that only reads, or only executes runs, asks for the smaller part
 * it uses (`StoreReader`, `RunStore`).
 *
 * Contracts: `save` is atomic (a crash leaves the previous or the new checkpoint, never a torn
 * one); a run's latest checkpoint never moves backwards; payloads go through the codec, so what
 * `load` returns equals what was saved (Date, Map, Set, bytes and BigInt included); storage of
 * a run whose payload grows by appending is linear in its number of checkpoints.
 */
export interface CheckpointStore extends RunStore, StoreAdmin {}
