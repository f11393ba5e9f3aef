import type { EffectStatus, ListCheckpointsQuery, ListRunsQuery } from '../checkpoint-store.js'
import type { Fence, LeaseEngine } from './lease-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, EffectCompletionRow, EffectRow, ListAppend, ListRef, PendingWriteRow, RunPatch, RunRow } from './rows.js'

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
  /** Apply a patch; `undefined` when the run does not exist. */
  updateRun(runId: string, patch: RunPatch): Promise<RunRow | undefined>
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
  getCheckpoint(checkpointId: string): Promise<CheckpointRow | undefined>
  /**
   * Many checkpoints in one round trip, in any order, the unknown ids left out. Optional: an
   * engine without it is asked for each id on its own.
   */
  getCheckpoints?(checkpointIds: readonly string[]): Promise<CheckpointRow[]>
  /**
   * Every checkpoint row of one run, oldest first (by seq), in one read: a run's whole history.
   * Optional: without it, the run's headers are listed and their rows fetched.
   */
  getRunCheckpoints?(runId: string): Promise<CheckpointRow[]>
  /**
   * A run's row and then its newest checkpoint, for an engine that checks one against the other
   * as it reads them (a keyed store's signed run row): one read of the newest checkpoint serves
   * both. Optional: without it, `getRun` then `getLatest`.
   */
  getRunAndLatest?(runId: string): Promise<{ run: RunRow | undefined; latest: CheckpointRow | undefined }>
  /** The run's checkpoint with the highest seq, or the workflow's newest (by createdAt, seq). */
  getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined>
  /**
   * Headers only, newest first: by seq within one run; by createdAt then seq across runs.
   * `before` is an exclusive checkpoint-id cursor; an unknown cursor yields an empty page.
   */
  listCheckpoints(query: ListCheckpointsQuery): Promise<CheckpointHeaderRow[]>
  /**
   * {@link StorageEngine.listCheckpoints} with whole rows, in one read: what a verified listing
   * checks (each row's digest covers its body). Optional: without it, the headers are listed and
   * their rows fetched.
   */
  listCheckpointRows?(query: ListCheckpointsQuery): Promise<CheckpointRow[]>
  /**
   * Read the first `length` items of each referenced list of a run, in order. Returns one array
   * per ref; an array shorter than `length` means items are missing (the caller reports it).
   */
  readLists(runId: string, refs: readonly ListRef[]): Promise<string[][]>
  /**
   * Read items `from` up to `n` (exclusive) of each listed list of a run, in order: one array per
   * range; an array shorter than `n - from` means items are missing. Optional: without it,
   * {@link StorageEngine.readLists} is read and cut (see `readListRanges`).
   */
  readListRanges?(runId: string, ranges: readonly ListRange[]): Promise<string[][]>
  /**
   * Delete checkpoints of one run, then drop list items no remaining checkpoint of the run
   * references, in one atomic step with the run's commits. Returns how many checkpoints were
   * deleted. `retainedListLengths` (from `cairn-agents/engine`) reads the remaining rows' `lists` and says how many items
   * of each list to keep (drop the lists it does not name); when it returns `undefined` (a row is
   * unreadable), keep every item.
   */
  deleteCheckpoints(runId: string, checkpointIds: readonly string[]): Promise<number>

  /** Insert an intent, or count one more attempt on the existing row and return it. */
  recordEffectIntent(row: EffectRow): Promise<EffectRow>
  /** Set the outcome only if the effect is still `pending` or `started`; always returns the stored row. */
  completeEffect(completion: EffectCompletionRow): Promise<{ recorded: boolean; row: EffectRow | undefined }>
  /** Mark a `pending` effect `started` (its callback is about to run); returns the stored row. */
  startEffect(runId: string, callId: string): Promise<EffectRow | undefined>
  getEffect(runId: string, callId: string): Promise<EffectRow | undefined>
  /** In `startedAt` order. */
  listEffects(runId: string): Promise<EffectRow[]>
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

/** Items `from` (inclusive) to `n` (exclusive) of list `id`. */
export interface ListRange {
  id: string
  from: number
  n: number
}

/** `engine.readListRanges` when the engine has it, else its lists read from their start and cut. */
export async function readListRanges(engine: StorageEngine, runId: string, ranges: readonly ListRange[]): Promise<string[][]> {
  if (ranges.length === 0) return []
  if (engine.readListRanges) return engine.readListRanges(runId, ranges)
  const lists = await engine.readLists(runId, ranges.map((range) => ({ id: range.id, n: range.n, h: '' })))
  return lists.map((items, k) => items.slice(ranges[k]!.from))
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
  /** A change to the run row, applied last (the run must exist by then). */
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
  | { ok: false; reason: 'effect_not_pending'; callId: string; status: EffectStatus | null }

/** Sealed contents of existing records of one run, replaced in place by {@link StorageEngine.rewrite}. */
export interface RewriteRequest {
  runId: string
  checkpoints: readonly Pick<CheckpointRow, 'id' | 'body' | 'lists' | 'digest'>[]
  items: readonly { listId: string; idx: number; item: string }[]
  effects: readonly Pick<EffectRow, 'callId' | 'inputHash' | 'output' | 'outputHash'>[]
}
