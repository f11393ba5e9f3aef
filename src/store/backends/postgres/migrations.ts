import { knownVersions } from '../../sql/sql-driver.js'
import { inTransaction, type PostgresPool, type PostgresQueryable } from './driver.js'
import { assertSchemaName, quoteIdent } from './sql.js'

/** One step of the Postgres schema. Versions start at 1 and increase by one. */
export interface PostgresMigration {
  version: number
  name: string
  /** The statements of the step, run in order inside the migration transaction; `s` is the quoted schema. */
  statements: (s: string) => readonly string[]
}

/**
 * The Postgres schema, oldest step first. Never edit a released step: append a new one, and a
 * fixture of the format it replaces (`test/fixtures/`), read by a test after the migration.
 *
 * Version 1 is the one format Cairn writes: every column holds its value as the engine row
 * carries it, nothing encoded in a form of its own.
 * - Ids are `COLLATE "C"`: byte order, the order the other engines sort ids in, whatever the
 *   database's collation (and cheaper to compare).
 * - Times the engine rows carry as Unix milliseconds are `double precision` (a JavaScript number,
 *   exactly); seqs are `bigint`.
 * - `runs` also carries the columns of the worker layer, which fences every write of a run on
 *   them: `owner` (the worker holding the lease), `lease_expires_at`, `lease_epoch` (raised on
 *   every claim), `queue`, `priority`, `recoveries` (executions that ended without finishing the
 *   run) and `cancel_requested`; the partial index holds only claimable runs, in claim order.
 *   `seal` is a keyed store's signature of the run's progress, `digest` a digest of its fields.
 * - The listing across runs, newest first by (created_at, seq, id), walks an index of
 *   created_at alone (ties, rare, are sorted as they come: an incremental sort).
 * - `pending_writes`: what the tasks of a graph step wrote for a checkpoint before its next one;
 *   `key_checks`: per signing key id, an HMAC of a fixed label under the key, so that a wrong
 *   secret is told apart from a record that was tampered with.
 * - Large bodies and items are TOASTed (compressed, out of line) by Postgres itself.
 *
 * Version 2 adds the tables of the run event log (`run_events`: one row per append, its body the
 * JSON array of the appended events) and of time (`cairn_timers`, `cairn_events`, `cairn_waits`,
 * `cairn_schedules`).
 */
export const POSTGRES_MIGRATIONS: readonly PostgresMigration[] = [
  {
    version: 1,
    name: 'runs, checkpoints, list items, effects, pending writes and key checks',
    statements: (s) => [
      `CREATE TABLE ${s}.runs (
        run_id text COLLATE "C" NOT NULL,
        status text NOT NULL,
        name text,
        thread_id text,
        workflow_name text,
        config_signature text,
        last_seq bigint NOT NULL,
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL,
        metadata text NOT NULL,
        seal text,
        digest text,
        owner text,
        lease_expires_at timestamptz,
        lease_epoch bigint NOT NULL DEFAULT 0,
        queue text,
        priority integer,
        recoveries integer NOT NULL DEFAULT 0,
        cancel_requested boolean NOT NULL DEFAULT false,
        CONSTRAINT runs_pkey PRIMARY KEY (run_id)
      )`,
      `CREATE INDEX runs_created_at ON ${s}.runs (created_at, run_id)`,
      `CREATE INDEX runs_status ON ${s}.runs (status, created_at, run_id)`,
      `CREATE INDEX runs_workflow ON ${s}.runs (workflow_name, created_at, run_id) WHERE workflow_name IS NOT NULL`,
      `CREATE INDEX runs_thread ON ${s}.runs (thread_id, created_at, run_id) WHERE thread_id IS NOT NULL`,
      `CREATE INDEX runs_claim ON ${s}.runs (priority DESC, created_at, run_id) WHERE queue IS NOT NULL AND status IN ('queued', 'running')`,

      `CREATE TABLE ${s}.checkpoints (
        id text COLLATE "C" NOT NULL,
        run_id text COLLATE "C" NOT NULL,
        parent_id text COLLATE "C",
        seq bigint NOT NULL,
        kind text NOT NULL,
        phase text NOT NULL,
        schema_version bigint NOT NULL,
        created_at double precision NOT NULL,
        workflow_name text,
        terminal boolean NOT NULL,
        metadata text NOT NULL,
        body text NOT NULL,
        lists text NOT NULL,
        digest text NOT NULL,
        CONSTRAINT checkpoints_pkey PRIMARY KEY (id),
        CONSTRAINT checkpoints_run_seq UNIQUE (run_id, seq)
      )`,
      `CREATE INDEX checkpoints_workflow ON ${s}.checkpoints (workflow_name, created_at, seq, id) WHERE workflow_name IS NOT NULL`,
      `CREATE INDEX checkpoints_created_at ON ${s}.checkpoints (created_at)`,

      `CREATE TABLE ${s}.list_items (
        run_id text COLLATE "C" NOT NULL,
        list_id text COLLATE "C" NOT NULL,
        idx integer NOT NULL,
        item text NOT NULL,
        CONSTRAINT list_items_pkey PRIMARY KEY (run_id, list_id, idx)
      )`,

      `CREATE TABLE ${s}.effects (
        run_id text COLLATE "C" NOT NULL,
        call_id text COLLATE "C" NOT NULL,
        name text NOT NULL,
        input_hash text NOT NULL,
        idempotency_key text NOT NULL,
        status text NOT NULL,
        output text,
        output_hash text,
        attempts integer NOT NULL,
        started_at double precision NOT NULL,
        completed_at double precision,
        ord bigint GENERATED ALWAYS AS IDENTITY,
        CONSTRAINT effects_pkey PRIMARY KEY (run_id, call_id)
      )`,

      `CREATE TABLE ${s}.pending_writes (
        run_id text COLLATE "C" NOT NULL,
        checkpoint_id text COLLATE "C" NOT NULL,
        task_id text COLLATE "C" NOT NULL,
        idx integer NOT NULL,
        channel text NOT NULL,
        task_path text NOT NULL,
        value text NOT NULL,
        created_at double precision NOT NULL,
        CONSTRAINT pending_writes_pkey PRIMARY KEY (run_id, checkpoint_id, task_id, idx)
      )`,

      `CREATE TABLE ${s}.key_checks (key_id text NOT NULL PRIMARY KEY, value text NOT NULL)`,
    ],
  },
  {
    version: 2,
    name: 'run events, timers, external events, waits and schedules',
    // `IF NOT EXISTS`: a schema written before this step has the tables its event log and time
    // tables made on first use, with these same definitions.
    statements: (s) => [
      `CREATE TABLE IF NOT EXISTS ${s}.run_events (run_id text NOT NULL, seq bigint NOT NULL, body text NOT NULL, PRIMARY KEY (run_id, seq))`,
      `CREATE TABLE IF NOT EXISTS ${s}.cairn_timers (run_id text PRIMARY KEY, wake_at bigint NOT NULL)`,
      `CREATE INDEX IF NOT EXISTS cairn_timers_wake ON ${s}.cairn_timers (wake_at)`,
      `CREATE TABLE IF NOT EXISTS ${s}.cairn_events (
        event_id text PRIMARY KEY,
        name text NOT NULL,
        match text NOT NULL,
        payload text NOT NULL,
        sent_at bigint NOT NULL,
        taken_by text
      )`,
      `CREATE INDEX IF NOT EXISTS cairn_events_free ON ${s}.cairn_events (name, match, sent_at) WHERE taken_by IS NULL`,
      `CREATE INDEX IF NOT EXISTS cairn_events_taken ON ${s}.cairn_events (taken_by) WHERE taken_by IS NOT NULL`,
      `CREATE TABLE IF NOT EXISTS ${s}.cairn_waits (run_id text NOT NULL, wait_id text NOT NULL, name text NOT NULL, match text NOT NULL, PRIMARY KEY (run_id, wait_id))`,
      `CREATE TABLE IF NOT EXISTS ${s}.cairn_schedules (id text PRIMARY KEY, body text NOT NULL, paused boolean NOT NULL, last_tick bigint NOT NULL, created_at bigint NOT NULL)`,
    ],
  },
]

