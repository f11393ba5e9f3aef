import { InvalidArgumentError } from '../../../core/errors.js'
import type { SqlDialect } from '../../sql/sql-driver.js'
import type { ListItem, SqlBatches } from '../../sql/sql-commit.js'
import {
  CHECKPOINT_COLUMNS,
  COMMIT_LOCK_COLUMNS,
  CHECKPOINT_PARAMS,
  COMPLETION_PARAMS,
  EFFECT_PARAMS,
  RUN_COLUMNS,
  WRITE_PARAMS,
  columnsOf,
  engineSql,
} from '../../sql/engine-sql.js'

/**
 * What the Postgres engine says in its own SQL: the dialect, and the statements no other backend
 * has (a resume's read in one statement, and rows written as one array per column). Every table
 * is qualified with the store's schema (validated by {@link assertSchemaName}, then quoted).
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

/** How Postgres spells what differs between the SQL dialects the store runs on, for tables in `schema` (validated). */
export function postgresDialect(schema: string): SqlDialect {
  const s = quoteIdent(schema)
  return {
    name: 'postgres',
    label: 'Postgres',
    table: (name) => `${s}.${name}`,
    int: 'bigint',
    bool: 'boolean',
    keyed: '',
    isUniqueViolation: (err) => (err as { code?: unknown } | null)?.code === '23505',
    constraintOf(err) {
      const { code, constraint } = (err ?? {}) as { code?: unknown; constraint?: unknown }
      return code === '23505' && typeof constraint === 'string' ? constraint : undefined
    },
    in: (column, param) => `${column} = ANY(${param}::text[])`,
    list: (values) => [...values],
    forUpdate: ' FOR UPDATE',
    forShare: ' FOR SHARE',
    greatest: 'greatest',
    noLimit: null,
  }
}

/** The Postgres type of each checkpoint column, in {@link CHECKPOINT_PARAMS} order. */
const CHECKPOINT_TYPES = ['text', 'text', 'text', 'bigint', 'text', 'text', 'bigint', 'double precision', 'text', 'boolean', 'text', 'text', 'text', 'text']

/** The statements of {@link postgresStatements}. */
export type PostgresStatements = ReturnType<typeof postgresStatements>

/** The engine's statements on tables in `schema` (already validated), with those only Postgres has. */
export function postgresStatements(schema: string) {
  const s = quoteIdent(schema)
  const runJson = `(SELECT row_to_json(r)::text FROM (SELECT ${RUN_COLUMNS} FROM ${s}.runs WHERE run_id = $1) r)`
  return {
    ...engineSql(postgresDialect(schema)),
    /**
     * What a resume reads, in one statement (one round trip, one snapshot), as rows of
     * `(part, list_id, idx, item)`: part 0 the run (JSON text of the columns above, null when
     * there is none), part 1 its `$2` newest checkpoints (newest first, one JSON array), and
     * part 2 one row per item the checkpoints refer to: of each list they name, the first `n`
     * items (the largest `n` a ref gives it), and the whole of the run's log (`$3`). The items
     * come as the stored text, unaggregated: building them into one JSON value would cost the
     * server more than reading them. A checkpoint whose `lists` is not JSON fails the statement
     * (SQLSTATE class 22); the engine then reads without it.
     */
    loadRun: `WITH recent AS (SELECT ${CHECKPOINT_COLUMNS} FROM ${s}.checkpoints WHERE run_id = $1 ORDER BY seq DESC LIMIT $2),
      wanted AS (SELECT id, max(n) AS n FROM (
          SELECT ref->>'id' AS id, (ref->>'n')::numeric AS n FROM recent c, json_array_elements(c.lists::json) AS ref
          UNION ALL SELECT $3::text, 9007199254740991) w
        WHERE id IS NOT NULL GROUP BY id)
      SELECT 0 AS part, NULL::text AS list_id, NULL::bigint AS idx, ${runJson} AS item
      UNION ALL SELECT 1, NULL, NULL, (SELECT coalesce(json_agg(c ORDER BY c.seq DESC)::text, '[]') FROM recent c)
      UNION ALL SELECT 2, i.list_id, i.idx, i.item FROM wanted w JOIN ${s}.list_items i ON i.run_id = $1 AND i.list_id = w.id AND i.idx < w.n`,
    /**
     * The run's row locked for a commit (the columns of `lockRunForCommit`) with `lengths`, the
     * length of each list in `$2` as JSON `[[listId, length], …]`: one past its highest index, one
     * index seek per list. One round trip for both. The lengths are read in the statement's
     * snapshot, which may predate a commit this lock waited for; a commit that knows of that one's
     * items was sent after it, so reads them, and one that does not appends where they are and
     * fails on the items' key (`list_conflict`), as it would have anyway.
     */
    lockRunAndLists: `SELECT ${COMMIT_LOCK_COLUMNS},
        (SELECT coalesce(json_agg(json_build_array(l.list_id,
            coalesce((SELECT i.idx + 1 FROM ${s}.list_items i WHERE i.run_id = $1 AND i.list_id = l.list_id ORDER BY i.idx DESC LIMIT 1), 0)))::text, '[]')
          FROM unnest($2::text[]) AS l(list_id)) AS lengths
      FROM ${s}.runs WHERE run_id = $1 FOR UPDATE`,
    /** `loadRun` without the lists (read apart when a checkpoint's `lists` is not JSON). */
    loadRunRows: `SELECT ${runJson} AS run, (SELECT coalesce(json_agg(c)::text, '[]')
      FROM (SELECT ${CHECKPOINT_COLUMNS} FROM ${s}.checkpoints WHERE run_id = $1 ORDER BY seq DESC LIMIT $2) c) AS checkpoints`,
    /**
     * Every range's items in one statement (one snapshot): `ref` is the range's 1-based position.
     * In no particular order: the engine puts each item at its `idx` (a sort here would copy every
     * item once more on the server).
     */
    readLists: `SELECT r.ref AS ref, i.idx AS idx, i.item FROM unnest($2::text[], $3::bigint[], $4::bigint[]) WITH ORDINALITY AS r(list_id, first, n, ref)
      JOIN ${s}.list_items i ON i.run_id = $1 AND i.list_id = r.list_id AND i.idx >= r.first AND i.idx < r.n`,
  }
}

