/**
 * The statements of the SQL engine, written once for SQLite and Postgres: columns are aliased
 * to the engine's row fields, and what the two spell differently (a table's name, a list
 * parameter, a row lock) comes from the {@link SqlDialect}. The tables are created by each
 * backend's `migrations.ts`.
 */
import type { ListCheckpointsQuery, ListRunsQuery } from '../checkpoint-store.js'
import type { CheckpointRow, EffectRow, PendingWriteRow, RunPatch, RunRow } from '../engine/rows.js'
import type { SqlDialect, SqlQuery } from './sql-driver.js'

/** The parameter order of `insertRun` (and of the run a commit creates). */
export const RUN_PARAMS = ['runId', 'status', 'name', 'threadId', 'workflowName', 'configSignature', 'lastSeq', 'createdAt', 'updatedAt', 'metadata', 'seal', 'digest'] as const
const HEADER_PARAMS = ['id', 'runId', 'parentId', 'seq', 'kind', 'phase', 'schemaVersion', 'createdAt', 'workflowName', 'terminal', 'metadata'] as const
/** The parameter order of `insertCheckpoint`. */
export const CHECKPOINT_PARAMS = [...HEADER_PARAMS, 'body', 'lists', 'digest'] as const
/** The parameter order of `recordEffectIntent`. */
export const EFFECT_PARAMS = ['runId', 'callId', 'name', 'inputHash', 'idempotencyKey', 'status', 'output', 'outputHash', 'attempts', 'startedAt', 'completedAt'] as const
/** The parameter order of `completeEffect`. */
export const COMPLETION_PARAMS = ['runId', 'callId', 'status', 'output', 'outputHash', 'completedAt'] as const
/** The parameter order of `putWrite`. */
export const WRITE_PARAMS = ['runId', 'checkpointId', 'taskId', 'idx', 'channel', 'taskPath', 'value', 'createdAt'] as const

