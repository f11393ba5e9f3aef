import { CairnError, StoreError } from '../../../core/errors.js'
import type { ListRange, RunLoad } from '../../engine/storage-engine.js'
import { RUN_LOG_LIST, retainedListLengths } from '../../engine/list-retention.js'
import { SqlEngine } from '../../sql/sql-engine.js'
import { checkpointRow, runRow } from '../../sql/engine-sql.js'
import { sql } from '../../sql/sql-driver.js'
import { SqlLeases } from '../../leases/sql-leases.js'
import { PostgresSqlDriver, type PostgresPool } from './driver.js'
import { migratePostgres } from './migrations.js'
import { PostgresListener, wakeChannel } from './postgres-listener.js'
import { DEFAULT_SCHEMA, assertSchemaName, postgresBatches, postgresStatements, type PostgresStatements } from './sql.js'

/** What {@link PostgresEngine} takes. */
export interface PostgresEngineOptions {
  pool: PostgresPool
  /**
   * The Postgres schema holding Cairn's tables, created on first use. A plain lowercase
   * identifier (letters, digits, `_`); several independent stores may share a database under
   * different schemas. Default `cairn`.
   */
  schema?: string
  /** Called once by `close()`, e.g. to end a pool the store created. A pool passed in is left open. */
  onClose?: () => Promise<void>
  /** Where warnings go (the connection listening for new runs was lost). Defaults to `process.emitWarning`. */
  onWarning?: (message: string) => void
  /**
   * Send statements as named prepared statements, each parsed and planned once per connection.
   * Default true; set false behind a pooler that cannot keep a session's prepared statements
   * (PgBouncer in transaction mode before 1.21).
   */
  preparedStatements?: boolean
}

/**
 * A {@link StorageEngine} over PostgreSQL. Construction starts applying pending migrations
 * (see {@link migratePostgres}); every call waits for them, and a failed attempt (the server
 * was down) is retried by the next call. Writes of one run are serialized by a row lock on the
 * run (`SELECT … FOR UPDATE`), so any number of processes on any number of machines may share
 * one database.
 *
 * @example
 * ```ts
 * import pg from 'pg'
 * const store = new EngineStore(new PostgresEngine({ pool: new pg.Pool({ connectionString }) }))
 * ```
 */
export class PostgresEngine extends SqlEngine {
  readonly #pool: PostgresPool
  readonly #schema: string
  readonly #statements: PostgresStatements
  readonly #onClose: (() => Promise<void>) | undefined
  #ready: Promise<void> | undefined
  #closed = false
  /** The lease protocol of the worker layer (see {@link SqlLeases}). */
  readonly leases: SqlLeases

