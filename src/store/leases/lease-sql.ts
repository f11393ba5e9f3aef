/**
 * The statements of the lease protocol on SQL (see `SqlLeases`), for SQLite and Postgres, over the
 * lease columns of the runs table. Lease times on SQLite are Unix ms of this machine, passed as a
 * statement's last parameter (the one after those its comment lists); Postgres reads `now()`. A
 * set of rows is one parameter, a JSON array of arrays, read as a table by {@link jsonRows}.
 */
import type { RunPatch } from '../engine/rows.js'
import { engineSql, patchSets, RUN_COLUMNS } from '../sql/engine-sql.js'
import type { SqlDialect, SqlQuery } from '../sql/sql-driver.js'

/** The lease statements of a dialect. */
export type LeaseSql = ReturnType<typeof leaseSql>

/** {@link LeaseSql} of a dialect; `channel` is the Postgres channel workers `LISTEN` on (a plain identifier). */
export function leaseSql(d: SqlDialect, channel?: string) {
  const pg = d.name === 'postgres'
  const [runs, items] = [d.table('runs'), d.table('list_items')]
  /** The current time in a statement whose own parameters end at `$n`. */
  const now = (n: number) => (pg ? 'now()' : `$${n + 1}`)
  const later = (n: number, ms: string) => (pg ? `now() + ${ms} * interval '1 millisecond'` : `$${n + 1} + ${ms}`)
  const live = (n: number) => `owner IS NOT NULL AND lease_expires_at >= ${now(n)}`
  /** A list parameter that may be null (every queue, no queue full). */
  const orNull = (param: string) => (pg ? `${param}::text[]` : param)
  const leaseColumns = `run_id AS "runId", queue, coalesce(priority, 0) AS priority, owner, lease_epoch AS epoch,
    ${pg ? 'extract(epoch FROM lease_expires_at) * 1000' : 'lease_expires_at'} AS "leaseExpiresAt", recoveries, cancel_requested AS "cancelRequested"`
  /** A run of a queue of `q` (null: any) but not of `f` (queues at their limit) that nobody holds live. */
  const claimable = (q: string, f: string, n: number) => `queue IS NOT NULL AND status IN ('queued', 'running')
      AND (owner IS NULL OR lease_expires_at < ${now(n)}) AND (${orNull(q)} IS NULL OR ${d.in('queue', q)})
      AND (${orNull(f)} IS NULL OR NOT ${d.in('queue', f)})`
  /** SET expressions see the row before the update: a lapsed holder counts a recovery. */
  const takeLease = (owner: string, ms: string, n: number) => `owner = ${owner}, lease_epoch = lease_epoch + 1,
      lease_expires_at = ${later(n, ms)}, recoveries = recoveries + ${raised('owner IS NOT NULL')}`
  /** Clear the holder; a lapsed one is fenced out by a raised epoch. */
  const fenceOut = `lease_epoch = lease_epoch + ${raised('owner IS NOT NULL')}, owner = NULL, lease_expires_at = NULL`
  const wake = (text: string) => wakes(text, channel)
  const { insertRun, getRun } = engineSql(d)
  return {
    insertRun,
    getRun,
    /** Insert a queued run (`$1`…`$12` in RUN_PARAMS order, queue `$13`, priority `$14`); a row when inserted. */
    enqueue: wake(`INSERT INTO ${runs} (run_id, status, name, thread_id, workflow_name, config_signature, last_seq, created_at, updated_at, metadata, seal, digest, queue, priority)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT (run_id) DO NOTHING RETURNING queue, status`),
    /**
     * Postgres: claim in one statement, owner `$1`, at most `$2` runs, of queues `$3` but not `$4`,
     * lease `$5` ms. Rows another transaction holds (a commit in progress, another claim) are skipped.
     */
    claim: pg
      ? `WITH picked AS (
          SELECT run_id AS picked_id FROM ${runs} WHERE ${claimable('$3', '$4', 5)}
          ORDER BY priority DESC, created_at, run_id LIMIT $2 FOR UPDATE SKIP LOCKED
        )
        UPDATE ${runs} SET ${takeLease('$1', '$5', 5)}
        FROM picked WHERE run_id = picked.picked_id
        RETURNING ${RUN_COLUMNS}, ${leaseColumns}`
      : undefined,
    /** Claimable runs in claim order (at most `$1`, of queues `$2` but not `$3`), on Postgres locked until the transaction ends. */
    candidates: `SELECT run_id AS "runId", queue FROM ${runs} WHERE ${claimable('$2', '$3', 3)}
      ORDER BY priority DESC, created_at, run_id LIMIT $1${pg ? ' FOR UPDATE SKIP LOCKED' : ''}`,
    /** Runs of the queues `$1` held under a live lease. */
    liveCounts: `SELECT queue, count(*) AS n FROM ${runs}
      WHERE ${d.in('queue', '$1')} AND ${live(1)} AND status IN ('queued', 'running')
      GROUP BY queue`,
    /** Take the lease of the picked runs `$2` for owner `$1`, `$3` ms. */
    claimRuns: `UPDATE ${runs} SET ${takeLease('$1', '$3', 3)} WHERE ${d.in('run_id', '$2')}
      RETURNING ${RUN_COLUMNS}, ${leaseColumns}`,
    /**
     * Take the lease of run `$1` for owner `$2`, `$3` ms, unless a live lease holds it (a holder
     * `$4` at epoch `$5` is taken from). On Postgres, under READ COMMITTED, a concurrent taker
     * waits for the row and re-checks the condition on the new version, so exactly one gets it.
     */
    acquire: `UPDATE ${runs} SET ${takeLease('$2', '$3', 5)}
      WHERE run_id = $1 AND (owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at < ${now(5)} OR (owner = $4 AND lease_epoch = $5))
      RETURNING ${RUN_COLUMNS}, ${leaseColumns}`,
    /** Extend owner `$1`'s leases of the runs `$3` (rows of run id and epoch) by `$2` ms. */
    heartbeat: `UPDATE ${runs} SET lease_expires_at = ${later(3, '$2')}
      FROM ${jsonRows(d, '$3', ['held_id', 'held_epoch'])}
      WHERE run_id = u.held_id AND lease_epoch = CAST(u.held_epoch AS ${d.int}) AND owner = $1
      RETURNING run_id AS "runId", cancel_requested AS "cancelRequested"`,
    /** The run `$1` with its lease state, locked for a cancel. */
    lockForCancel: `SELECT status, digest, ${live(1)} AS live FROM ${runs} WHERE run_id = $1${d.forUpdate}`,
    requestCancel: `UPDATE ${runs} SET cancel_requested = true WHERE run_id = $1`,
    /** Cancel a run nobody holds (its digest `$3` when not null, `updated_at` at least `$2`). */
    cancelNow: `UPDATE ${runs} SET status = 'cancelled', digest = coalesce($3, digest), updated_at = ${d.greatest}(updated_at, $2), cancel_requested = true,
        ${fenceOut}
      WHERE run_id = $1`,
    getLease: `SELECT ${leaseColumns} FROM ${runs} WHERE run_id = $1`,
    /**
     * The runs `$1` and their lease state (ms left of a live lease), locked in run id order for a
     * requeue: two requeues of overlapping runs wait for each other instead of deadlocking.
     */
    lockForRequeue: `SELECT ${RUN_COLUMNS}, queue, owner, ${live(1)} AS live,
        ${d.greatest}(0, ${pg ? 'extract(epoch FROM lease_expires_at - now()) * 1000' : 'lease_expires_at - $2'}) AS "leaseLeftMs"
      FROM ${runs} WHERE ${d.in('run_id', '$1')} ORDER BY run_id${pg ? ' COLLATE "C"' : ''}${d.forUpdate}`,
    /** Queue the paused runs of `$1` (rows of run id, metadata and digest) again, `updated_at` at least `$2`. */
    requeue: wake(`UPDATE ${runs} SET status = 'queued', metadata = u.new_metadata, digest = u.new_digest, updated_at = ${d.greatest}(updated_at, $2),
        ${fenceOut}
      FROM ${jsonRows(d, '$1', ['requeued_id', 'new_metadata', 'new_digest'])}
      WHERE run_id = u.requeued_id AND status IN ('paused', 'sleeping', 'waiting') RETURNING queue, status`),
    /** Append each item of `$1` (rows of run id, list id and item; each list once) at the end of its list. */
    appendItems: `INSERT INTO ${items} (run_id, list_id, idx, item)
      SELECT u.run_id, u.list_id, coalesce((SELECT max(i.idx) + 1 FROM ${items} i WHERE i.run_id = u.run_id AND i.list_id = u.list_id), 0), u.item
      FROM ${jsonRows(d, '$1', ['run_id', 'list_id', 'item'])}`,
    /**
     * Clear the lease of run `$1` held by owner `$2` at epoch `$3`, count a recovery when `$4` is
     * 1, and apply `patch` (only while the digest is the one its swap expects). A row when released.
     */
    release(patch: RunPatch | undefined, values: unknown[]): SqlQuery {
      const { sets, where } = patchSets(patch, values)
      const text = `UPDATE ${runs} SET ${['owner = NULL', 'lease_expires_at = NULL', 'recoveries = recoveries + $4', ...sets].join(', ')}
        WHERE run_id = $1 AND owner = $2 AND lease_epoch = $3${where} RETURNING queue, status`
      return { text: wake(text), values }
    },
  }
}

/** 1 when `condition` holds, else 0. */
function raised(condition: string): string {
  return `(CASE WHEN ${condition} THEN 1 ELSE 0 END)`
}

/** The rows of the JSON array of arrays `param` as a table `u` with text `columns`. */
function jsonRows(d: SqlDialect, param: string, columns: readonly string[]): string {
  const element = d.name === 'postgres' ? 'e' : 'value'
  const select = columns.map((column, k) => `${element} ->> ${k} AS ${column}`).join(', ')
  return d.name === 'postgres' ? `(SELECT ${select} FROM json_array_elements(${param}::json) AS e) AS u` : `(SELECT ${select} FROM json_each(${param})) AS u`
}

/**
 * A change that returns the `queue` and `status` of the runs it changed, made to wake idle
 * workers when one of them is claimable: on Postgres with a `NOTIFY` on `channel` (delivered at
 * commit), still a row per run changed. Without a channel, unchanged (its workers poll).
 */
function wakes(text: string, channel: string | undefined): string {
  if (channel === undefined) return text
  return `WITH changed AS (${text})
    SELECT CASE WHEN status IN ('queued', 'running') THEN pg_notify('${channel}', queue) END AS woke FROM changed`
}
