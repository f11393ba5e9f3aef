import type { EffectStatus, ListCheckpointsQuery, ListRunsQuery } from '../checkpoint-store.js'
import type { Fence, LeaseEngine } from './lease-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, EffectCompletionRow, EffectRow, ListAppend, PendingWriteRow, RunChanged, RunPatch, RunRow } from './rows.js'

/**
 * The storage-engine interface under every Cairn store. An engine moves rows and strings and
 * never parses payloads; the codec, list encoding, migrations, digests and validation live once
 * in {@link EngineStore}, so every backend behaves the same. To add a backend, implement this
 * interface and wrap it: `new EngineStore(engine, options)`.
 */
export interface StorageEngine {
  /** Insert a run; false when the id is taken. */
  insertRun(row: RunRow): Promise<boolean>
  getRun(runId: string): Promise<RunRow | undefined>
  /** Newest first (by `createdAt`, then `runId`); `before` is an exclusive run-id cursor. */
  listRuns(query: ListRunsQuery): Promise<RunRow[]>
  /** Apply a patch and return the patched row; `undefined`: no such run; `{ outcome: 'changed' }`: the swap failed, nothing written. */
  updateRun(runId: string, patch: RunPatch): Promise<RunRow | RunChanged | undefined>
  /** Remove the run and all its rows; false when it did not exist. */
  deleteRun(runId: string): Promise<boolean>

  /**
   * In one atomic step: create the run from `run` if it does not exist; check that no row's id
   * exists, that the first row's `seq > lastSeq` of the run (rows have consecutive seqs); check
   * every append's `expectedLength` equals the stored length of that list (0 for a list that does
   * not exist yet); then write the appended items, the checkpoint rows, the effect intents (insert,
   * or count one more attempt) and completions (only on an effect still `pending` or `started`),
   * and set the run's `lastSeq` to the last row's seq, its `seal` to `run.seal` (the progress
   * digest of that seq) and `updatedAt`. Nothing is written unless every check passes. `rows` may
   * be empty (an effects-only commit: `lastSeq` and `seal` stay).
   *
   * With a `fence`, the commit first checks, under the same lock as the write, that the fenced
   * run's row still names the fence's owner and epoch (the run must exist), and writes nothing
   * (`{ ok: false, reason: 'fenced' }`) when it does not. A fenced commit that succeeds reports
   * whether a cancel of the fenced run was requested.
   */
  commit(request: CommitRequest): Promise<CommitResult>
  /** Many checkpoints in one read, in any order, the unknown ids left out: the one way whole rows are read by id. */
  getCheckpoints(checkpointIds: readonly string[]): Promise<CheckpointRow[]>
  /** The run's checkpoint with the highest seq, or the workflow's newest (by createdAt, seq). */
  getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined>
  /**
   * Newest first: by seq within one run; by createdAt then seq across runs. `before` is an
   * exclusive checkpoint-id cursor (unknown: an empty page). Headers only, unless `rows: true`:
   * then whole {@link CheckpointRow}s, in the same read (see {@link listRows}).
   */
  listCheckpoints(query: CheckpointListing): Promise<CheckpointHeaderRow[]>
  /**
   * Items `from` (0 when absent) up to `n` (exclusive) of each listed list of a run: one array per
   * range; a shorter one means items are missing (the caller reports it). A `ListRef` is a range from 0.
   */
  readLists(runId: string, ranges: readonly ListRange[]): Promise<string[][]>
  /**
   * What a resume reads of one run, in one read (one transaction where the backend has them): the
   * run row, its `recent` newest checkpoints (newest first, whole rows), and the lists those rows
   * refer to as far as `retainedListLengths` says (with the run's whole log). Empty for a run that
   * does not exist. (The effects a resume needs are read after, by call id: `listEffects`.)
   */
  loadRun(runId: string, request: { recent: number }): Promise<RunLoad>
  /**
   * Delete checkpoints of one run and the list items no remaining checkpoint refers to, atomically
   * with the run's commits; returns how many checkpoints were deleted. `retainedListLengths` says
   * how many items of each list to keep (none of a list it does not name; all when it returns `undefined`).
   */
  deleteCheckpoints(runId: string, checkpointIds: readonly string[]): Promise<number>

  /** A run's effects in `startedAt` order; with `callIds`, only those (the unknown ones left out). */
  listEffects(runId: string, callIds?: readonly string[]): Promise<EffectRow[]>
  /** Delete a run's effects; returns how many were deleted. */
  deleteEffects(runId: string): Promise<number>