  constructor(options: PostgresEngineOptions) {
    const schema = options.schema ?? DEFAULT_SCHEMA
    assertSchemaName(schema)
    const opened: { engine?: PostgresEngine } = {}
    super(new PostgresSqlDriver(options.pool, schema, () => opened.engine!.#open(), options.preparedStatements), postgresBatches(schema))
    opened.engine = this
    this.#pool = options.pool
    this.#schema = schema
    this.#statements = postgresStatements(schema)
    this.#onClose = options.onClose
    const channel = wakeChannel(schema)
    const warn = options.onWarning ?? ((message: string) => process.emitWarning(message, 'CairnWarning'))
    this.leases = new SqlLeases(this.db, {
      channel,
      lockQueue: (queue) => sql('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', `cairn.queue:${schema}:${queue}`),
      // `LISTEN` on a connection of its own (re-established after a server restart); undefined
      // when the pool's connections cannot deliver notifications (PGlite through `PGliteClient`).
      subscribe: (onWake) => PostgresListener.open({ pool: this.#pool, channel, onWake, warn }),
    })
    // Start migrating now; a failure surfaces on the next call (and `ready()`), which retries.
    this.ready().catch(() => {})
  }

  /** The schema this engine keeps its tables in. */
  get schema(): string {
    return this.#schema
  }

  /** Resolves once the schema is migrated; rejects with why it could not be (a later call retries). */
  ready(): Promise<void> {
    this.#ready ??= migratePostgres(this.#pool, this.#schema).then(
      () => undefined,
      (err: unknown) => {
        this.#ready = undefined
        if (err instanceof CairnError) throw err
        throw new StoreError(`cannot open the Postgres store in schema "${this.#schema}": ${(err as Error).message}`, { cause: err })
      },
    )
    return this.#ready
  }

  /**
   * One statement, so one round trip and one snapshot (see the `loadRun` statement): the lists
   * are read only as far as the newest checkpoints refer to them. When a checkpoint's `lists`
   * cannot be parsed, the rows and the lists are read in two statements instead.
   */
  override async loadRun(runId: string, { recent }: { recent: number }): Promise<RunLoad> {
    let rows: { part: number | string; list_id: string | null; idx: string | number | null; item: string | null }[]
    try {
      rows = (await this.db.query(this.#statements.loadRun, [runId, recent, RUN_LOG_LIST])).rows as typeof rows
    } catch (err) {
      if (!String((err as { code?: unknown }).code).startsWith('22')) throw err
      return this.#loadRunApart(runId, recent)
    }
    let run: string | null = null
    let checkpointsJson = '[]'
    const items = new Map<string, string[]>()
    for (const row of rows) {
      const part = Number(row.part)
      if (part === 0) run = row.item
      else if (part === 1) checkpointsJson = row.item ?? '[]'
      else {
        let list = items.get(row.list_id!)
        if (!list) items.set(row.list_id!, (list = []))
        list[Number(row.idx)] = row.item!
      }
    }
    return loaded(run, checkpointsJson, [...items].map(([id, list]) => ({ id, items: upToGap(list) })))
  }

  /** `loadRun` in two statements: the rows, then the lists their refs name. */
  async #loadRunApart(runId: string, recent: number): Promise<RunLoad> {
    const read = (await this.db.query(this.#statements.loadRunRows, [runId, recent])).rows[0] as { run: string | null; checkpoints: string }
    const rows = loaded(read.run, read.checkpoints, [])
    const ranges = [...(retainedListLengths(rows.checkpoints) ?? retainedListLengths([])!)].map(([id, n]) => ({ id, n }))
    const lists = (await this.readLists(runId, ranges)).map((items, k) => ({ id: ranges[k]!.id, items }))
    return { ...rows, lists: lists.filter((list) => list.items.length > 0) }
  }

  /** Every range in one statement: one round trip and one snapshot. */
  override async readLists(runId: string, ranges: readonly ListRange[]): Promise<string[][]> {
    if (ranges.length === 0) return []
    const values = [runId, ranges.map((range) => range.id), ranges.map((range) => range.from ?? 0), ranges.map((range) => range.n)]
    const lists = ranges.map((): string[] => [])
    for (const row of (await this.db.query(this.#statements.readLists, values)).rows) {
      const k = Number(row.ref) - 1
      const list = lists[k]
      if (list) list[Number(row.idx) - (ranges[k]!.from ?? 0)] = row.item as string
    }
    return lists.map(upToGap)
  }

  override async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    await this.#ready?.catch(() => {})
    await this.#onClose?.()
  }

  /** Wait for the migrations of an engine not closed yet. */
  async #open(): Promise<void> {
    if (this.#closed) throw new StoreError(`the Postgres store (schema "${this.#schema}") is closed`, { code: 'store_closed' })
    await this.ready()
  }
}

/** A list missing an item ends before it: the caller finds it short of its ref. */
function upToGap(list: string[]): string[] {
  for (let k = 0; k < list.length; k++) if (list[k] === undefined) return list.slice(0, k)
  return list
}

/** A run's load from the JSON the server wrote (numbers and booleans as JSON values, text as it is stored) and its non-empty lists. */
function loaded(run: string | null, checkpoints: string, lists: RunLoad['lists']): RunLoad {
  return {
    run: run === null ? undefined : runRow(JSON.parse(run) as Record<string, unknown>),
    checkpoints: (JSON.parse(checkpoints) as Record<string, unknown>[]).map(checkpointRow),
    lists: lists.filter((list) => list.items.length > 0),
  }
}
