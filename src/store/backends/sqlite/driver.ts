import { InvalidArgumentError } from '../../../core/errors.js'
import { runWorkSync, type SqlDialect, type SqlDriver, type SqlQuery, type SqlResult, type SqlRunOptions, type SqlWork, type SqlWorkOptions } from '../../sql/sql-driver.js'

/** The slice of a better-sqlite3 `Database` the engine uses, so Cairn does not depend on the driver's types. */
export interface SqliteDatabase {
  /** The database file's path (better-sqlite3's `name`): `:memory:` or empty for one without a file. */
  readonly name?: string
  /** False once closed (better-sqlite3's `open`). */
  readonly open?: boolean
  /** True inside a transaction (better-sqlite3's `inTransaction`). */
  readonly inTransaction?: boolean
  prepare(source: string): SqliteStatement
  exec(source: string): unknown
  pragma(source: string, options?: { simple?: boolean }): unknown
  transaction<A extends unknown[], R>(fn: (...args: A) => R): SqliteTransaction<A, R>
  close(): unknown
}

/** The slice of a better-sqlite3 `Statement` the engine uses. */
export interface SqliteStatement {
  /** True when the statement returns rows (better-sqlite3's `reader`). */
  readonly reader?: boolean
  /** True when the statement does not write (better-sqlite3's `readonly`). */
  readonly readonly?: boolean
  run(...params: unknown[]): { changes: number }
  get(...params: unknown[]): unknown
  all(...params: unknown[]): unknown[]
  raw(toggle?: boolean): SqliteStatement
  pluck(toggle?: boolean): SqliteStatement
  /** The result's columns (better-sqlite3's `columns()`), of a statement that returns rows. */
  columns(): { name: string }[]
}

/** A better-sqlite3 transaction function: call `immediate` to take the write lock up front. */
export interface SqliteTransaction<A extends unknown[], R> {
  deferred(...args: A): R
  immediate(...args: A): R
}

/** Connection settings the engine applies when it opens. */
export interface SqliteConnectionOptions {
  /**
   * `full` (the default) syncs the WAL on every commit, so a saved checkpoint survives a power
   * loss; `normal` is faster and still never corrupts, but may lose the last commits on power loss.
   */
  synchronous?: 'full' | 'normal'
  /** How long a write waits for another connection's write lock before failing. Default 5000 ms. */
  busyTimeoutMs?: number
}

/** 8 KiB pages pack ~1-2 KB list items with far less slack than SQLite's default 4 KiB. */
const PAGE_SIZE = 8192
/**
 * The WAL is checkpointed into the database once it holds 256 pages (2 MiB). A commit of an
 * agent loop rewrites the same few last pages of each table and index; checkpointing every few
 * commits copied and synced them again each time (a sync-durability commit took about twice
 * as long), while a 2 MiB log copies each of them once per 256 pages written.
 */
const WAL_AUTOCHECKPOINT_PAGES = 256
/**
 * Above the largest log a checkpoint leaves behind, so the WAL file is reused in place: a file
 * cut back after every checkpoint has to grow again, and a sync of a file that grew costs more.
 */