  /**
   * Store pending writes of one checkpoint atomically: a row whose key `(runId, checkpointId,
   * taskId, idx)` exists is kept when `idx >= 0` (the first write wins, so a retried task cannot
   * change what it wrote) and replaced when `idx < 0` (a special write, an error or an interrupt:
   * the newest wins). `deleteRun` and `deleteCheckpoints` remove the writes of what they delete.
   * Optional: an engine without it has no place for pending writes.
   */
  putWrites?(rows: readonly PendingWriteRow[]): Promise<void>
  /** The pending writes of some checkpoints of one run, in any order. */
  listWrites?(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRow[]>

  close(): Promise<void>

  /**
   * The check value stored for a signing key id (an HMAC of a fixed label under the key, kept by
   * `SealedEngine` to tell a wrong secret from a tampered record), or undefined. Optional, with
   * {@link StorageEngine.putKeyCheck}: without them, a wrong secret reads as records that do not verify.
   */
  getKeyCheck?(keyId: string): Promise<string | undefined>
  /** Store `value` for `keyId` unless a value is stored for it; returns the value stored now. */
  putKeyCheck?(keyId: string, value: string): Promise<string>

  /**
   * Replace contents of existing records of one run in place, atomically where the backend can:
   * checkpoint bodies, list refs and digests by id, list items by list and index, effect hashes
   * and outputs by call id; nothing else changes. Used by `EngineStore.rekey` to re-sign and
   * re-encrypt records. Optional: an engine without it cannot be rekeyed.
   */
  rewrite?(request: RewriteRequest): Promise<void>

  /** The lease protocol of the worker layer (claims, heartbeats, release), when the backend has one: a capability the worker layer checks. */
  readonly leases?: LeaseEngine | undefined
}

/** Items `from` (inclusive, 0 when absent) to `n` (exclusive) of list `id`. */
export interface ListRange {
  id: string
  from?: number
  n: number
}

/** What {@link StorageEngine.listCheckpoints} takes: a listing's filters, and whether to read whole rows. */
export interface CheckpointListing extends Omit<ListCheckpointsQuery, 'verify' | 'unreadable'> {
  rows?: boolean
}

/** The whole rows of a listing (`listCheckpoints` with `rows: true`). */
export async function listRows(engine: Pick<StorageEngine, 'listCheckpoints'>, query: Omit<CheckpointListing, 'rows'>): Promise<CheckpointRow[]> {
  return (await engine.listCheckpoints({ ...query, rows: true })) as CheckpointRow[]
}

/** What {@link StorageEngine.loadRun} reads of a run. */
export interface RunLoad {
  run: RunRow | undefined
  /** The newest checkpoints, newest first. */
  checkpoints: CheckpointRow[]
  /** Each list the checkpoints refer to (and the run's log), from its first item. */
  lists: { id: string; items: string[] }[]
}

/** One atomic write: checkpoints of one run, their list items, and effect journal entries. */
export interface CommitRequest {
  /** Checkpoint rows of `run`, in order, with consecutive seqs. */
  rows: readonly CheckpointRow[]
  appends: readonly ListAppend[]
  /** The run to create when it does not exist yet. */
  run: RunRow
  effects?: {
    intents?: readonly EffectRow[]
    completions?: readonly EffectCompletionRow[]
    /**
     * Call ids of `pending` effects to mark `started` (after the intents are written), a
     * compare-and-set: when one is not `pending` (started, finished, or no intent stored or in this
     * commit), nothing is written and the commit answers `effect_not_pending` with its status (null: no intent).
     */
    starts?: readonly string[]
  }
  /** A change to the run row, applied last (the run exists by then); a failed swap writes nothing (`run_changed`). */
  runPatch?: RunPatch
  /** Write only while this lease is held (see {@link StorageEngine.commit}). */
  fence?: Fence
  /**
   * `async`: the writer accepts that a crash of the machine (not of the process) may lose this
   * commit, so an engine may commit without waiting for the disk (SQLite: `synchronous = NORMAL`
   * in WAL mode). Absent or `sync`: on disk when it returns, as far as the engine's settings make
   * it so. An engine may ignore it.
   */
  durability?: 'async' | 'sync'
}

/** Why a commit wrote nothing, or that it succeeded. */
export type CommitResult =
  | { ok: true; cancelRequested?: boolean }
  | { ok: false; reason: 'fenced' }
  | { ok: false; reason: 'stale_seq'; lastSeq: number }
  | { ok: false; reason: 'list_conflict' }
  | { ok: false; reason: 'duplicate_id' }
  | { ok: false; reason: 'run_changed' }
  | { ok: false; reason: 'effect_not_pending'; callId: string; status: EffectStatus | null }

/** Sealed contents of existing records of one run, replaced in place by {@link StorageEngine.rewrite}. */
export interface RewriteRequest {
  runId: string
  checkpoints: readonly Pick<CheckpointRow, 'id' | 'body' | 'lists' | 'digest'>[]
  items: readonly { listId: string; idx: number; item: string }[]
  effects: readonly Pick<EffectRow, 'callId' | 'inputHash' | 'output' | 'outputHash'>[]
}
