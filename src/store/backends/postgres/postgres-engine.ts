import { CairnError, StoreError } from '../../../core/errors.js'
import type { ListRunsQuery } from '../../checkpoint-store.js'
import type { CheckpointListing, CommitRequest, CommitResult, ListRange, RewriteRequest, RunLoad, StorageEngine } from '../../engine/storage-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, EffectRow, PendingWriteRow, RunChanged, RunPatch, RunRow } from '../../engine/rows.js'
import { RUN_CHANGED } from '../../engine/run-patch.js'
import { RUN_LOG_LIST, retainedListLengths } from '../../engine/list-retention.js'
import { inTransaction, uniqueViolation, type PostgresPool, type PostgresQueryable, type PostgresQueryResult } from './driver.js'
import { migratePostgres } from './migrations.js'
import { commitInTransaction } from './postgres-commit.js'
import { PostgresLeases } from './postgres-leases.js'
import {
  DEFAULT_SCHEMA,
  RUN_PARAMS,
  assertSchemaName,
  listCheckpointsSql,
  listRunsSql,
  postgresStatements,
  updateRunSql,
  type PostgresStatements,
} from './sql.js'

/** What {@link PostgresEngine} takes. */
export interface PostgresEngineOptions {
  pool: PostgresPool
  /** The Postgres schema holding Cairn's tables, created when missing. Default `cairn`. */
  schema?: string
  /** Called once by `close()`, e.g. to end a pool the store created. A pool passed in is left open. */
  onClose?: () => Promise<void>
  /** Where warnings go (the connection listening for new runs was lost). Defaults to `process.emitWarning`. */
  onWarning?: (message: string) => void
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
export class PostgresEngine implements StorageEngine {
  readonly #pool: PostgresPool
  readonly #schema: string
  readonly #sql: PostgresStatements
  readonly #onClose: (() => Promise<void>) | undefined
  #ready: Promise<void> | undefined
  #closed = false
  /** The lease protocol of the worker layer (see {@link PostgresLeases}). */
  readonly leases: PostgresLeases

