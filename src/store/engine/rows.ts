import type { EffectStatus, RunStatus } from '../store-types.js'

/** A run as a {@link StorageEngine} stores it (plain fields, numbers and JSON text, never parsed by an engine); `metadata` is JSON text. */
export interface RunRow {
  runId: string
  status: RunStatus
  name: string | null
  threadId: string | null
  workflowName: string | null
  configSignature: string | null
  lastSeq: number
  createdAt: number
  updatedAt: number
  metadata: string
  /**
   * The run's progress digest (`p1.`, see `runProgressDigest`) or a keyed store's signature; null
   * or absent in a row written before either. Set from its `run` row by the commit that advances
   * `lastSeq`; an engine stores it as given and never reads it.
   */
  seal?: string | null
  /**
   * The digest of the run's other trusted fields (`r1.`, see `runDigest`) or a keyed store's
   * signature; null or absent in a row written before. Stored as given on a new row, replaced by a
   * patch's {@link RunSwap}; it doubles as the row's version for compare-and-set.
   */
  digest?: string | null
}

/**
 * A compare-and-set on a run row: its change is written, with `digest` as the row's new digest,
 * only while the stored digest is `ifDigest` (null: none); else the engine writes nothing and
 * answers `{ outcome: 'changed' }` (a commit: `run_changed`). An engine never computes a digest.
 */
export interface RunSwap {
  ifDigest: string | null
  digest: string
}

/** An engine's answer when a {@link RunSwap} found the run row changed: read it again and retry. */
export interface RunChanged {
  outcome: 'changed'
}

/** Fields `updateRun` may change. */
export type RunPatch = Partial<Pick<RunRow, 'status' | 'name' | 'threadId' | 'workflowName' | 'configSignature' | 'metadata' | 'seal'>> & {
  updatedAt: number
  /** The row's new digest, written only while the stored one is as expected; absent: the digest stays. */
  swap?: RunSwap
}

/** A checkpoint's header as an engine stores it; `metadata` is JSON text. */
export interface CheckpointHeaderRow {
  id: string
  runId: string
  parentId: string | null
  seq: number
  kind: string
  phase: string
  schemaVersion: number
  createdAt: number
  workflowName: string | null
  terminal: boolean
  metadata: string
}

/** A full checkpoint row. */
export interface CheckpointRow extends CheckpointHeaderRow {
  /** The payload's JSON text with each append-only list replaced by a `{"~":"list","i":k}` ref. */
  body: string
  /** JSON text of the `ListRef[]` the body points into. */
  lists: string
  /** SHA-256 over the header, metadata, body and lists: detects torn or edited rows. */
  digest: string
}

/** The first `n` items of one append-only list of the run; `h` is their chain hash, which detects edited or missing items. */
export interface ListRef {
  id: string
  n: number
  h: string
}

/** Items to append to a list, valid only if the list currently holds `expectedLength` items. */
export interface ListAppend {
  listId: string
  expectedLength: number
  /** Each item is one JSON text (no raw newlines). */
  items: readonly string[]
}

/** An effect row; `output` is JSON text (codec-encoded) or null while pending. */
export interface EffectRow {
  runId: string
  callId: string
  name: string
  inputHash: string
  idempotencyKey: string
  status: EffectStatus
  output: string | null
  outputHash: string | null
  attempts: number
  startedAt: number
  completedAt: number | null
}

/** The outcome an engine writes into a pending effect row. */
export interface EffectCompletionRow {
  runId: string
  callId: string
  status: 'succeeded' | 'failed'
  output: string
  outputHash: string
  completedAt: number
}

/**
 * A value a task of a graph step produced for one checkpoint, kept until the next checkpoint
 * absorbs it. Keyed by `(runId, checkpointId, taskId, idx)`; `value` is JSON text (codec-encoded).
 */
export interface PendingWriteRow {
  runId: string
  checkpointId: string
  taskId: string
  /** Position among the task's writes; a negative index marks a special write (an error, an interrupt). */
  idx: number
  channel: string
  /** Where the task sits in the graph (`''` when unknown): the first part of the replay order. */
  taskPath: string
  value: string
  createdAt: number
}