const JOURNAL_SIZE_LIMIT_BYTES = 4 * 1024 * 1024
/** Apply the connection settings every connection of the engine uses (WAL, synchronous, busy timeout). */
export function configureConnection(db: SqliteDatabase, options: SqliteConnectionOptions): void {
  const { synchronous = 'full', busyTimeoutMs = 5000 } = options
  if (!Number.isInteger(busyTimeoutMs) || busyTimeoutMs < 0) throw new InvalidArgumentError(`busyTimeoutMs must be a non-negative integer, got ${busyTimeoutMs}`)
  if (synchronous !== 'full' && synchronous !== 'normal') throw new InvalidArgumentError(`synchronous must be 'full' or 'normal', got ${String(synchronous)}`)
  // One call for all of them (each its own call costs an opening process a statement each), in
  // order: the busy timeout first, so switching to WAL and migrating wait for other processes;
  // the page size only takes effect on a new, empty file.
  const settings = [
    `PRAGMA busy_timeout = ${busyTimeoutMs}`,
    `PRAGMA page_size = ${PAGE_SIZE}`,
    'PRAGMA journal_mode = WAL',
    `PRAGMA wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`,
    `PRAGMA journal_size_limit = ${JOURNAL_SIZE_LIMIT_BYTES}`,
    `PRAGMA synchronous = ${synchronous.toUpperCase()}`,
  ].join(';\n')
  // Switching a new file to WAL needs it to itself for a moment. While another connection holds
  // a write lock on it (a process opening the same new file, still in rollback mode), SQLite
  // answers SQLITE_BUSY at once instead of waiting, to avoid a deadlock; the settings are safe to
  // apply again, so they are retried until the busy timeout has passed.
  const deadline = Date.now() + busyTimeoutMs
  for (let pause = 5; ; pause = Math.min(pause * 2, 100)) {
    try {
      db.exec(settings)
      LEVELS.set(db, { base: synchronous, current: synchronous })
      return
    } catch (err) {
      if (!isBusy(err) || Date.now() >= deadline) throw err
      Atomics.wait(PAUSE, 0, 0, Math.min(pause, Math.max(1, deadline - Date.now())))
    }
  }
}

/**
 * The `synchronous` level of each connection configured by {@link configureConnection}: its own
 * (`base`, the `synchronous` option) and the one its next transaction commits with. One per
 * connection, shared by everything that writes through it (the engine, its leases, the event
 * log, the time tables), so a level relaxed for one transaction never carries over to a write
 * that asked for the connection's own. In WAL mode, `NORMAL` does not sync the log at each
 * commit: a commit survives a crash of the process (the log is in the OS's cache) but an OS crash
 * or a power loss may lose the last ones; the database is never corrupted, and the next `FULL`
 * commit syncs the log with every commit before it.
 */
const LEVELS = new WeakMap<SqliteDatabase, { base: 'full' | 'normal'; current: 'full' | 'normal' }>()

/**
 * Before a transaction (never inside one): commit it without waiting for the disk when `relaxed`,
 * else with the connection's own level (a connection opened with `normal` never waits). The
 * pragma is switched only when the level differs, so a run of `async` commits switches once.
 */
function useLevel(db: SqliteDatabase, relaxed: boolean | undefined): void {
  const level = LEVELS.get(db)
  const wanted = relaxed || level?.base === 'normal' ? 'normal' : 'full'
  if (!level || wanted === level.current) return
  // Not a prepared statement: SQLite applies this pragma when it compiles it, not when a compiled
  // copy runs again (about 2 µs a switch).
  db.exec(`PRAGMA synchronous = ${wanted.toUpperCase()}`)
  level.current = wanted
}

/** What a synchronous pause waits on: nothing ever wakes it, so it lasts its timeout. */
const PAUSE = new Int32Array(new SharedArrayBuffer(4))

function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY')
}

/** How SQLite spells what differs between the SQL dialects the store runs on. */
const SQLITE_DIALECT: SqlDialect = {
  name: 'sqlite',
  label: 'SQLite',
  table: (name) => name,
  int: 'INTEGER',
  bool: 'INTEGER',
  keyed: ' WITHOUT ROWID',
  isUniqueViolation: (err) => /^SQLITE_CONSTRAINT_(PRIMARYKEY|UNIQUE)$/.test(String((err as { code?: unknown } | null)?.code)),
  constraintOf(err) {
    if (!SQLITE_DIALECT.isUniqueViolation(err)) return undefined
    // SQLite names the columns, not the index: "UNIQUE constraint failed: checkpoints.run_id, checkpoints.seq".
    const columns = String((err as Error).message).replace(/^.*constraint failed: /, '')
    return columns === 'checkpoints.id' ? 'checkpoints_pkey' : columns === 'checkpoints.run_id, checkpoints.seq' ? 'checkpoints_run_seq' : columns.startsWith('list_items.') ? 'list_items_pkey' : columns
  },
  in: (column, param) => `${column} IN (SELECT value FROM json_each(${param}))`,
  list: (values) => JSON.stringify(values),
  forUpdate: '',
  forShare: '',
  greatest: 'max',
  noLimit: -1,
}

