import { knownVersions } from '../../sql/sql-driver.js'
import type { SqliteDatabase } from './driver.js'

/** One step of the SQLite schema. Versions start at 1 and increase by one. */
export interface SqliteMigration {
  version: number
  name: string
  /** DDL run inside the migration transaction. */
  sql: string
}

/**
 * The SQLite schema, oldest step first. Never edit a released step: append a new one, and a
 * fixture of the format it replaces (`test/fixtures/`), read by a test after the migration.
 *
 * Version 1 is the one format Cairn writes: every column holds its value as the engine row
 * carries it (text, integers, `terminal` as 0/1), nothing encoded in a form of its own.
 * `list_items` is a rowid table rather than `WITHOUT ROWID`: a `WITHOUT ROWID` (index b-tree)
 * page keeps only about a quarter of a page inline, so a 1-5 KB message would spill into an
 * overflow page of its own (2-4x its size on disk); a rowid table keeps items up to nearly a
 * whole page inline.
 *
 * - `runs` carries the worker layer's lease columns too: `owner`, `lease_expires_at` (Unix ms),
 *   `lease_epoch` (raised on every claim; every fenced write checks it), `queue` (null: never
 *   enqueued, never claimed), `priority`, `recoveries` and `cancel_requested`; the partial index
 *   holds only claimable runs, in claim order. `seal` is a keyed store's signature of the run's
 *   progress (null without keys), `digest` a digest of the row's fields.
 * - `pending_writes`: what the tasks of a graph step wrote for a checkpoint before its next one.
 * - `key_checks`: per signing key id, an HMAC of a fixed label under the key, so that a wrong
 *   secret given for a key id is told apart from a record that was tampered with.
 *
 * Version 2 adds the tables of the run event log (`run_events`: one row per append, its body the
 * deflated JSON array of the appended events) and of time (`cairn_timers`, `cairn_events`,
 * `cairn_waits`, `cairn_schedules`).
 */
