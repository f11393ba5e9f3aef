/**
 * The SQLite statements of the lease protocol (see `SqliteLeases`), and the two run statements
 * it prepares beside them. The engine's own statements are the SQL engine's (`sql/engine-sql.ts`);
 * the tables are created in `migrations.ts`.
 */

const RUN_COLUMNS = `run_id AS runId, status, name, thread_id AS threadId, workflow_name AS workflowName,
  config_signature AS configSignature, last_seq AS lastSeq, created_at AS createdAt, updated_at AS updatedAt, metadata, seal, digest`

/** The run statements the lease protocol prepares. */
export const SQL = {
  insertRun: `INSERT INTO runs (run_id, status, name, thread_id, workflow_name, config_signature, last_seq, created_at, updated_at, metadata, seal, digest)
    VALUES (:runId, :status, :name, :threadId, :workflowName, :configSignature, :lastSeq, :createdAt, :updatedAt, :metadata, :seal, :digest)
    ON CONFLICT (run_id) DO NOTHING`,
  getRun: `SELECT ${RUN_COLUMNS} FROM runs WHERE run_id = ?`,
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
