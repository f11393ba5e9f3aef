import { InvalidArgumentError } from '../../../core/errors.js'
import type { ListCheckpointsQuery, ListRunsQuery } from '../../checkpoint-store.js'
import type { RunPatch } from '../../engine/rows.js'

/**
 * The SQL statements of the Postgres engine. Every table is qualified with the store's schema
 * (validated by {@link assertSchemaName}, then quoted). Columns are aliased to the engine's row
 * fields; `bigint` columns arrive as strings from `pg`, so the engine converts those fields to
 * numbers. The tables themselves are created in `migrations.ts`.
 */

/** The schema a store uses when none is given. */
export const DEFAULT_SCHEMA = 'cairn'

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/

/**
 * A schema name is a plain, unquoted Postgres identifier: 1-63 lowercase letters, digits and `_`,
 * not starting with a digit, and not `pg_…` (reserved for system schemas). Anything else is
 * refused rather than quoted into SQL.
 */
export function assertSchemaName(name: unknown): asserts name is string {
  if (typeof name !== 'string' || !SCHEMA_NAME.test(name) || name.startsWith('pg_')) {
    throw new InvalidArgumentError(
      `Postgres schema name ${JSON.stringify(name)} is not a plain identifier: use 1-63 lowercase letters, digits or _, not starting with a digit or pg_`,
    )
  }
}

/** Quote an identifier for SQL (schema names are validated first; this also escapes quotes). */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}

const RUN_COLUMNS = `run_id AS "runId", status, name, thread_id AS "threadId", workflow_name AS "workflowName",
  config_signature AS "configSignature", last_seq AS "lastSeq", created_at AS "createdAt", updated_at AS "updatedAt", metadata, seal, digest`

/** {@link RUN_COLUMNS} of a table aliased `r`. */
const RUN_COLUMNS_OF_R = `r.run_id AS "runId", r.status, r.name, r.thread_id AS "threadId", r.workflow_name AS "workflowName",
  r.config_signature AS "configSignature", r.last_seq AS "lastSeq", r.created_at AS "createdAt", r.updated_at AS "updatedAt", r.metadata, r.seal, r.digest`

const HEADER_COLUMNS = `id, run_id AS "runId", parent_id AS "parentId", seq, kind, phase, schema_version AS "schemaVersion",
  created_at AS "createdAt", workflow_name AS "workflowName", terminal, metadata`

const CHECKPOINT_COLUMNS = `${HEADER_COLUMNS}, body, lists, digest`

const EFFECT_COLUMNS = `run_id AS "runId", call_id AS "callId", name, input_hash AS "inputHash", idempotency_key AS "idempotencyKey",
  status, output, output_hash AS "outputHash", attempts, started_at AS "startedAt", completed_at AS "completedAt"`

/** The parameter order of `insertRun` (and of the run a commit creates). */
export const RUN_PARAMS = ['runId', 'status', 'name', 'threadId', 'workflowName', 'configSignature', 'lastSeq', 'createdAt', 'updatedAt', 'metadata', 'seal', 'digest'] as const

/** The columns of the checkpoint rows `finishCommit` inserts, in order. */
export const CHECKPOINT_PARAMS = [
  'id',
  'runId',
  'parentId',
  'seq',
  'kind',
  'phase',
  'schemaVersion',
  'createdAt',
  'workflowName',
  'terminal',
  'metadata',
  'body',
  'lists',
  'digest',
] as const

/** The Postgres type of each checkpoint column. */
const CHECKPOINT_TYPES: Record<(typeof CHECKPOINT_PARAMS)[number], string> = {
  id: 'text',
  runId: 'text',
  parentId: 'text',
  seq: 'bigint',
  kind: 'text',
  phase: 'text',
  schemaVersion: 'bigint',
  createdAt: 'double precision',
  workflowName: 'text',
  terminal: 'boolean',
  metadata: 'text',
  body: 'text',
  lists: 'text',
  digest: 'text',
}

