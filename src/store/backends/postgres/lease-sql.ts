import type { RunPatch } from '../../engine/rows.js'
import { patchSets, quoteIdent, RUN_COLUMNS, type SqlQuery } from './sql.js'

/**
 * The SQL statements of the Postgres lease protocol (see `PostgresLeases`): claims, heartbeats,
 * releases, cancels and requeues, over the lease columns of the runs table. Lease times are the
 * server's clock.
 */

const LEASE_COLUMNS = `run_id AS "runId", queue, coalesce(priority, 0) AS priority, owner, lease_epoch AS epoch,
  extract(epoch FROM lease_expires_at) * 1000 AS "leaseExpiresAt", recoveries, cancel_requested AS "cancelRequested"`

/** Statements of the lease protocol (see `PostgresLeases`); lease times are the server's clock. */
export type LeaseStatements = ReturnType<typeof leaseStatements>

/** The lease statements for tables in `schema` (already validated). */
export function leaseStatements(schema: string) {
  const s = quoteIdent(schema)
  /** A claimable run of queues `$q` (null: any) but not `$f` (queues at their limit). */
  const claimable = (q: string, f: string) => `r.queue IS NOT NULL AND r.status IN ('queued', 'running')
      AND (r.owner IS NULL OR r.lease_expires_at < now()) AND (${q}::text[] IS NULL OR r.queue = ANY(${q}::text[]))
      AND (${f}::text[] IS NULL OR r.queue <> ALL(${f}::text[]))`
  /** SET expressions see the row before the update: a lapsed holder counts a recovery. */
  const takeLease = (owner: string, ms: string) => `owner = ${owner}, lease_epoch = r.lease_epoch + 1,
      lease_expires_at = now() + ${ms} * interval '1 millisecond', recoveries = r.recoveries + (r.owner IS NOT NULL)::int`
  return {
    /** Insert a queued run (`$1`…`$12` in RUN_PARAMS order, queue `$13`, priority `$14`) and wake workers on channel `$15`. */
    enqueue: `WITH inserted AS (
        INSERT INTO ${s}.runs (run_id, status, name, thread_id, workflow_name, config_signature, last_seq, created_at, updated_at, metadata, seal, digest, queue, priority)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT (run_id) DO NOTHING RETURNING queue
      )
      SELECT pg_notify($15, queue) FROM inserted`,
    /**
     * Claim in one statement: owner `$1`, at most `$2` runs, of queues `$3` but not `$4`, lease
     * `$5` ms. Rows another transaction holds (a commit in progress, another claim) are skipped.
     */
    claim: `WITH picked AS (
        SELECT r.run_id AS picked_id FROM ${s}.runs r WHERE ${claimable('$3', '$4')}
        ORDER BY r.priority DESC, r.created_at, r.run_id LIMIT $2 FOR UPDATE SKIP LOCKED
      )
      UPDATE ${s}.runs r SET ${takeLease('$1', '$5')}
      FROM picked WHERE r.run_id = picked.picked_id
      RETURNING ${RUN_COLUMNS}, ${LEASE_COLUMNS}`,
    /** Under queue limits: candidates (at most `$1`, of queues `$2` but not `$3`), locked until the transaction ends. */
    candidates: `SELECT r.run_id AS "runId", r.queue FROM ${s}.runs r WHERE ${claimable('$2', '$3')}
      ORDER BY r.priority DESC, r.created_at, r.run_id LIMIT $1 FOR UPDATE SKIP LOCKED`,
    /** Under queue limits: take the lease of the locked candidates `$2` for owner `$1`, `$3` ms. */
    claimRuns: `UPDATE ${s}.runs r SET ${takeLease('$1', '$3')} WHERE r.run_id = ANY($2::text[])
      RETURNING ${RUN_COLUMNS}, ${LEASE_COLUMNS}`,
    /** Serializes claims of one limited queue (`$1`: the lock key) until the transaction ends. */
    lockQueue: `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`,
    /** Runs of the queues `$1` held under a live lease. */
    liveCounts: `SELECT queue, count(*)::int AS n FROM ${s}.runs
      WHERE queue = ANY($1::text[]) AND owner IS NOT NULL AND lease_expires_at >= now() AND status IN ('queued', 'running')
      GROUP BY queue`,
    /**
     * Take the lease of run `$1` for owner `$2`, `$3` ms, unless a live lease holds it (a holder
     * `$4` at epoch `$5` is taken from). Under READ COMMITTED a concurrent taker waits for the row
     * and re-checks the condition on the new version, so exactly one of them gets it.
     */
    acquire: `UPDATE ${s}.runs r SET ${takeLease('$2', '$3')}
      WHERE r.run_id = $1 AND (r.owner IS NULL OR r.lease_expires_at IS NULL OR r.lease_expires_at < now() OR (r.owner = $4 AND r.lease_epoch = $5))
      RETURNING ${RUN_COLUMNS}, ${LEASE_COLUMNS}`,
    /** Extend owner `$1`'s leases of runs `$3` at epochs `$4` by `$2` ms. */
    heartbeat: `UPDATE ${s}.runs r SET lease_expires_at = now() + $2 * interval '1 millisecond'
      FROM unnest($3::text[], $4::bigint[]) AS h(run_id, epoch)
      WHERE r.run_id = h.run_id AND r.lease_epoch = h.epoch AND r.owner = $1
      RETURNING r.run_id AS "runId", r.cancel_requested AS "cancelRequested"`,
    /** The run `$1` with its lease state, locked for a cancel. */
    lockForCancel: `SELECT status, digest, owner IS NOT NULL AND lease_expires_at >= now() AS live FROM ${s}.runs WHERE run_id = $1 FOR UPDATE`,
    requestCancel: `UPDATE ${s}.runs SET cancel_requested = true WHERE run_id = $1`,
    /** Cancel a run nobody holds (its digest `$3` when not null); a lapsed holder is fenced out by a raised epoch. */
    cancelNow: `UPDATE ${s}.runs SET status = 'cancelled', digest = coalesce($3, digest), updated_at = greatest(updated_at, $2), cancel_requested = true,
        lease_epoch = lease_epoch + (owner IS NOT NULL)::int, owner = NULL, lease_expires_at = NULL
      WHERE run_id = $1`,
    getLease: `SELECT ${LEASE_COLUMNS} FROM ${s}.runs WHERE run_id = $1`,
    /** The runs `$1` (a text array) and their lease state (ms left of a live lease, on the server's clock), locked in run id order for a requeue. */
    lockManyForRequeue: `SELECT ${RUN_COLUMNS}, queue, owner, owner IS NOT NULL AND lease_expires_at >= now() AS live,
        greatest(0, extract(epoch FROM lease_expires_at - now()) * 1000) AS "leaseLeftMs"
      FROM ${s}.runs WHERE run_id = ANY($1::text[]) ORDER BY run_id COLLATE "C" FOR UPDATE`,
    /**
     * Queue the paused runs `$1` again with metadata `$2` and digests `$4` (arrays in step), `updated_at` at least `$3`,
     * fence out a lapsed holder by a raised epoch, and wake workers on channel `$5` (delivered at commit).
     */
    requeueMany: `WITH requeued AS (
        UPDATE ${s}.runs r SET status = 'queued', metadata = u.metadata, digest = u.digest, updated_at = greatest(r.updated_at, $3),
          lease_epoch = r.lease_epoch + (r.owner IS NOT NULL)::int, owner = NULL, lease_expires_at = NULL
        FROM unnest($1::text[], $2::text[], $4::text[]) AS u(run_id, metadata, digest)
        WHERE r.run_id = u.run_id AND r.status IN ('paused', 'sleeping', 'waiting') RETURNING r.queue
      )
      SELECT pg_notify($5, queue) FROM (SELECT DISTINCT queue FROM requeued) AS q`,
    /** Append item `$3[k]` at the end of run `$1[k]`'s list `$2[k]` (each run once). */
    appendItems: `INSERT INTO ${s}.list_items (run_id, list_id, idx, item)
      SELECT u.run_id, u.list_id, coalesce((SELECT max(i.idx) + 1 FROM ${s}.list_items i WHERE i.run_id = u.run_id AND i.list_id = u.list_id), 0), u.item
      FROM unnest($1::text[], $2::text[], $3::text[]) AS u(run_id, list_id, item)`,
  }
}

/**
 * `release`: clear the lease of run `$1` held by owner `$2` at epoch `$3`, count a recovery
 * when `$4` is 1, apply the patch (only while the digest is the one its swap expects), and wake
 * idle workers (channel `$5`) when the run is claimable again. Returns one row when released.
 */
export function releaseSql(schema: string, params: { runId: string; owner: string; epoch: number; failed: boolean; channel: string; patch: RunPatch | undefined }): SqlQuery {
  const values: unknown[] = [params.runId, params.owner, params.epoch, params.failed ? 1 : 0, params.channel]
  const { sets, where } = patchSets(params.patch, values)
  const text = `WITH released AS (
      UPDATE ${quoteIdent(schema)}.runs SET ${['owner = NULL', 'lease_expires_at = NULL', 'recoveries = recoveries + $4', ...sets].join(', ')}
      WHERE run_id = $1 AND owner = $2 AND lease_epoch = $3${where} RETURNING queue, status
    )
    SELECT CASE WHEN status IN ('queued', 'running') THEN pg_notify($5, queue) END AS woke FROM released`
  return { text, values }
}
