import type { EffectStatus, ListCheckpointsQuery, ListRunsQuery } from '../checkpoint-store.js'
import type { Fence, LeaseEngine } from './lease-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, EffectCompletionRow, EffectRow, ListAppend, PendingWriteRow, RunChanged, RunPatch, RunRow } from './rows.js'

/**
 * The storage-engine interface under every Cairn store. An engine moves rows and strings; it
 * never parses payloads. Everything else — the codec, the append-only list encoding that keeps
 * storage linear, schema migrations, digests, validation and the monotonic-seq rule's error
 * messages — lives once in {@link EngineStore}, so every backend behaves the same.
 *
 * To add a backend, implement this interface and wrap it: `new EngineStore(engine, options)`.
 */
export interface StorageEngine {
  /** Insert a run; false when the id is taken. */
  insertRun(row: RunRow): Promise<boolean>
  getRun(runId: string): Promise<RunRow | undefined>
  /** Newest first (by `createdAt`, then `runId`); `before` is an exclusive run-id cursor. */
  listRuns(query: ListRunsQuery): Promise<RunRow[]>
  /**
   * Apply a patch and return the row as patched; `undefined` when the run does not exist,
   * `{ outcome: 'changed' }` (nothing written) when the patch's swap expects another digest.
   */
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
  /**
   * Many checkpoints in one read, in any order, the unknown ids left out. The one way whole rows
   * are read by id.
   */
  getCheckpoints(checkpointIds: readonly string[]): Promise<CheckpointRow[]>
  /** The run's checkpoint with the highest seq, or the workflow's newest (by createdAt, seq). */
  getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined>
  /**
   * Newest first: by seq within one run; by createdAt then seq across runs. `before` is an
   * exclusive checkpoint-id cursor; an unknown cursor yields an empty page. Headers only, unless
   * `rows: true`: then every element is a whole {@link CheckpointRow}, read in the same read
   * (what a verified listing and a run's history check; see {@link listRows}).
   */
  listCheckpoints(query: CheckpointListing): Promise<CheckpointHeaderRow[]>
  /**
   * Read items `from` (0 when absent) up to `n` (exclusive) of each listed list of a run, in
   * order: one array per range; an array shorter than `n - from` means items are missing (the
   * caller reports it). A `ListRef` is a range from the start.
   */
  readLists(runId: string, ranges: readonly ListRange[]): Promise<string[][]>
  /**
   * What a resume reads of one run, in one read (one transaction where the backend has them): the
   * run row, its `recent` newest checkpoints (newest first, whole rows), the lists those rows refer
   * to as far as `retainedListLengths` says (which includes the run's whole log). Rows and lists
   * of a run that does not exist are empty. (The effects a resume needs are read after it, by
   * call id, once its checkpoints say which: `listEffects`.)
   */
  loadRun(runId: string, request: { recent: number }): Promise<RunLoad>
  /**
   * Delete checkpoints of one run, then drop list items no remaining checkpoint of the run
   * references, in one atomic step with the run's commits. Returns how many checkpoints were
   * deleted. `retainedListLengths` (from `cairn-agents/engine`) reads the remaining rows' `lists` and says how many items
   * of each list to keep (drop the lists it does not name); when it returns `undefined` (a row is
   * unreadable), keep every item.
   */
  deleteCheckpoints(runId: string, checkpointIds: readonly string[]): Promise<number>

  /** A run's effects in `startedAt` order; with `callIds`, only those (the unknown ones left out). */
  listEffects(runId: string, callIds?: readonly string[]): Promise<EffectRow[]>
  /** Delete a run's effects; returns how many were deleted. */
  deleteEffects(runId: string): Promise<number>

  /**
   * Store pending writes of one checkpoint, in one atomic step: a row whose key
   * `(runId, checkpointId, taskId, idx)` exists already is kept as it is when `idx >= 0` (the
   * first write wins, so a retried task cannot change what it wrote) and replaced when `idx < 0`
   * (a special write such as an error or an interrupt: the newest wins). `deleteRun` and
   * `deleteCheckpoints` remove the writes of what they delete. Optional: an engine without it
   * has no place for pending writes.
   */
  putWrites?(rows: readonly PendingWriteRow[]): Promise<void>
  /** The pending writes of some checkpoints of one run, in any order. */
  listWrites?(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRow[]>

  close(): Promise<void>

  /**
   * The check value stored for a signing key id, or undefined when none is. A keyed store
   * (`SealedEngine`) keeps one per key id, an HMAC of a fixed label under the key, to tell a
   * wrong secret from a tampered record. Optional, with {@link StorageEngine.putKeyCheck}: without
   * them, a wrong secret reads as records that do not verify.
   */
  getKeyCheck?(keyId: string): Promise<string | undefined>
  /** Store `value` for `keyId` unless a value is stored for it; returns the value stored now. */
  putKeyCheck?(keyId: string, value: string): Promise<string>

  /**
   * Replace stored contents of existing records of one run in place, atomically where the backend
   * can: checkpoint bodies, list refs and digests by id, list items by list and index, effect
   * hashes and outputs by call id. Ids, seqs and everything else stay as they are. Used to re-sign
   * and re-encrypt records under a new key (`EngineStore.rekey`). Optional: an engine without it
   * cannot be rekeyed.
   */
  rewrite?(request: RewriteRequest): Promise<void>

  /**
   * The lease protocol of the worker layer (claiming runs, heartbeats, release), when the
   * backend has one; `undefined` (or absent) when it does not. A capability, not a subclass: the
   * worker layer checks this field.
   */
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
     * Call ids of `pending` effects to mark `started` (after the intents are written): a
     * compare-and-set. When one of them is not `pending` (already started, finished, or has no
     * intent, neither stored nor in this commit), nothing is written and the commit answers
     * `effect_not_pending` with the stored status (null: no intent).
     */
    starts?: readonly string[]
  }
  /**
   * A change to the run row, applied last (the run must exist by then). When its swap expects
   * another digest, nothing of the commit is written (`run_changed`).
   */
  runPatch?: RunPatch
  /** Write only while this lease is held (see {@link StorageEngine.commit}). */
  fence?: Fence
  /**
   * `async`: the writer accepts that a crash of the machine (not of the process) may lose this
   * commit, so an engine may commit it without waiting for the disk (SQLite: `synchronous =
   * NORMAL` in WAL mode). Absent or `sync`: the commit is on disk when it returns, as far as the
   * engine's settings make it so. An engine may ignore it.
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