/** The parameter order of `recordEffectIntent`. */
export const EFFECT_PARAMS = [
  'runId',
  'callId',
  'name',
  'inputHash',
  'idempotencyKey',
  'status',
  'output',
  'outputHash',
  'attempts',
  'startedAt',
  'completedAt',
] as const

/** Statements whose text depends only on the schema. */
export type PostgresStatements = ReturnType<typeof postgresStatements>

/** The fixed statements for tables in `schema` (already validated). */
export function postgresStatements(schema: string) {
  const s = quoteIdent(schema)
  const placeholders = (n: number, from = 1) => Array.from({ length: n }, (_, i) => `$${i + from}`).join(', ')
  return {
    insertRun: `INSERT INTO ${s}.runs (run_id, status, name, thread_id, workflow_name, config_signature, last_seq, created_at, updated_at, metadata, seal, digest)
      VALUES (${placeholders(RUN_PARAMS.length)}) ON CONFLICT (run_id) DO NOTHING`,
    getRun: `SELECT ${RUN_COLUMNS} FROM ${s}.runs WHERE run_id = $1`,
    deleteRun: `DELETE FROM ${s}.runs WHERE run_id = $1`,
    deleteRunCheckpoints: `DELETE FROM ${s}.checkpoints WHERE run_id = $1`,
    deleteRunItems: `DELETE FROM ${s}.list_items WHERE run_id = $1`,
    deleteRunEffects: `DELETE FROM ${s}.effects WHERE run_id = $1`,

    /**
     * Lock the run row for the rest of the transaction (writers of one run queue here) and read
     * its `last_seq` — after waiting, the newest committed version — and whether any checkpoint
     * id of `$2` is taken. The fencing check of the worker layer belongs next to this read.
     */
    lockRunForCommit: `SELECT r.last_seq AS "lastSeq", EXISTS (SELECT 1 FROM ${s}.checkpoints c WHERE c.id = ANY($2::text[])) AS "duplicate",
        r.owner, r.lease_epoch AS epoch, r.cancel_requested AS "cancelRequested", r.digest
      FROM ${s}.runs r WHERE r.run_id = $1 FOR UPDATE OF r`,
    /** The lease a commit to another run (a child run) is fenced on, share-locked until the commit ends. */
    fenceOf: `SELECT owner, lease_epoch AS epoch, cancel_requested AS "cancelRequested" FROM ${s}.runs WHERE run_id = $1 FOR SHARE`,
    /** Each list's length is one past its highest index: one index seek per list. */
    listLengths: `SELECT l.list_id AS "listId",
        coalesce((SELECT i.idx + 1 FROM ${s}.list_items i WHERE i.run_id = $1 AND i.list_id = l.list_id ORDER BY i.idx DESC LIMIT 1), 0) AS length
      FROM unnest($2::text[]) AS l(list_id)`,
    insertItems: `INSERT INTO ${s}.list_items (run_id, list_id, idx, item)
      SELECT $1, l.list_id, l.idx, l.item FROM unnest($2::text[], $3::int[], $4::text[]) AS l(list_id, idx, item)`,
    /**
     * The run's (`$1`) new `last_seq` (`$2`), `updated_at` (at least `$3`) and progress digest
     * (`seal`, `$4`), and its checkpoint rows (`$5`…: one array per column, in
     * {@link CHECKPOINT_PARAMS} order), in one statement.
     */
    finishCommit: `WITH run AS (
        UPDATE ${s}.runs SET last_seq = $2, updated_at = greatest(updated_at, $3), seal = $4 WHERE run_id = $1
      )
      INSERT INTO ${s}.checkpoints
        (id, run_id, parent_id, seq, kind, phase, schema_version, created_at, workflow_name, terminal, metadata, body, lists, digest)
      SELECT u.id, u.run_id, u.parent_id, u.seq, u.kind, u.phase, u.schema_version, u.created_at, u.workflow_name, u.terminal, u.metadata, u.body, u.lists, u.digest
      FROM unnest(${CHECKPOINT_PARAMS.map((key, i) => `$${i + 5}::${CHECKPOINT_TYPES[key]}[]`).join(', ')})
        AS u(id, run_id, parent_id, seq, kind, phase, schema_version, created_at, workflow_name, terminal, metadata, body, lists, digest)`,
    runLastSeq: `SELECT last_seq AS "lastSeq" FROM ${s}.runs WHERE run_id = $1`,

    getCheckpoints: `SELECT ${CHECKPOINT_COLUMNS} FROM ${s}.checkpoints WHERE id = ANY($1::text[])`,
    latestOfRun: `SELECT ${CHECKPOINT_COLUMNS} FROM ${s}.checkpoints WHERE run_id = $1 ORDER BY seq DESC LIMIT 1`,
    /**
     * What a resume reads, in one statement (one round trip, one snapshot), each part as JSON
     * text of rows with the columns above: the run, its `$2` newest checkpoints (newest first),
     * its effects, and the items of each of its lists (which the engine cuts to the lengths
     * the checkpoints refer to: a list's items past them are only ever a torn commit's).
     */
    loadRun: `SELECT (SELECT row_to_json(r)::text FROM (SELECT ${RUN_COLUMNS} FROM ${s}.runs WHERE run_id = $1) r) AS run,
      (SELECT coalesce(json_agg(c)::text, '[]') FROM (SELECT ${CHECKPOINT_COLUMNS} FROM ${s}.checkpoints WHERE run_id = $1 ORDER BY seq DESC LIMIT $2) c) AS checkpoints,
      (SELECT coalesce(json_agg(e)::text, '[]') FROM (SELECT ${EFFECT_COLUMNS} FROM ${s}.effects WHERE run_id = $1 ORDER BY started_at, ord) e) AS effects,
      (SELECT coalesce(json_agg(l)::text, '[]') FROM (SELECT list_id AS id, json_agg(item ORDER BY idx) AS items FROM ${s}.list_items WHERE run_id = $1 GROUP BY list_id) l) AS lists`,
    latestOfWorkflow: `SELECT ${CHECKPOINT_COLUMNS} FROM ${s}.checkpoints WHERE workflow_name = $1
      ORDER BY created_at DESC, seq DESC, id DESC LIMIT 1`,
    /** Every range's items in one statement (one snapshot): `ref` is the range's 1-based position. */
    readLists: `SELECT r.ref AS ref, i.item FROM unnest($2::text[], $3::bigint[], $4::bigint[]) WITH ORDINALITY AS r(list_id, first, n, ref)
      JOIN ${s}.list_items i ON i.run_id = $1 AND i.list_id = r.list_id AND i.idx >= r.first AND i.idx < r.n
      ORDER BY r.ref, i.idx`,

    lockRun: `SELECT 1 FROM ${s}.runs WHERE run_id = $1 FOR UPDATE`,
    deleteCheckpoints: `DELETE FROM ${s}.checkpoints WHERE run_id = $1 AND id = ANY($2::text[])`,
    listRefsOfRun: `SELECT lists FROM ${s}.checkpoints WHERE run_id = $1`,
    /** Cut each list of the run to the length still needed (`$2`/`$3`); lists not named go whole. */
    truncateLists: `DELETE FROM ${s}.list_items i WHERE i.run_id = $1
      AND i.idx >= coalesce((SELECT k.n FROM unnest($2::text[], $3::bigint[]) AS k(list_id, n) WHERE k.list_id = i.list_id), 0)`,

    /** An intent: a new row, or one more attempt on the stored one. */
    recordEffectIntent: `INSERT INTO ${s}.effects
        (run_id, call_id, name, input_hash, idempotency_key, status, output, output_hash, attempts, started_at, completed_at)
      VALUES (${placeholders(EFFECT_PARAMS.length)})
      ON CONFLICT (run_id, call_id) DO UPDATE SET attempts = effects.attempts + 1`,
    /**
     * `recordEffectIntent` for many intents of distinct call ids in one statement (`$1`…: one
     * array per column, in {@link EFFECT_PARAMS} order), inserted in array order.
     */
    recordEffectIntents: `INSERT INTO ${s}.effects
        (run_id, call_id, name, input_hash, idempotency_key, status, output, output_hash, attempts, started_at, completed_at)
      SELECT e.run_id, e.call_id, e.name, e.input_hash, e.idempotency_key, e.status, e.output, e.output_hash, e.attempts, e.started_at, e.completed_at
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::integer[], $10::double precision[], $11::double precision[])
        WITH ORDINALITY AS e(run_id, call_id, name, input_hash, idempotency_key, status, output, output_hash, attempts, started_at, completed_at, n)
      ORDER BY e.n
      ON CONFLICT (run_id, call_id) DO UPDATE SET attempts = effects.attempts + 1`,
    /** `completeEffect` for many outcomes of distinct call ids in one statement (one array per parameter of `completeEffect`). */
    completeEffects: `UPDATE ${s}.effects e SET status = c.status, output = c.output, output_hash = c.output_hash, completed_at = c.completed_at
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::double precision[]) AS c(run_id, call_id, status, output, output_hash, completed_at)
      WHERE e.run_id = c.run_id AND e.call_id = c.call_id AND e.status IN ('pending', 'started')`,
    /** The first outcome wins: only an effect still `pending` or `started` takes one. */
    completeEffect: `UPDATE ${s}.effects SET status = $3, output = $4, output_hash = $5, completed_at = $6
      WHERE run_id = $1 AND call_id = $2 AND status IN ('pending', 'started')`,
    startEffect: `UPDATE ${s}.effects SET status = 'started' WHERE run_id = $1 AND call_id = $2 AND status = 'pending'`,
    /** Some effects of a run, in `listEffects` order. */
    getEffects: `SELECT ${EFFECT_COLUMNS} FROM ${s}.effects WHERE run_id = $1 AND call_id = ANY($2::text[]) ORDER BY started_at, ord`,
    getKeyCheck: `SELECT value FROM ${s}.key_checks WHERE key_id = $1`,
    putKeyCheck: `INSERT INTO ${s}.key_checks (key_id, value) VALUES ($1, $2) ON CONFLICT (key_id) DO NOTHING`,
    /** Ties on `started_at` keep insertion order (`ord`), as the memory engine does. */
    listEffects: `SELECT ${EFFECT_COLUMNS} FROM ${s}.effects WHERE run_id = $1 ORDER BY started_at, ord`,
    deleteEffects: `DELETE FROM ${s}.effects WHERE run_id = $1`,
    rewriteCheckpoint: `UPDATE ${s}.checkpoints SET body = $1, lists = $2, digest = $3 WHERE id = $4 AND run_id = $5`,
    rewriteItem: `UPDATE ${s}.list_items SET item = $1 WHERE run_id = $2 AND list_id = $3 AND idx = $4`,
    rewriteEffect: `UPDATE ${s}.effects SET input_hash = $1, output = $2, output_hash = $3 WHERE run_id = $4 AND call_id = $5`,

    /** Rows of `$1…$8` as arrays; a regular write (idx >= 0) keeps the first value stored, a special one (idx < 0) the newest. */
    putWrites: `INSERT INTO ${s}.pending_writes AS w (run_id, checkpoint_id, task_id, idx, channel, task_path, value, created_at)
      SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::text[], $6::text[], $7::text[], $8::double precision[])
      ON CONFLICT (run_id, checkpoint_id, task_id, idx) DO UPDATE SET channel = excluded.channel, task_path = excluded.task_path,
        value = excluded.value, created_at = excluded.created_at
      WHERE excluded.idx < 0`,
    listWrites: `SELECT run_id AS "runId", checkpoint_id AS "checkpointId", task_id AS "taskId", idx, channel, task_path AS "taskPath", value,
        created_at AS "createdAt"
      FROM ${s}.pending_writes WHERE run_id = $1 AND checkpoint_id = ANY($2::text[])`,
    deleteCheckpointWrites: `DELETE FROM ${s}.pending_writes WHERE run_id = $1 AND checkpoint_id = ANY($2::text[])`,
    deleteRunWrites: `DELETE FROM ${s}.pending_writes WHERE run_id = $1`,
  }
}

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
    /** The run `$1` and its lease state (ms left of a live lease, on the server's clock), locked for a requeue. */
    lockForRequeue: `SELECT ${RUN_COLUMNS}, queue, owner, owner IS NOT NULL AND lease_expires_at >= now() AS live,
        greatest(0, extract(epoch FROM lease_expires_at - now()) * 1000) AS "leaseLeftMs"
      FROM ${s}.runs WHERE run_id = $1 FOR UPDATE`,
    /**
     * Queue the paused run `$1` again with metadata `$2` and digest `$5` (`updated_at` at least `$3`),
     * fence out a lapsed holder by a raised epoch, and wake workers on channel `$4` (delivered at commit).
     */
    requeuePaused: `WITH requeued AS (
        UPDATE ${s}.runs SET status = 'queued', metadata = $2, digest = $5, updated_at = greatest(updated_at, $3),
          lease_epoch = lease_epoch + (owner IS NOT NULL)::int, owner = NULL, lease_expires_at = NULL
        WHERE run_id = $1 AND status IN ('paused', 'sleeping', 'waiting') RETURNING queue
      )
      SELECT pg_notify($4, queue) FROM requeued`,
    wake: `SELECT pg_notify($1, $2)`,
    /** Append item `$3` at the end of run `$1`'s list `$2` (a requeue's run-log entry, in its transaction). */
    appendItem: `INSERT INTO ${s}.list_items (run_id, list_id, idx, item)
      SELECT $1, $2, coalesce(max(idx) + 1, 0), $3 FROM ${s}.list_items WHERE run_id = $1 AND list_id = $2`,
    /** `lockForRequeue` for the runs `$1` (a text array), locked in run id order. */
    lockManyForRequeue: `SELECT ${RUN_COLUMNS}, queue, owner, owner IS NOT NULL AND lease_expires_at >= now() AS live,
        greatest(0, extract(epoch FROM lease_expires_at - now()) * 1000) AS "leaseLeftMs"
      FROM ${s}.runs WHERE run_id = ANY($1::text[]) ORDER BY run_id COLLATE "C" FOR UPDATE`,
    /** `requeuePaused` for the runs `$1` with metadata `$2` and digests `$4` (arrays in step), `updated_at` at least `$3`; returns the rows as queued. */
    requeueMany: `UPDATE ${s}.runs r SET status = 'queued', metadata = u.metadata, digest = u.digest, updated_at = greatest(r.updated_at, $3),
        lease_epoch = r.lease_epoch + (r.owner IS NOT NULL)::int, owner = NULL, lease_expires_at = NULL
      FROM unnest($1::text[], $2::text[], $4::text[]) AS u(run_id, metadata, digest)
      WHERE r.run_id = u.run_id AND r.status IN ('paused', 'sleeping', 'waiting')
      RETURNING ${RUN_COLUMNS_OF_R}, r.queue`,
    /** Append item `$3[k]` at the end of run `$1[k]`'s list `$2[k]` (each run once). */
    appendItems: `INSERT INTO ${s}.list_items (run_id, list_id, idx, item)
      SELECT u.run_id, u.list_id, coalesce((SELECT max(i.idx) + 1 FROM ${s}.list_items i WHERE i.run_id = u.run_id AND i.list_id = u.list_id), 0), u.item
      FROM unnest($1::text[], $2::text[], $3::text[]) AS u(run_id, list_id, item)`,
    /** Wake workers on channel `$1` for each queue of `$2`. */
    wakeMany: `SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q`,
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

