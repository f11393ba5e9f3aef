/**
 * What the parts of the store kept in SQL tables beside the engine's (the event log and the
 * time tables) run on: one small driver interface that SQLite and Postgres both
 * implement, so each part is written once. Statements name their parameters `$1`, `$2`, … —
 * Postgres's positional parameters, which SQLite reads as named ones.
 *
 * Work of several statements is a generator that yields each statement and receives its result:
 * SQLite's driver runs it synchronously (better-sqlite3 is synchronous, and a transaction must not
 * yield to other work on its connection), Postgres's awaits each statement.
 */
import { SchemaVersionError } from '../../core/errors.js'

/** A statement and its values. */
export interface SqlQuery {
  text: string
  values: unknown[]
}

/** What a statement returned: its rows (none for a write without `RETURNING`) and how many rows it changed. */
export interface SqlResult {
  rows: Record<string, unknown>[]
  changes: number
}

/** Work of several statements: yields each one, receives its result, returns what the work returns. */
export type SqlWork<T> = Generator<SqlQuery, T, SqlResult>

/** How one database spells what differs between SQLite and Postgres. */
export interface SqlDialect {
  readonly name: 'sqlite' | 'postgres'
  /** `SQLite` or `Postgres`, for messages. */
  readonly label: string
  /** A table's name as statements spell it: qualified with the store's schema on Postgres. */
  table(name: string): string
  /** Column types: a 64-bit integer, a boolean. */
  readonly int: string
  readonly bool: string
  /** What ends a `CREATE TABLE` of a table whose primary key is its only lookup (SQLite: `WITHOUT ROWID`). */
  readonly keyed: string
  /** Whether `err` is a unique or primary key violation. */
  isUniqueViolation(err: unknown): boolean
  /**
   * The engine's constraint a unique violation broke (`checkpoints_pkey`, `checkpoints_run_seq`,
   * `list_items_pkey`), if `err` is one.
   */
  constraintOf(err: unknown): string | undefined
  /** `column` is one of a list parameter's values (a list bound with {@link list}). */
  in(column: string, param: string): string
  /** A list as a statement's parameter: JSON text on SQLite, an array on Postgres. */
  list(values: readonly unknown[]): unknown
  /** What ends a read of a row the transaction writes next: Postgres locks it; SQLite's transaction holds the write lock already. */
  readonly forUpdate: string
  /** What ends a read of a row that must not change until the transaction ends. */
  readonly forShare: string
  /** The larger of two values (`max` on SQLite, `greatest` on Postgres). */
  readonly greatest: string
  /** The `LIMIT` of no limit. */
  readonly noLimit: number | null
}

/** How a piece of work runs. */
export interface SqlRunOptions {
  /** Every statement in one transaction (on SQLite, `BEGIN IMMEDIATE`: the write lock up front). */
  atomic?: boolean
  /**
   * SQLite: leave the connection's `synchronous` level as the last commit set it, so the work
   * goes with the durability of the commits around it. Otherwise it commits with the
   * connection's own level.
   */
  keepLevel?: boolean
  /** Work of reads only, which must all see one snapshot of the database. */
  snapshot?: boolean
  /** SQLite: commit without waiting for the disk (`synchronous = NORMAL`, see `SynchronousLevel`). */
  relaxed?: boolean
}

/** {@link SqlRunOptions} of atomic work that rolls back unless `keep` approves what it returns. */
export interface SqlWorkOptions<T> extends SqlRunOptions {
  keep?: (result: T) => boolean
}

/** A database the SQL parts of the store run on (see the module comment). */
export interface SqlDriver {
  readonly dialect: SqlDialect
  /** One statement, atomic by itself. */
  query(text: string, values?: unknown[], options?: SqlRunOptions): Promise<SqlResult>
  /** Work of several statements. */
  run<T>(work: () => SqlWork<T>, options?: SqlWorkOptions<T>): Promise<T>
}

/** A statement of a piece of work: `const { rows } = yield sql('SELECT … WHERE id = $1', id)`. */
export function sql(text: string, ...values: unknown[]): SqlQuery {
  return { text, values }
}

/**
 * The versions a database records as applied, ascending, unless one is newer than `latest`: a
 * database migrated by a newer Cairn, refused with a {@link SchemaVersionError}.
 */
export function knownVersions(versions: number[], latest: number, kind: 'sqlite database' | 'postgres schema', what: string): number[] {
  const newest = versions.at(-1) ?? 0
  if (newest <= latest) return versions
  throw new SchemaVersionError({
    kind,
    found: newest,
    supported: latest,
    message: `${what} was migrated to schema version ${newest} by a newer Cairn; this version knows up to ${latest}: upgrade Cairn to open it`,
  })
}

/** Work of one statement, returning its result. */
export function* single(query: SqlQuery): SqlWork<SqlResult> {
  return yield query
}

/** Work of several statements whose results are not read. */
export function* each(queries: readonly SqlQuery[]): SqlWork<void> {
  for (const query of queries) yield query
}

/** Run `work` to its end, each statement through `execute` (synchronous), its failures thrown into the work. */
export function runWorkSync<T>(work: SqlWork<T>, execute: (query: SqlQuery) => SqlResult): T {
  let step = work.next()
  while (!step.done) {
    let result: SqlResult
    try {
      result = execute(step.value)
    } catch (err) {
      step = work.throw(err)
      continue
    }
    step = work.next(result)
  }
  return step.value
}

/** {@link runWorkSync} for a driver whose statements are asynchronous. */
export async function runWork<T>(work: SqlWork<T>, execute: (query: SqlQuery) => Promise<SqlResult>): Promise<T> {
  let step = work.next()
  while (!step.done) {
    let result: SqlResult
    try {
      result = await execute(step.value)
    } catch (err) {
      step = work.throw(err)
      continue
    }
    step = work.next(result)
  }
  return step.value
}