  constructor(options: PostgresEngineOptions) {
    const schema = options.schema ?? DEFAULT_SCHEMA
    assertSchemaName(schema)
    this.#pool = options.pool
    this.#schema = schema
    this.#sql = postgresStatements(schema)
    this.#onClose = options.onClose
    this.leases = new PostgresLeases({
      schema,
      pool: this.#pool,
      query: (text, values) => this.#query(text, values),
      transaction: (fn) => this.#transaction(fn),
      warn: options.onWarning ?? ((message) => process.emitWarning(message, 'CairnWarning')),
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

  async insertRun(row: RunRow): Promise<boolean> {
    const result = await this.#query(this.#sql.insertRun, RUN_PARAMS.map((key) => row[key] ?? null))
    return result.rowCount === 1
  }

  async getRun(runId: string): Promise<RunRow | undefined> {
    const { rows } = await this.#query(this.#sql.getRun, [runId])
    return rows[0] && runRow(rows[0])
  }

  async listRuns(query: ListRunsQuery): Promise<RunRow[]> {
    const { text, values } = listRunsSql(this.#schema, query)
    return (await this.#query(text, values)).rows.map(runRow)
  }

  async updateRun(runId: string, patch: RunPatch): Promise<RunRow | RunChanged | undefined> {
    const { text, values } = updateRunSql(this.#schema, runId, patch)
    const { rows } = await this.#query(text, values)
    if (rows[0]) return runRow(rows[0])
    // No row updated: the run does not exist, or its digest is not the one the swap expects.
    return patch.swap && (await this.getRun(runId)) ? RUN_CHANGED : undefined
  }

  async deleteRun(runId: string): Promise<boolean> {
    const sql = this.#sql
    return this.#transaction(async (db) => {
      if ((await db.query(sql.deleteRun, [runId])).rowCount === 0) return false
      for (const statement of [sql.deleteRunCheckpoints, sql.deleteRunItems, sql.deleteRunEffects, sql.deleteRunWrites]) await db.query(statement, [runId])
      return true
    })
  }

  async commit(request: CommitRequest): Promise<CommitResult> {
    try {
      return await this.#transaction(
        (db) => commitInTransaction(db, { sql: this.#sql, schema: this.#schema }, request),
        (result) => result.ok,
      )
    } catch (err) {
      // A unique index caught what the checks could not see yet (a writer of another run
      // committing the same checkpoint id): report it as the check would have.
      const constraint = uniqueViolation(err)
      if (constraint === 'checkpoints_pkey') return { ok: false, reason: 'duplicate_id' }
      if (constraint === 'list_items_pkey') return { ok: false, reason: 'list_conflict' }
      if (constraint === 'checkpoints_run_seq') {
        const { rows } = await this.#query(this.#sql.runLastSeq, [request.run.runId])
        return { ok: false, reason: 'stale_seq', lastSeq: Number(rows[0]?.lastSeq ?? 0) }
      }
      throw err
    }
  }

  async getCheckpoints(checkpointIds: readonly string[]): Promise<CheckpointRow[]> {
    const rows: CheckpointRow[] = []
    // Bounded batches: one round trip per thousand ids rather than one per id.
    for (let start = 0; start < checkpointIds.length; start += 1000) {
      const batch = await this.#query(this.#sql.getCheckpoints, [checkpointIds.slice(start, start + 1000)])
      for (const row of batch.rows) rows.push(checkpointRow(row))
    }
    return rows
  }

  /**
   * One statement, so one round trip and one snapshot (see the `loadRun` statement): the lists
   * are read only as far as the newest checkpoints refer to them. When a checkpoint's `lists`
   * cannot be parsed, the rows and the lists are read in two statements instead.
   */
  async loadRun(runId: string, { recent }: { recent: number }): Promise<RunLoad> {
    let read: { run: string | null; checkpoints: string; effects: string; lists?: string }
    try {
      read = (await this.#query(this.#sql.loadRun, [runId, recent, RUN_LOG_LIST])).rows[0] as typeof read
    } catch (err) {
      if (!String((err as { code?: unknown }).code).startsWith('22')) throw err
      read = (await this.#query(this.#sql.loadRunRows, [runId, recent])).rows[0] as typeof read
    }
    // The server wrote the JSON: numbers and booleans arrive as JSON values, text as it is stored.
    const checkpoints = (JSON.parse(read.checkpoints) as Record<string, unknown>[]).map(checkpointRow)
    const wanted = retainedListLengths(checkpoints) ?? retainedListLengths([])!
    const ranges = [...wanted].map(([id, n]) => ({ id, n }))
    const lists =
      read.lists === undefined
        ? (await this.readLists(runId, ranges)).map((items, k) => ({ id: ranges[k]!.id, items }))
        : (JSON.parse(read.lists) as { id: string; items: string[] | null }[]).map(({ id, items }) => ({ id, items: (items ?? []).slice(0, wanted.get(id) ?? 0) }))
    return {
      run: read.run === null ? undefined : runRow(JSON.parse(read.run) as Record<string, unknown>),
      checkpoints,
      lists: lists.filter((list) => list.items.length > 0),
      effects: (JSON.parse(read.effects) as Record<string, unknown>[]).map(effectRow),
    }
  }

  async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    const { rows } =
      'runId' in query ? await this.#query(this.#sql.latestOfRun, [query.runId]) : await this.#query(this.#sql.latestOfWorkflow, [query.workflowName])
    return rows[0] && checkpointRow(rows[0])
  }

  async listCheckpoints(query: CheckpointListing): Promise<CheckpointHeaderRow[]> {
    const { text, values } = listCheckpointsSql(this.#schema, query, query.rows === true)
    return (await this.#query(text, values)).rows.map(query.rows === true ? checkpointRow : headerRow)
  }

  async readLists(runId: string, ranges: readonly ListRange[]): Promise<string[][]> {
    if (ranges.length === 0) return []
    // One statement for every range: one round trip and one snapshot, so a concurrent prune
    // cannot cut a list between two reads.
    const { rows } = await this.#query(this.#sql.readLists, [runId, ranges.map((range) => range.id), ranges.map((range) => range.from ?? 0), ranges.map((range) => range.n)])
    const lists = ranges.map((): string[] => [])
    for (const row of rows) lists[Number(row.ref) - 1]?.push(row.item as string)
    return lists
  }

  async deleteCheckpoints(runId: string, checkpointIds: readonly string[]): Promise<number> {
    const sql = this.#sql
    return this.#transaction(async (db) => {
      await db.query(sql.lockRun, [runId])
      const deleted = (await db.query(sql.deleteCheckpoints, [runId, [...checkpointIds]])).rowCount ?? 0
      await db.query(sql.deleteCheckpointWrites, [runId, [...checkpointIds]])
      // Drop the list items no remaining checkpoint needs; keep everything if a row is unreadable.
      const keep = retainedListLengths((await db.query(sql.listRefsOfRun, [runId])).rows as { lists: string }[])
      if (keep) await db.query(sql.truncateLists, [runId, [...keep.keys()], [...keep.values()]])
      return deleted
    })
  }

  async getKeyCheck(keyId: string): Promise<string | undefined> {
    const { rows } = await this.#query(this.#sql.getKeyCheck, [keyId])
    return (rows[0] as { value: string } | undefined)?.value
  }

  async putKeyCheck(keyId: string, value: string): Promise<string> {
    await this.#query(this.#sql.putKeyCheck, [keyId, value])
    return (await this.getKeyCheck(keyId)) ?? value
  }

  async listEffects(runId: string, callIds?: readonly string[]): Promise<EffectRow[]> {
    const { rows } = callIds === undefined ? await this.#query(this.#sql.listEffects, [runId]) : await this.#query(this.#sql.getEffects, [runId, [...callIds]])
    return rows.map(effectRow)
  }

  async deleteEffects(runId: string): Promise<number> {
    return (await this.#query(this.#sql.deleteEffects, [runId])).rowCount ?? 0
  }

  async putWrites(rows: readonly PendingWriteRow[]): Promise<void> {
    if (rows.length === 0) return
    const columns = WRITE_COLUMNS.map((key) => rows.map((row) => row[key]))
    await this.#query(this.#sql.putWrites, columns)
  }

  async listWrites(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRow[]> {
    if (checkpointIds.length === 0) return []
    const { rows } = await this.#query(this.#sql.listWrites, [runId, [...checkpointIds]])
    return rows.map((row) => ({ ...(row as unknown as PendingWriteRow), idx: Number(row.idx), createdAt: Number(row.createdAt) }))
  }

  async rewrite(request: RewriteRequest): Promise<void> {
    const { runId } = request
    await this.#transaction(async (db) => {
      for (const row of request.checkpoints) await db.query(this.#sql.rewriteCheckpoint, [row.body, row.lists, row.digest, row.id, runId])
      for (const row of request.items) await db.query(this.#sql.rewriteItem, [row.item, runId, row.listId, row.idx])
      for (const row of request.effects) await db.query(this.#sql.rewriteEffect, [row.inputHash, row.output, row.outputHash, runId, row.callId])
    })
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    await this.#ready?.catch(() => {})
    await this.#onClose?.()
  }

  async #query(text: string, values: unknown[]): Promise<PostgresQueryResult> {
    this.#assertOpen()
    await this.ready()
    return this.#pool.query(text, values)
  }

  /**
   * Run `fn` in a transaction on one pooled connection; commit when `keep` says so, else roll
   * back. A connection whose transaction could not be ended cleanly is discarded, not reused.
   */
  async #transaction<T>(fn: (db: PostgresQueryable) => Promise<T>, keep: (result: T) => boolean = () => true): Promise<T> {
    this.#assertOpen()
    await this.ready()
    return inTransaction(this.#pool, fn, keep)
  }

  #assertOpen(): void {
    if (this.#closed) throw new StoreError(`the Postgres store (schema "${this.#schema}") is closed`, { code: 'store_closed' })
  }
}

/** `bigint` columns arrive from `pg` as strings: make the numeric fields numbers again. */
const WRITE_COLUMNS = ['runId', 'checkpointId', 'taskId', 'idx', 'channel', 'taskPath', 'value', 'createdAt'] as const

function runRow(row: Record<string, unknown>): RunRow {
  return { ...row, lastSeq: Number(row.lastSeq), createdAt: Number(row.createdAt), updatedAt: Number(row.updatedAt) } as RunRow
}

/**
 * A checkpoint row as `pg` made it, its numeric fields made numbers in place: the object is the engine's own, and a run's history reads
 * thousands of them: no copy of each.
 */
function headerRow(row: Record<string, unknown>): CheckpointHeaderRow {
  row.seq = Number(row.seq)
  row.schemaVersion = Number(row.schemaVersion)
  row.createdAt = Number(row.createdAt)
  return row as unknown as CheckpointHeaderRow
}

function checkpointRow(row: Record<string, unknown>): CheckpointRow {
  return headerRow(row) as CheckpointRow
}

/** An effect row as `pg` made it, its numeric fields made numbers in place (as {@link headerRow}). */
function effectRow(row: Record<string, unknown>): EffectRow {
  row.attempts = Number(row.attempts)
  row.startedAt = Number(row.startedAt)
  row.completedAt = row.completedAt === null ? null : Number(row.completedAt)
  return row as unknown as EffectRow
}