/** A statement and its positional parameters. */
export interface SqlQuery {
  text: string
  values: unknown[]
}

type PatchColumn = Exclude<keyof RunPatch, 'swap'>

const RUN_PATCH_COLUMNS: Record<PatchColumn, string> = {
  status: 'status',
  name: 'name',
  threadId: 'thread_id',
  workflowName: 'workflow_name',
  configSignature: 'config_signature',
  metadata: 'metadata',
  seal: 'seal',
  updatedAt: 'updated_at',
}

/** The `SET` terms of exactly the fields a patch has (a field set to null is set to null), and the `WHERE` term of its swap; values appended to `values`. */
function patchSets(patch: RunPatch | undefined, values: unknown[]): { sets: string[]; where: string } {
  const sets: string[] = []
  for (const [key, column] of Object.entries(RUN_PATCH_COLUMNS) as [PatchColumn, string][]) {
    if (patch?.[key] === undefined) continue
    values.push(patch[key])
    sets.push(`${column} = $${values.length}`)
  }
  if (!patch?.swap) return { sets, where: '' }
  values.push(patch.swap.digest, patch.swap.ifDigest)
  sets.push(`digest = $${values.length - 1}`)
  return { sets, where: ` AND digest IS NOT DISTINCT FROM $${values.length}` }
}