export const SQLITE_MIGRATIONS: readonly SqliteMigration[] = [
  {
    version: 1,
    name: 'runs, checkpoints, list items, effects, pending writes and key checks',
    sql: `
      CREATE TABLE runs (
        run_id TEXT NOT NULL PRIMARY KEY,
        status TEXT NOT NULL,
        name TEXT,
        thread_id TEXT,
        workflow_name TEXT,
        config_signature TEXT,
        last_seq INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        metadata TEXT NOT NULL,
        seal TEXT,
        digest TEXT,
        queue TEXT,
        priority INTEGER NOT NULL DEFAULT 0,
        owner TEXT,
        lease_expires_at INTEGER,
        lease_epoch INTEGER NOT NULL DEFAULT 0,
        recoveries INTEGER NOT NULL DEFAULT 0,
        cancel_requested INTEGER NOT NULL DEFAULT 0
      ) WITHOUT ROWID;
      CREATE INDEX runs_created_at ON runs (created_at);
      CREATE INDEX runs_claim ON runs (priority DESC, created_at, run_id) WHERE queue IS NOT NULL AND status IN ('queued', 'running');

      CREATE TABLE checkpoints (
        id TEXT NOT NULL PRIMARY KEY,
        run_id TEXT NOT NULL,
        parent_id TEXT,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        phase TEXT NOT NULL,
        schema_version INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        workflow_name TEXT,
        terminal INTEGER NOT NULL,
        metadata TEXT NOT NULL,
        body TEXT NOT NULL,
        lists TEXT NOT NULL,
        digest TEXT NOT NULL
      );
      CREATE UNIQUE INDEX checkpoints_run_seq ON checkpoints (run_id, seq);
      CREATE INDEX checkpoints_workflow ON checkpoints (workflow_name, created_at, seq) WHERE workflow_name IS NOT NULL;

      CREATE TABLE list_items (
        run_id TEXT NOT NULL,
        list_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        item TEXT NOT NULL,
        PRIMARY KEY (run_id, list_id, idx)
      );

      CREATE TABLE effects (
        run_id TEXT NOT NULL,
        call_id TEXT NOT NULL,
        name TEXT NOT NULL,
        input_hash TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        status TEXT NOT NULL,
        output TEXT,
        output_hash TEXT,
        attempts INTEGER NOT NULL,
        started_at INTEGER NOT NULL,
        completed_at INTEGER,
        PRIMARY KEY (run_id, call_id)
      );

      CREATE TABLE pending_writes (
        run_id TEXT NOT NULL,
        checkpoint_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        channel TEXT NOT NULL,
        task_path TEXT NOT NULL,
        value TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (run_id, checkpoint_id, task_id, idx)
      );

      CREATE TABLE key_checks (key_id TEXT NOT NULL PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
    `,
  },
  {
    version: 2,
    name: 'run events, timers, external events, waits and schedules',
    // `IF NOT EXISTS`: a database written before this step has the tables its event log and
    // time tables made on first use, with these same definitions.
    sql: `
      CREATE TABLE IF NOT EXISTS run_events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body BLOB NOT NULL,
        PRIMARY KEY (run_id, seq)
      ) WITHOUT ROWID;

      CREATE TABLE IF NOT EXISTS cairn_timers (run_id TEXT PRIMARY KEY, wake_at INTEGER NOT NULL) WITHOUT ROWID;
      CREATE INDEX IF NOT EXISTS cairn_timers_wake ON cairn_timers (wake_at);

      CREATE TABLE IF NOT EXISTS cairn_events (
        event_id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        match TEXT NOT NULL,
        payload TEXT NOT NULL,
        sent_at INTEGER NOT NULL,
        taken_by TEXT
      );
      CREATE INDEX IF NOT EXISTS cairn_events_free ON cairn_events (name, match, sent_at) WHERE taken_by IS NULL;
      CREATE INDEX IF NOT EXISTS cairn_events_taken ON cairn_events (taken_by) WHERE taken_by IS NOT NULL;

      CREATE TABLE IF NOT EXISTS cairn_waits (
        run_id TEXT NOT NULL,
        wait_id TEXT NOT NULL,
        name TEXT NOT NULL,
        match TEXT NOT NULL,
        PRIMARY KEY (run_id, wait_id)
      ) WITHOUT ROWID;

      CREATE TABLE IF NOT EXISTS cairn_schedules (
        id TEXT PRIMARY KEY,
        body TEXT NOT NULL,
        paused INTEGER NOT NULL,
        last_tick INTEGER NOT NULL,
        created_at INTEGER NOT NULL
      ) WITHOUT ROWID;
    `,
  },
]

const CREATE_MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS cairn_migrations (
  version INTEGER NOT NULL PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at INTEGER NOT NULL
)`

/**
 * Bring the database's schema up to date and return the versions applied now (empty when it
 * already was). All pending steps run in one `BEGIN IMMEDIATE` transaction, which takes the
 * write lock before reading what is applied, so processes opening a new file at the same time
 * migrate it exactly once. A database migrated by a newer Cairn is refused with a
 * {@link SchemaVersionError}.
 */
export function migrateSqlite(db: SqliteDatabase, migrations: readonly SqliteMigration[] = SQLITE_MIGRATIONS): number[] {
  const latest = migrations.reduce((max, step) => Math.max(max, step.version), 0)
  // Fast path without the write lock: a database already at the latest version.
  if (appliedVersions(db, latest).at(-1) === latest) return []
  return db
    .transaction(() => {
      db.exec(CREATE_MIGRATIONS_TABLE)
      const applied = new Set(appliedVersions(db, latest))
      const insert = db.prepare('INSERT INTO cairn_migrations (version, name, applied_at) VALUES (?, ?, ?)')
      const done: number[] = []
      for (const step of [...migrations].sort((a, b) => a.version - b.version)) {
        if (applied.has(step.version)) continue
        db.exec(step.sql)
        insert.run(step.version, step.name, Date.now())
        done.push(step.version)
      }
      return done
    })
    .immediate()
}

/** The versions recorded in `cairn_migrations`, ascending; throws if one is newer than known. */
function appliedVersions(db: SqliteDatabase, latest: number): number[] {
  const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cairn_migrations'").get()
  if (exists === undefined) return []
  const versions = db.prepare('SELECT version FROM cairn_migrations ORDER BY version').pluck().all() as number[]
  return knownVersions(versions, latest, 'sqlite database', 'the SQLite database')
}