/** Thrown inside a transaction to roll it back, carrying what the work returned. */
class Rollback extends Error {
  constructor(readonly result: unknown) {
    super('rolled back')
  }
}

/**
 * The {@link SqlDriver} of a connection: each statement prepared once, every piece of work run
 * synchronously (in one `BEGIN IMMEDIATE` transaction when atomic, a deferred one for a
 * snapshot). A boolean value is bound as 0 or 1, and `undefined` as null.
 */
export class SqliteSqlDriver implements SqlDriver {
  readonly dialect = SQLITE_DIALECT
  readonly #db: SqliteDatabase
  readonly #statements = new Map<string, Prepared>()
  readonly #transaction: SqliteTransaction<[fn: () => unknown], unknown>

  constructor(db: SqliteDatabase) {
    this.#db = db
    this.#transaction = db.transaction((fn: () => unknown) => fn())
  }

  async query(text: string, values: unknown[] = [], options: SqlRunOptions = {}): Promise<SqlResult> {
    // A read leaves the level as it is: only a write commits with it.
    if (!options.keepLevel && !this.#prepare(text).readonly) useLevel(this.#db, options.relaxed)
    return this.#execute({ text, values })
  }

  async run<T>(work: () => SqlWork<T>, options: SqlWorkOptions<T> = {}): Promise<T> {
    if (!options.keepLevel && !options.snapshot) useLevel(this.#db, options.relaxed)
    const { keep } = options
    const go = () => {
      const result = runWorkSync(work(), (query) => this.#execute(query))
      if (keep && !keep(result)) throw new Rollback(result)
      return result
    }
    if (!options.atomic) return options.snapshot && this.#db.inTransaction !== true ? (this.#transaction.deferred(go) as T) : go()
    try {
      return this.#transaction.immediate(go) as T
    } catch (err) {
      if (err instanceof Rollback) return err.result as T
      throw err
    }
  }

  #prepare(text: string): Prepared {
    let prepared = this.#statements.get(text)
    if (!prepared) {
      // `$n` becomes `?`, bound by position: quicker than by name, and `order` says which value goes where.
      const order: number[] = []
      const statement = this.#db.prepare(text.replace(/\$(\d+)/g, (_, n: string) => (order.push(Number(n) - 1), '?')))
      // Rows as arrays, made objects here: better-sqlite3 builds an object row about five times slower.
      const columns = statement.reader === false ? undefined : statement.raw(true).columns().map((column) => column.name)
      prepared = { statement, order, columns, readonly: statement.readonly === true }
      this.#statements.set(text, prepared)
    }
    return prepared
  }

  #execute({ text, values }: SqlQuery): SqlResult {
    const { statement, order, columns } = this.#prepare(text)
    // A plain loop, not `order.map` with a closure: this runs for every statement of every step.
    const params = new Array<unknown>(order.length)
    for (let k = 0; k < order.length; k++) {
      const value = values[order[k]!]
      params[k] = typeof value === 'boolean' ? Number(value) : (value ?? null)
    }
    if (columns === undefined) return { rows: [], changes: statement.run(...params).changes }
    const cells = statement.all(...params) as unknown[][]
    const rows = new Array<Record<string, unknown>>(cells.length)
    for (let r = 0; r < cells.length; r++) {
      const line = cells[r]!
      const row: Record<string, unknown> = {}
      for (let k = 0; k < columns.length; k++) row[columns[k]!] = line[k]
      rows[r] = row
    }
    return { rows, changes: rows.length }
  }
}

/** A statement prepared once: the index of the value each `?` binds, and its result's column names (none for a write without rows). */
interface Prepared {
  statement: SqliteStatement
  order: number[]
  columns: string[] | undefined
  readonly: boolean
}