/** `updateRun`: the patch's fields and digest, only while the digest is the one its swap expects. */
export function updateRunSql(schema: string, runId: string, patch: RunPatch): SqlQuery {
  const values: unknown[] = [runId]
  const { sets, where } = patchSets(patch, values)
  return { text: `UPDATE ${quoteIdent(schema)}.runs SET ${sets.join(', ')} WHERE run_id = $1${where} RETURNING ${RUN_COLUMNS}`, values }
}

/**
 * `listRuns`: newest first by (created_at, run_id). The cursor row must itself pass the filters,
 * so an unknown or filtered-out cursor yields no rows. No `limit` is `LIMIT NULL` (all rows).
 */
export function listRunsSql(schema: string, query: ListRunsQuery): SqlQuery {
  const s = quoteIdent(schema)
  const values: unknown[] = []
  const param = (value: unknown) => `$${values.push(value)}`
  const filters: string[] = []
  if (query.status !== undefined) filters.push(`status = ANY(${param(typeof query.status === 'string' ? [query.status] : query.status)}::text[])`)
  if (query.workflowName !== undefined) filters.push(`workflow_name = ${param(query.workflowName)}`)
  if (query.threadId !== undefined) filters.push(`thread_id = ${param(query.threadId)}`)
  const where = [...filters]
  if (query.before !== undefined) {
    const cursor = [`run_id = ${param(query.before)}`, ...filters].join(' AND ')
    where.push(`(created_at, run_id) < (SELECT created_at, run_id FROM ${s}.runs WHERE ${cursor})`)
  }
  const limit = param(query.limit ?? null)
  return { text: `SELECT ${RUN_COLUMNS} FROM ${s}.runs${whereClause(where)} ORDER BY created_at DESC, run_id DESC LIMIT ${limit}`, values }
}