/** The column of each field: its name in snake case (`runId` is `run_id`). */
export function columnsOf(fields: readonly string[]): string[] {
  return fields.map((field) => field.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`))
}

/** The columns of `fields` as a select names them: each aliased to its field. */
function selectOf(fields: readonly string[]): string {
  return columnsOf(fields).map((column, i) => (column === fields[i] ? column : `${column} AS "${fields[i]}"`)).join(', ')
}

export const RUN_COLUMNS = selectOf(RUN_PARAMS)
const HEADER_COLUMNS = selectOf(HEADER_PARAMS)
export const CHECKPOINT_COLUMNS = selectOf(CHECKPOINT_PARAMS)
/** What a commit reads of the run row it locks: its last seq, its lease and its digest. */
export const COMMIT_LOCK_COLUMNS = `last_seq AS "lastSeq", owner, lease_epoch AS epoch, cancel_requested AS "cancelRequested", digest`
const EFFECT_COLUMNS = selectOf(EFFECT_PARAMS)

/** The parameters of `row` in the order of `keys`. */
export function paramsOf<R, K extends keyof R>(row: R, keys: readonly K[]): unknown[] {
  return keys.map((key) => row[key] ?? null)
}

/** The run, checkpoint, effect and pending-write statements whose text depends only on the dialect. */
export type EngineSql = ReturnType<typeof engineSql>

/** {@link EngineSql} of a dialect. */
export function engineSql(d: SqlDialect) {
  const [runs, checkpoints, items, effects, writes, keyChecks] = ['runs', 'checkpoints', 'list_items', 'effects', 'pending_writes', 'key_checks'].map((name) => d.table(name)) as [string, string, string, string, string, string]
  // Ties on `started_at` keep insertion order, as the memory engine does.
  const effectOrder = `started_at, ${d.name === 'sqlite' ? 'rowid' : 'ord'}`
  const placeholders = (n: number) => Array.from({ length: n }, (_, i) => `$${i + 1}`).join(', ')
  return {
    insertRun: `INSERT INTO ${runs} (${columnsOf(RUN_PARAMS).join(', ')}) VALUES (${placeholders(RUN_PARAMS.length)}) ON CONFLICT (run_id) DO NOTHING`,
    getRun: `SELECT ${RUN_COLUMNS} FROM ${runs} WHERE run_id = $1`,
    deleteRun: `DELETE FROM ${runs} WHERE run_id = $1`,
    deleteRunRows: [checkpoints, items, effects, writes].map((table) => `DELETE FROM ${table} WHERE run_id = $1`),

    /**
     * Lock the run row for the rest of the transaction (writers of one run queue here) and read
     * its `last_seq` (after waiting, the newest committed version), its lease and its digest.
     */
    lockRunForCommit: `SELECT ${COMMIT_LOCK_COLUMNS} FROM ${runs} WHERE run_id = $1${d.forUpdate}`,
    /** Whether any checkpoint id of `$1` is taken. */
    anyCheckpointExists: `SELECT 1 AS taken FROM ${checkpoints} WHERE ${d.in('id', '$1')} LIMIT 1`,
    /** The lease a commit to another run (a child run) is fenced on, unchanged until the commit ends. */
    fenceOf: `SELECT owner, lease_epoch AS epoch, cancel_requested AS "cancelRequested" FROM ${runs} WHERE run_id = $1${d.forShare}`,
    runLastSeq: `SELECT last_seq AS "lastSeq" FROM ${runs} WHERE run_id = $1`,
    /** Items are numbered 0…n-1, so the length is one past the highest index (an index seek). */
    listLength: `SELECT coalesce(max(idx) + 1, 0) AS length FROM ${items} WHERE run_id = $1 AND list_id = $2`,
    insertItem: `INSERT INTO ${items} (run_id, list_id, idx, item) VALUES ($1, $2, $3, $4)`,
    /** A commit's run: its new `last_seq`, `updated_at` (at least `$3`) and progress digest (`seal`). */
    advanceRun: `UPDATE ${runs} SET last_seq = $2, updated_at = ${d.greatest}(updated_at, $3), seal = $4 WHERE run_id = $1`,
    insertCheckpoint: `INSERT INTO ${checkpoints} (${columnsOf(CHECKPOINT_PARAMS).join(', ')}) VALUES (${placeholders(CHECKPOINT_PARAMS.length)})`,

    getCheckpoints: `SELECT ${CHECKPOINT_COLUMNS} FROM ${checkpoints} WHERE ${d.in('id', '$1')}`,
    latestOfRun: `SELECT ${CHECKPOINT_COLUMNS} FROM ${checkpoints} WHERE run_id = $1 ORDER BY seq DESC LIMIT 1`,
    /** A run's newest checkpoints, newest first (what a resume reads). */
    recentOfRun: `SELECT ${CHECKPOINT_COLUMNS} FROM ${checkpoints} WHERE run_id = $1 ORDER BY seq DESC LIMIT $2`,
    latestOfWorkflow: `SELECT ${CHECKPOINT_COLUMNS} FROM ${checkpoints} WHERE workflow_name = $1
      ORDER BY created_at DESC, seq DESC, id DESC LIMIT 1`,
    readListRange: `SELECT item FROM ${items} WHERE run_id = $1 AND list_id = $2 AND idx >= $3 AND idx < $4 ORDER BY idx`,

    lockRun: `SELECT 1 FROM ${runs} WHERE run_id = $1${d.forUpdate}`,
    deleteCheckpoints: `DELETE FROM ${checkpoints} WHERE run_id = $1 AND ${d.in('id', '$2')}`,
    deleteCheckpointWrites: `DELETE FROM ${writes} WHERE run_id = $1 AND ${d.in('checkpoint_id', '$2')}`,
    /** Rows without lists are left out. */
    listRefsOfRun: `SELECT lists FROM ${checkpoints} WHERE run_id = $1 AND lists <> '[]'`,
    listIdsOfRun: `SELECT DISTINCT list_id AS "listId" FROM ${items} WHERE run_id = $1`,
    truncateList: `DELETE FROM ${items} WHERE run_id = $1 AND list_id = $2 AND idx >= $3`,

    /** An intent: a new row, or one more attempt on the stored one. */
    recordEffectIntent: `INSERT INTO ${effects} (${columnsOf(EFFECT_PARAMS).join(', ')}) VALUES (${placeholders(EFFECT_PARAMS.length)})
      ON CONFLICT (run_id, call_id) DO UPDATE SET attempts = effects.attempts + 1`,
    /** The first outcome wins: only an effect still `pending` or `started` takes one. */
    completeEffect: `UPDATE ${effects} SET status = $3, output = $4, output_hash = $5, completed_at = $6
      WHERE run_id = $1 AND call_id = $2 AND status IN ('pending', 'started')`,
    startEffect: `UPDATE ${effects} SET status = 'started' WHERE run_id = $1 AND call_id = $2 AND status = 'pending'`,
    /** Some effects of a run, in `listEffects` order. */
    getEffects: `SELECT ${EFFECT_COLUMNS} FROM ${effects} WHERE run_id = $1 AND ${d.in('call_id', '$2')} ORDER BY ${effectOrder}`,
    listEffects: `SELECT ${EFFECT_COLUMNS} FROM ${effects} WHERE run_id = $1 ORDER BY ${effectOrder}`,
    deleteEffects: `DELETE FROM ${effects} WHERE run_id = $1`,
    getKeyCheck: `SELECT value FROM ${keyChecks} WHERE key_id = $1`,
    putKeyCheck: `INSERT INTO ${keyChecks} (key_id, value) VALUES ($1, $2) ON CONFLICT (key_id) DO NOTHING`,
    rewriteCheckpoint: `UPDATE ${checkpoints} SET body = $1, lists = $2, digest = $3 WHERE id = $4 AND run_id = $5`,
    rewriteItem: `UPDATE ${items} SET item = $1 WHERE run_id = $2 AND list_id = $3 AND idx = $4`,
    rewriteEffect: `UPDATE ${effects} SET input_hash = $1, output = $2, output_hash = $3 WHERE run_id = $4 AND call_id = $5`,

    /** A regular write (idx >= 0) keeps the first value stored; a special one (idx < 0) the newest. */
    putWrite: `INSERT INTO ${writes} (${columnsOf(WRITE_PARAMS).join(', ')}) VALUES (${placeholders(WRITE_PARAMS.length)})
      ON CONFLICT (run_id, checkpoint_id, task_id, idx) DO UPDATE SET channel = excluded.channel, task_path = excluded.task_path,
        value = excluded.value, created_at = excluded.created_at
      WHERE excluded.idx < 0`,
    listWrites: `SELECT ${selectOf(WRITE_PARAMS)} FROM ${writes} WHERE run_id = $1 AND ${d.in('checkpoint_id', '$2')}`,
  }
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
export function updateRunSql(d: SqlDialect, runId: string, patch: RunPatch): SqlQuery {
  const values: unknown[] = [runId]
  const { sets, where } = patchSets(patch, values)
  return { text: `UPDATE ${d.table('runs')} SET ${sets.join(', ')} WHERE run_id = $1${where} RETURNING ${RUN_COLUMNS}`, values }
}

/** `listRuns`: newest first by (created_at, run_id). */
export function listRunsSql(d: SqlDialect, query: ListRunsQuery): SqlQuery {
  const values: unknown[] = []
  const param = (value: unknown) => `$${values.push(value)}`
  const filters: string[] = []
  if (query.status !== undefined) filters.push(d.in('status', param(d.list(typeof query.status === 'string' ? [query.status] : query.status))))
  if (query.workflowName !== undefined) filters.push(`workflow_name = ${param(query.workflowName)}`)
  if (query.threadId !== undefined) filters.push(`thread_id = ${param(query.threadId)}`)
  return listingSql(d, { ...query, table: 'runs', columns: RUN_COLUMNS, key: 'created_at, run_id', id: 'run_id', filters, values })
}

/**
 * `listCheckpoints`, headers only (or whole rows, `whole`): within one run newest seq first;
 * across runs by (created_at, seq, id) descending.
 */
export function listCheckpointsSql(d: SqlDialect, query: ListCheckpointsQuery, whole = false): SqlQuery {
  const values: unknown[] = []
  const param = (value: unknown) => `$${values.push(value)}`
  const filters: string[] = []
  if (query.runId !== undefined) filters.push(`run_id = ${param(query.runId)}`)
  if (query.workflowName !== undefined) filters.push(`workflow_name = ${param(query.workflowName)}`)
  const key = query.runId !== undefined ? 'seq' : 'created_at, seq, id'
  return listingSql(d, { ...query, table: 'checkpoints', columns: whole ? CHECKPOINT_COLUMNS : HEADER_COLUMNS, key, id: 'id', filters, values })
}

/**
 * Rows of `table` passing `filters` (their values already in `values`), newest first by the
 * columns of `key`, before the row `before` names, at most `limit`. The cursor row must itself
 * pass the filters, so an unknown or filtered-out cursor yields no rows.
 */
function listingSql(d: SqlDialect, list: { table: string; columns: string; key: string; id: string; filters: string[]; values: unknown[]; before?: string; limit?: number }): SqlQuery {
  const { key, filters, values } = list
  const table = d.table(list.table)
  const param = (value: unknown) => `$${values.push(value)}`
  const where = [...filters]
  if (list.before !== undefined) {
    const cursor = [`${list.id} = ${param(list.before)}`, ...filters].join(' AND ')
    where.push(`${key.includes(',') ? `(${key})` : key} < (SELECT ${key} FROM ${table} WHERE ${cursor})`)
  }
  const order = key.split(', ').map((column) => `${column} DESC`).join(', ')
  const limit = param(list.limit ?? d.noLimit)
  return { text: `SELECT ${list.columns} FROM ${table}${where.length === 0 ? '' : ` WHERE ${where.join(' AND ')}`} ORDER BY ${order} LIMIT ${limit}`, values }
}

/** A run row as selected, only its run fields (a lease query selects more), numbers made numbers (`bigint` arrives as text from `pg`). */
export function runRow(row: Record<string, unknown>): RunRow {
  const run = Object.fromEntries(RUN_PARAMS.map((key) => [key, row[key] ?? null])) as unknown as RunRow
  run.lastSeq = Number(row.lastSeq)
  run.createdAt = Number(row.createdAt)
  run.updatedAt = Number(row.updatedAt)
  return run
}

/**
 * A checkpoint row (or header) as selected, its numbers and flag fixed in place: the object is
 * the engine's own, and a run's history reads thousands of them. `terminal` is stored 0/1 on
 * SQLite; any other value is passed on for EngineStore to reject.
 */
export function checkpointRow(row: Record<string, unknown>): CheckpointRow {
  row.seq = Number(row.seq)
  row.schemaVersion = Number(row.schemaVersion)
  row.createdAt = Number(row.createdAt)
  const terminal = row.terminal
  row.terminal = terminal === 1 || terminal === true ? true : terminal === 0 || terminal === false ? false : terminal
  return row as unknown as CheckpointRow
}

/** An effect row as selected, its numbers fixed in place (as {@link checkpointRow}). */
export function effectRow(row: Record<string, unknown>): EffectRow {
  row.attempts = Number(row.attempts)
  row.startedAt = Number(row.startedAt)
  row.completedAt = row.completedAt === null ? null : Number(row.completedAt)
  return row as unknown as EffectRow
}

/** A pending write as selected, its numbers fixed in place. */
export function writeRow(row: Record<string, unknown>): PendingWriteRow {
  row.idx = Number(row.idx)
  row.createdAt = Number(row.createdAt)
  return row as unknown as PendingWriteRow
}