/**
 * Bring `schema` up to date and return the versions applied now (empty when it already was).
 * Pending steps run in one transaction under a transaction-scoped advisory lock keyed on the
 * schema name, so processes starting at the same time migrate it exactly once: the first applies
 * the steps, the others wait for its commit and find nothing left to do. Creates the schema when
 * it does not exist. A schema migrated by a newer Cairn is refused with a {@link SchemaVersionError}.
 */
export async function migratePostgres(pool: PostgresPool, schema: string, migrations: readonly PostgresMigration[] = POSTGRES_MIGRATIONS): Promise<number[]> {
  assertSchemaName(schema)
  const latest = migrations.reduce((max, step) => Math.max(max, step.version), 0)
  // Fast path without the lock: a schema already at the latest version.
  if ((await appliedVersions(pool, schema, latest)).at(-1) === latest) return []
  return inTransaction(pool, (client) => migrateLocked(client, schema, migrations, latest))
}

async function migrateLocked(client: PostgresQueryable, schema: string, migrations: readonly PostgresMigration[], latest: number): Promise<number[]> {
  const s = quoteIdent(schema)
  await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`cairn.migrate:${schema}`])
  // Checked before CREATE SCHEMA: a role without CREATE on the database may use an existing schema.
  const exists = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])
  if (exists.rows.length === 0) await client.query(`CREATE SCHEMA ${s}`)
  await client.query(`CREATE TABLE IF NOT EXISTS ${s}.cairn_migrations (
    version integer NOT NULL PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
  )`)
  const applied = new Set(await appliedVersions(client, schema, latest))
  const done: number[] = []
  for (const step of [...migrations].sort((a, b) => a.version - b.version)) {
    if (applied.has(step.version)) continue
    for (const statement of step.statements(s)) await client.query(statement)
    await client.query(`INSERT INTO ${s}.cairn_migrations (version, name) VALUES ($1, $2)`, [step.version, step.name])
    done.push(step.version)
  }
  return done
}

/** The versions recorded in the schema's `cairn_migrations`, ascending; throws if one is newer than known. */
async function appliedVersions(db: PostgresQueryable, schema: string, latest: number): Promise<number[]> {
  const table = `${quoteIdent(schema)}.cairn_migrations`
  const found = await db.query('SELECT to_regclass($1) IS NOT NULL AS "exists"', [table])
  if (found.rows[0]?.exists !== true) return []
  const versions = (await db.query(`SELECT version FROM ${table} ORDER BY version`)).rows.map((row) => Number(row.version))
  return knownVersions(versions, latest, 'postgres schema', `the Postgres schema "${schema}"`)
}