/**
 * `listCheckpoints`, headers only (or whole rows, `whole`): within one run newest seq first; across runs by
 * (created_at, seq, id) descending. As in {@link listRunsSql}, the cursor row must pass the filters.
 */
export function listCheckpointsSql(schema: string, query: ListCheckpointsQuery, whole = false): SqlQuery {
  const s = quoteIdent(schema)
  const values: unknown[] = []
  const param = (value: unknown) => `$${values.push(value)}`
  const filters: string[] = []
  if (query.runId !== undefined) filters.push(`run_id = ${param(query.runId)}`)
  if (query.workflowName !== undefined) filters.push(`workflow_name = ${param(query.workflowName)}`)
  const where = [...filters]
  const byRun = query.runId !== undefined
  if (query.before !== undefined) {
    const cursor = [`id = ${param(query.before)}`, ...filters].join(' AND ')
    const key = byRun ? 'seq' : '(created_at, seq, id)'
    where.push(`${key} < (SELECT ${byRun ? 'seq' : 'created_at, seq, id'} FROM ${s}.checkpoints WHERE ${cursor})`)
  }
  const order = byRun ? 'seq DESC' : 'created_at DESC, seq DESC, id DESC'
  const limit = param(query.limit ?? null)
  const columns = whole ? CHECKPOINT_COLUMNS : HEADER_COLUMNS
  return { text: `SELECT ${columns} FROM ${s}.checkpoints${whereClause(where)} ORDER BY ${order} LIMIT ${limit}`, values }
}

function whereClause(conditions: readonly string[]): string {
  return conditions.length === 0 ? '' : ` WHERE ${conditions.join(' AND ')}`
}
