/**
 * The SQL statements of the SQLite engine. Columns are aliased to the engine's row fields, so a
 * selected row is already a `RunRow`, `CheckpointHeaderRow` (but for `terminal`, stored 0/1) or
 * `EffectRow`. The tables themselves are created in `migrations.ts`.
 */

const RUN_COLUMNS = `run_id AS runId, status, name, thread_id AS threadId, workflow_name AS workflowName,
  config_signature AS configSignature, last_seq AS lastSeq, created_at AS createdAt, updated_at AS updatedAt, metadata, seal, digest`

const HEADER_COLUMNS = `id, run_id AS runId, parent_id AS parentId, seq, kind, phase, schema_version AS schemaVersion,
  created_at AS createdAt, workflow_name AS workflowName, terminal, metadata`

const CHECKPOINT_COLUMNS = `${HEADER_COLUMNS}, body, lists, digest`

const EFFECT_COLUMNS = `run_id AS runId, call_id AS callId, name, input_hash AS inputHash, idempotency_key AS idempotencyKey,
  status, output, output_hash AS outputHash, attempts, started_at AS startedAt, completed_at AS completedAt`

/** Statements whose text does not depend on a query's shape; prepared once per engine. */
export const SQL = {
  insertRun: `INSERT INTO runs (run_id, status, name, thread_id, workflow_name, config_signature, last_seq, created_at, updated_at, metadata, seal, digest)
    VALUES (:runId, :status, :name, :threadId, :workflowName, :configSignature, :lastSeq, :createdAt, :updatedAt, :metadata, :seal, :digest)
    ON CONFLICT (run_id) DO NOTHING`,
  getRun: `SELECT ${RUN_COLUMNS} FROM runs WHERE run_id = ?`,
  getKeyCheck: `SELECT value FROM key_checks WHERE key_id = ?`,
  putKeyCheck: `INSERT INTO key_checks (key_id, value) VALUES (?, ?) ON CONFLICT (key_id) DO NOTHING`,
  /** Each field is set only when its `set…` flag is 1, so a nullable field can be set to null. */
  updateRun: `UPDATE runs SET
      status = CASE WHEN :setStatus THEN :status ELSE status END,
      name = CASE WHEN :setName THEN :name ELSE name END,
      thread_id = CASE WHEN :setThreadId THEN :threadId ELSE thread_id END,
      workflow_name = CASE WHEN :setWorkflowName THEN :workflowName ELSE workflow_name END,
      config_signature = CASE WHEN :setConfigSignature THEN :configSignature ELSE config_signature END,
      metadata = CASE WHEN :setMetadata THEN :metadata ELSE metadata END,
      seal = CASE WHEN :setSeal THEN :seal ELSE seal END,
      digest = CASE WHEN :setDigest THEN :digest ELSE digest END,
      updated_at = :updatedAt
    WHERE run_id = :runId
    RETURNING ${RUN_COLUMNS}`,
  deleteRun: `DELETE FROM runs WHERE run_id = ?`,
  deleteRunCheckpoints: `DELETE FROM checkpoints WHERE run_id = ?`,
  deleteRunItems: `DELETE FROM list_items WHERE run_id = ?`,
  deleteRunEffects: `DELETE FROM effects WHERE run_id = ?`,

  /** The run a commit creates when missing, or the run's new `lastSeq`, its progress digest (`seal`, when `:advance`) and `updatedAt`. */
  upsertRunForCommit: `INSERT INTO runs (run_id, status, name, thread_id, workflow_name, config_signature, last_seq, created_at, updated_at, metadata, seal, digest)
    VALUES (:runId, :status, :name, :threadId, :workflowName, :configSignature, :seq, :createdAt, max(:updatedAt, :checkpointCreatedAt), :metadata, :seal, :digest)
    ON CONFLICT (run_id) DO UPDATE SET last_seq = :seq, seal = CASE WHEN :advance THEN :seal ELSE seal END, updated_at = max(updated_at, :checkpointCreatedAt)`,
  runLastSeq: `SELECT last_seq FROM runs WHERE run_id = ?`,
  /** What a fenced write checks (under the write lock of its transaction). */
  fenceOf: `SELECT owner, lease_epoch AS epoch, cancel_requested AS cancelRequested FROM runs WHERE run_id = ?`,
  checkpointExists: `SELECT 1 FROM checkpoints WHERE id = ?`,
  /** Whether any id of a JSON array of ids is taken: one statement for a commit's rows. */
  anyCheckpointExists: `SELECT 1 FROM checkpoints WHERE id IN (SELECT value FROM json_each(?)) LIMIT 1`,
  /** Items are numbered 0…n-1, so the length is one past the highest index (a PK range lookup). */
  listLength: `SELECT coalesce(max(idx) + 1, 0) FROM list_items WHERE run_id = ? AND list_id = ?`,
  insertItem: `INSERT INTO list_items (run_id, list_id, idx, item) VALUES (?, ?, ?, ?)`,
  insertCheckpoint: `INSERT INTO checkpoints
      (id, run_id, parent_id, seq, kind, phase, schema_version, created_at, workflow_name, terminal, metadata, body, lists, digest)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,

  /** Many checkpoints in one statement: the ids as a JSON array, each looked up by primary key. */
  getCheckpoints: `SELECT ${CHECKPOINT_COLUMNS} FROM checkpoints WHERE id IN (SELECT value FROM json_each(?))`,
  latestOfRun: `SELECT ${CHECKPOINT_COLUMNS} FROM checkpoints WHERE run_id = ? ORDER BY seq DESC LIMIT 1`,
  /** A run's newest checkpoints, newest first (what a resume reads). */
  recentOfRun: `SELECT ${CHECKPOINT_COLUMNS} FROM checkpoints WHERE run_id = ? ORDER BY seq DESC LIMIT ?`,
  latestOfWorkflow: `SELECT ${CHECKPOINT_COLUMNS} FROM checkpoints WHERE workflow_name = ?
    ORDER BY created_at DESC, seq DESC, id DESC LIMIT 1`,
  readListRange: `SELECT item FROM list_items WHERE run_id = ? AND list_id = ? AND idx >= ? AND idx < ? ORDER BY idx`,
  deleteCheckpoint: `DELETE FROM checkpoints WHERE id = ? AND run_id = ?`,
  /** Rows without lists are left out. */
  listRefsOfRun: `SELECT lists FROM checkpoints WHERE run_id = ? AND lists <> '[]'`,
  listIdsOfRun: `SELECT DISTINCT list_id FROM list_items WHERE run_id = ?`,
  truncateList: `DELETE FROM list_items WHERE run_id = ? AND list_id = ? AND idx >= ?`,

  /** An intent inside a commit: a new row, or one more attempt on the stored one. */
  commitEffectIntent: `INSERT INTO effects
      (run_id, call_id, name, input_hash, idempotency_key, status, output, output_hash, attempts, started_at, completed_at)
    VALUES (:runId, :callId, :name, :inputHash, :idempotencyKey, :status, :output, :outputHash, :attempts, :startedAt, :completedAt)
    ON CONFLICT (run_id, call_id) DO UPDATE SET attempts = attempts + 1`,
  /** An outcome inside a commit: only on an effect still pending or started. */
  commitEffectCompletion: `UPDATE effects SET status = :status, output = :output, output_hash = :outputHash, completed_at = :completedAt
    WHERE run_id = :runId AND call_id = :callId AND status IN ('pending', 'started')`,
  startEffect: `UPDATE effects SET status = 'started' WHERE run_id = ? AND call_id = ? AND status = 'pending'`,
  getEffect: `SELECT ${EFFECT_COLUMNS} FROM effects WHERE run_id = ? AND call_id = ?`,
  /** Some effects of a run: the call ids as a JSON array. */
  getEffects: `SELECT ${EFFECT_COLUMNS} FROM effects WHERE run_id = ? AND call_id IN (SELECT value FROM json_each(?)) ORDER BY started_at, rowid`,
  /** Ties on `started_at` keep insertion order, as the memory engine does. */
  listEffects: `SELECT ${EFFECT_COLUMNS} FROM effects WHERE run_id = ? ORDER BY started_at, rowid`,
  deleteEffects: `DELETE FROM effects WHERE run_id = ?`,

  /** A regular write (idx >= 0) keeps the first value stored; a special one (idx < 0) the newest. */
  putWrite: `INSERT INTO pending_writes (run_id, checkpoint_id, task_id, idx, channel, task_path, value, created_at)
    VALUES (:runId, :checkpointId, :taskId, :idx, :channel, :taskPath, :value, :createdAt)
    ON CONFLICT (run_id, checkpoint_id, task_id, idx) DO UPDATE SET channel = excluded.channel, task_path = excluded.task_path,
      value = excluded.value, created_at = excluded.created_at
    WHERE excluded.idx < 0`,
  listWrites: `SELECT run_id AS runId, checkpoint_id AS checkpointId, task_id AS taskId, idx, channel, task_path AS taskPath, value,
      created_at AS createdAt
    FROM pending_writes WHERE run_id = ? AND checkpoint_id IN (SELECT value FROM json_each(?))`,
  deleteCheckpointWrites: `DELETE FROM pending_writes WHERE run_id = ? AND checkpoint_id = ?`,
  deleteRunWrites: `DELETE FROM pending_writes WHERE run_id = ?`,
} as const

const LEASE_COLUMNS = `run_id AS runId, queue, priority, owner, lease_epoch AS epoch, lease_expires_at AS leaseExpiresAt,
  recoveries, cancel_requested AS cancelRequested`

/** The statements of the lease protocol (see `SqliteLeases`); times are Unix ms of this machine. */
export const LEASE_SQL = {
  enqueue: `INSERT INTO runs (run_id, status, name, thread_id, workflow_name, config_signature, last_seq, created_at, updated_at, metadata, seal, digest, queue, priority)
    VALUES (:runId, :status, :name, :threadId, :workflowName, :configSignature, :lastSeq, :createdAt, :updatedAt, :metadata, :seal, :digest, :queue, :priority)
    ON CONFLICT (run_id) DO NOTHING`,
  /** Claimable runs in claim order, from the partial index; `:queues` and `:full` are JSON arrays or null. */
  candidates: `SELECT run_id AS runId, queue FROM runs
    WHERE queue IS NOT NULL AND status IN ('queued', 'running') AND (owner IS NULL OR lease_expires_at < :now)
      AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))
      AND (:full IS NULL OR queue NOT IN (SELECT value FROM json_each(:full)))
    ORDER BY priority DESC, created_at, run_id LIMIT :scan`,
  /** Runs of each queue of `:queues` held under a live lease. */
  liveCounts: `SELECT queue, count(*) AS n FROM runs
    WHERE queue IN (SELECT value FROM json_each(:queues)) AND owner IS NOT NULL AND lease_expires_at >= :now AND status IN ('queued', 'running')
    GROUP BY queue`,
  /** SET expressions see the row before the update: a lapsed holder counts a recovery. */
  claimRun: `UPDATE runs SET owner = :owner, lease_epoch = lease_epoch + 1, lease_expires_at = :expires,
      recoveries = recoveries + (owner IS NOT NULL)
    WHERE run_id = :runId RETURNING ${LEASE_COLUMNS}`,
  /** Take the lease of one run unless a live lease holds it (a holder named by `:takeOwner` at `:takeEpoch` is taken from). */
  acquireRun: `UPDATE runs SET owner = :owner, lease_epoch = lease_epoch + 1, lease_expires_at = :expires,
      recoveries = recoveries + (owner IS NOT NULL)
    WHERE run_id = :runId AND (owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at < :now OR (owner = :takeOwner AND lease_epoch = :takeEpoch))
    RETURNING ${LEASE_COLUMNS}`,
  heartbeat: `UPDATE runs SET lease_expires_at = :expires WHERE run_id = :runId AND owner = :owner AND lease_epoch = :epoch
    RETURNING run_id AS runId, cancel_requested AS cancelRequested`,
  release: `UPDATE runs SET owner = NULL, lease_expires_at = NULL, recoveries = recoveries + :failed
    WHERE run_id = :runId AND owner = :owner AND lease_epoch = :epoch`,
  /** Cancel a run nobody holds (or whose holder lapsed, who is fenced out by a raised epoch). */
  cancelNow: `UPDATE runs SET status = 'cancelled', digest = coalesce(:digest, digest), updated_at = max(updated_at, :now), cancel_requested = 1,
      lease_epoch = lease_epoch + (owner IS NOT NULL), owner = NULL, lease_expires_at = NULL
    WHERE run_id = :runId`,
  requestCancel: `UPDATE runs SET cancel_requested = 1 WHERE run_id = :runId`,
  /** Queue a paused run again with new metadata; a lapsed holder is fenced out by a raised epoch. */
  requeuePaused: `UPDATE runs SET status = 'queued', metadata = :metadata, digest = :digest, updated_at = max(updated_at, :now),
      lease_epoch = lease_epoch + (owner IS NOT NULL), owner = NULL, lease_expires_at = NULL
    WHERE run_id = :runId AND status IN ('paused', 'sleeping', 'waiting')`,
  getLease: `SELECT ${LEASE_COLUMNS}, status, digest FROM runs WHERE run_id = ?`,
  /** Append `:item` at the end of a run's list (a requeue's run-log entry, in its transaction). */
  appendItem: `INSERT INTO list_items (run_id, list_id, idx, item)
    SELECT :runId, :listId, coalesce(max(idx) + 1, 0), :item FROM list_items WHERE run_id = :runId AND list_id = :listId`,
} as const

/** Which filters a `listRuns` query uses; each shape is one statement. */
export interface ListRunsShape {
  status: boolean
  workflowName: boolean
  threadId: boolean
  before: boolean
}

/**
 * `listRuns`: newest first by (created_at, run_id). Named parameters `:statuses` (a JSON array),
 * `:workflowName`, `:threadId`, `:before`, `:limit` (-1 for none). The cursor row must itself
 * pass the filters, so an unknown or filtered-out cursor yields no rows.
 */
export function listRunsSql(shape: ListRunsShape): string {
  const filters: string[] = []
  if (shape.status) filters.push('status IN (SELECT value FROM json_each(:statuses))')
  if (shape.workflowName) filters.push('workflow_name = :workflowName')
  if (shape.threadId) filters.push('thread_id = :threadId')
  const where = [...filters]
  if (shape.before) {
    where.push(`(created_at, run_id) < (SELECT created_at, run_id FROM runs WHERE ${['run_id = :before', ...filters].join(' AND ')})`)
  }
  return `SELECT ${RUN_COLUMNS} FROM runs${whereClause(where)} ORDER BY created_at DESC, run_id DESC LIMIT :limit`
}

/** Which filters a `listCheckpoints` query uses; each shape is one statement. */
export interface ListCheckpointsShape {
  runId: boolean
  workflowName: boolean
  before: boolean
}

/**
 * `listCheckpoints`, headers only (or whole rows, `whole`): within one run newest seq first;
 * across runs by (created_at, seq, id) descending. Named parameters `:runId`, `:workflowName`,
 * `:before`, `:limit` (-1 for none). As in `listRunsSql`, the cursor row must pass the filters.
 */
export function listCheckpointsSql(shape: ListCheckpointsShape, whole = false): string {
  const filters: string[] = []
  if (shape.runId) filters.push('run_id = :runId')
  if (shape.workflowName) filters.push('workflow_name = :workflowName')
  const where = [...filters]
  const key = shape.runId ? 'seq' : '(created_at, seq, id)'
  if (shape.before) {
    const keyColumns = shape.runId ? 'seq' : 'created_at, seq, id'
    where.push(`${key} < (SELECT ${keyColumns} FROM checkpoints WHERE ${['id = :before', ...filters].join(' AND ')})`)
  }
  const order = shape.runId ? 'seq DESC' : 'created_at DESC, seq DESC, id DESC'
  const columns = whole ? CHECKPOINT_COLUMNS : HEADER_COLUMNS
  return `SELECT ${columns} FROM checkpoints${whereClause(where)} ORDER BY ${order} LIMIT :limit`
}

function whereClause(conditions: readonly string[]): string {
  return conditions.length === 0 ? '' : ` WHERE ${conditions.join(' AND ')}`
}