/** Postgres' {@link SqlBatches}: a commit's rows of one kind in one statement, one array per column. */
export function postgresBatches(schema: string): SqlBatches {
  const s = quoteIdent(schema)
  const { lockRunAndLists } = postgresStatements(schema)
  const columns = <R, K extends keyof R>(rows: readonly R[], keys: readonly K[]) => keys.map((key) => rows.map((row) => row[key] ?? null))
  const itemColumns = (items: readonly ListItem[]) => [0, 1, 2].map((k) => items.map((item) => item[k]))
  // The items of a commit: its run's id is $1, their columns the arrays from `$n` on.
  const insertItemsAt = (n: number) => `INSERT INTO ${s}.list_items (run_id, list_id, idx, item)
    SELECT $1, l.list_id, l.idx, l.item FROM unnest($${n}::text[], $${n + 1}::int[], $${n + 2}::text[]) AS l(list_id, idx, item)`
  // The commit's list items, its run's advance and its checkpoints in one statement (one round
  // trip). The items are the main statement, run first: an index taken by another writer is the
  // conflict reported, as when they went in on their own before the checkpoints.
  const finishCommit = `WITH run AS (
      UPDATE ${s}.runs SET last_seq = $2, updated_at = greatest(updated_at, $3), seal = $4 WHERE run_id = $1
    ), saved AS (
      INSERT INTO ${s}.checkpoints (${columnsOf(CHECKPOINT_PARAMS).join(', ')})
      SELECT * FROM unnest(${CHECKPOINT_TYPES.map((type, i) => `$${i + 5}::${type}[]`).join(', ')})
    )
    ${insertItemsAt(CHECKPOINT_TYPES.length + 5)}`
  const insertItems = insertItemsAt(2)
  // Inserted in array order, so ties on started_at keep it (`ord`).
  const effectColumns = columnsOf(EFFECT_PARAMS).join(', ')
  const recordEffectIntents = `INSERT INTO ${s}.effects (${effectColumns})
    SELECT ${effectColumns}
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::integer[], $10::double precision[], $11::double precision[])
      WITH ORDINALITY AS e(${effectColumns}, n)
    ORDER BY e.n
    ON CONFLICT (run_id, call_id) DO UPDATE SET attempts = effects.attempts + 1`
  const completeEffects = `UPDATE ${s}.effects e SET status = c.status, output = c.output, output_hash = c.output_hash, completed_at = c.completed_at
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::double precision[]) AS c(run_id, call_id, status, output, output_hash, completed_at)
    WHERE e.run_id = c.run_id AND e.call_id = c.call_id AND e.status IN ('pending', 'started')`
  const putWrites = `INSERT INTO ${s}.pending_writes (run_id, checkpoint_id, task_id, idx, channel, task_path, value, created_at)
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::text[], $6::text[], $7::text[], $8::double precision[])
    ON CONFLICT (run_id, checkpoint_id, task_id, idx) DO UPDATE SET channel = excluded.channel, task_path = excluded.task_path,
      value = excluded.value, created_at = excluded.created_at
    WHERE excluded.idx < 0`
  const truncateLists = `DELETE FROM ${s}.list_items i WHERE i.run_id = $1
    AND i.idx >= coalesce((SELECT k.n FROM unnest($2::text[], $3::bigint[]) AS k(list_id, n) WHERE k.list_id = i.list_id), 0)`
  return {
    lockRun: (runId, listIds) => ({ text: lockRunAndLists, values: [runId, listIds] }),
    insertItems: (runId, items) => ({ text: insertItems, values: [runId, ...itemColumns(items)] }),
    finishCommit: (run, rows, items) => ({ text: finishCommit, values: [run.runId, run.seq, run.updatedAt, run.seal, ...columns(rows, CHECKPOINT_PARAMS), ...itemColumns(items)] }),
    recordEffectIntents: (intents) => ({ text: recordEffectIntents, values: columns(intents, EFFECT_PARAMS) }),
    completeEffects: (completions) => ({ text: completeEffects, values: columns(completions, COMPLETION_PARAMS) }),
    putWrites: (rows) => ({ text: putWrites, values: columns(rows, WRITE_PARAMS) }),
    truncateLists: (runId, keep) => ({ text: truncateLists, values: [runId, [...keep.keys()], [...keep.values()]] }),
  }
}
