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

export const RUN_COLUMNS = `run_id AS "runId", status, name, thread_id AS "threadId", workflow_name AS "workflowName",
  config_signature AS "configSignature", last_seq AS "lastSeq", created_at AS "createdAt", updated_at AS "updatedAt", metadata, seal, digest`

/** {@link RUN_COLUMNS} of a table aliased `r`. */
export const RUN_COLUMNS_OF_R = `r.run_id AS "runId", r.status, r.name, r.thread_id AS "threadId", r.workflow_name AS "workflowName",
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
  const loadEffects = `(SELECT coalesce(json_agg(e)::text, '[]') FROM (SELECT ${EFFECT_COLUMNS} FROM ${s}.effects WHERE run_id = $1 ORDER BY started_at, ord) e)`
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
     * its effects, and the items the checkpoints refer to: of each list they name, the first
     * `n` items (the largest `n` a ref gives it), and the whole of the run's log (`$3`). A row
     * whose `lists` is not JSON fails the statement (SQLSTATE class 22); the engine then reads
     * without it.
     */
    loadRun: `WITH recent AS (SELECT ${CHECKPOINT_COLUMNS} FROM ${s}.checkpoints WHERE run_id = $1 ORDER BY seq DESC LIMIT $2),
      wanted AS (SELECT id, max(n) AS n FROM (
          SELECT ref->>'id' AS id, (ref->>'n')::numeric AS n FROM recent c, json_array_elements(c.lists::json) AS ref
          UNION ALL SELECT $3::text, 9007199254740991) w
        WHERE id IS NOT NULL GROUP BY id)
      SELECT (SELECT row_to_json(r)::text FROM (SELECT ${RUN_COLUMNS} FROM ${s}.runs WHERE run_id = $1) r) AS run,
        (SELECT coalesce(json_agg(c ORDER BY c.seq DESC)::text, '[]') FROM recent c) AS checkpoints,
        ${loadEffects} AS effects,
        (SELECT coalesce(json_agg(l)::text, '[]') FROM (SELECT w.id, (SELECT json_agg(i.item ORDER BY i.idx) FROM ${s}.list_items i
          WHERE i.run_id = $1 AND i.list_id = w.id AND i.idx < w.n) AS items FROM wanted w) l) AS lists`,
    /** `loadRun` without the lists (read apart when a checkpoint's `lists` is not JSON). */
    loadRunRows: `SELECT (SELECT row_to_json(r)::text FROM (SELECT ${RUN_COLUMNS} FROM ${s}.runs WHERE run_id = $1) r) AS run,
      (SELECT coalesce(json_agg(c)::text, '[]') FROM (SELECT ${CHECKPOINT_COLUMNS} FROM ${s}.checkpoints WHERE run_id = $1 ORDER BY seq DESC LIMIT $2) c) AS checkpoints,
      ${loadEffects} AS effects`,
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
export function patchSets(patch: RunPatch | undefined, values: unknown[]): { sets: string[]; where: string } {
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
