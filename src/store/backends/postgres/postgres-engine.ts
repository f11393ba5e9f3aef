import { CairnError, StoreError } from '../../../core/errors.js'
import type { ListCheckpointsQuery, ListRunsQuery } from '../../checkpoint-store.js'
import type {
  CheckpointHeaderRow,
  CheckpointRow,
  CommitRequest,
  CommitResult,
  EffectCompletionRow,
  EffectRow,
  ListAppend,
  ListRef,
  RunPatch,
  RunRow,
  StorageEngine,
} from '../../engine/storage-engine.js'
import { retainedListLengths } from '../../engine/row-order.js'
import { migratePostgres } from './migrations.js'
import { PostgresLeases } from './postgres-leases.js'
import {
  CHECKPOINT_PARAMS,
  DEFAULT_SCHEMA,
  EFFECT_PARAMS,
  RUN_PARAMS,
  assertSchemaName,
  listCheckpointsSql,
  listRunsSql,
  postgresStatements,
  updateRunSql,
  type PostgresStatements,
} from './sql.js'

/** What a query returns: the slice of a `pg` `QueryResult` the engine reads. */
export interface PostgresQueryResult {
  rows: Record<string, unknown>[]
  rowCount: number | null
}

/** Anything that runs one parameterized statement (`$1`, `$2`, …): a pool or a checked-out client. */
export interface PostgresQueryable {
  query(text: string, values?: unknown[]): Promise<PostgresQueryResult>
}

/** A connection checked out of a pool; `release(true)` (or an error) discards it instead of reusing it. */
export interface PostgresPoolClient extends PostgresQueryable {
  release(destroy?: boolean | Error): void
}

/**
 * The slice of a `pg` `Pool` the engine uses. Declared here so the engine does not depend on the
 * driver; a `pg.Pool` satisfies it, and so does {@link PGliteClient} over an embedded PGlite.
 */
export interface PostgresPool extends PostgresQueryable {
  connect(): Promise<PostgresPoolClient>
}

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
    const result = await this.#query(this.#sql.insertRun, RUN_PARAMS.map((key) => row[key]))
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

  async updateRun(runId: string, patch: RunPatch): Promise<RunRow | undefined> {
    const { text, values } = updateRunSql(this.#schema, runId, patch)
    const { rows } = await this.#query(text, values)
    return rows[0] && runRow(rows[0])
  }

  async deleteRun(runId: string): Promise<boolean> {
    const sql = this.#sql
    return this.#transaction(async (db) => {
      if ((await db.query(sql.deleteRun, [runId])).rowCount === 0) return false
      for (const statement of [sql.deleteRunCheckpoints, sql.deleteRunItems, sql.deleteRunEffects]) await db.query(statement, [runId])
      return true
    })
  }

  async commit(request: CommitRequest): Promise<CommitResult> {
    try {
      return await this.#transaction(
        (db) => this.#commitIn(db, request),
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

  async getCheckpoint(checkpointId: string): Promise<CheckpointRow | undefined> {
    const { rows } = await this.#query(this.#sql.getCheckpoint, [checkpointId])
    return rows[0] && checkpointRow(rows[0])
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

  async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    const { rows } =
      'runId' in query ? await this.#query(this.#sql.latestOfRun, [query.runId]) : await this.#query(this.#sql.latestOfWorkflow, [query.workflowName])
    return rows[0] && checkpointRow(rows[0])
  }

  async listCheckpoints(query: ListCheckpointsQuery): Promise<CheckpointHeaderRow[]> {
    const { text, values } = listCheckpointsSql(this.#schema, query)
    return (await this.#query(text, values)).rows.map(headerRow)
  }

  async readLists(runId: string, refs: readonly ListRef[]): Promise<string[][]> {
    if (refs.length === 0) return []
    // One statement for every ref: one round trip and one snapshot, so a concurrent prune
    // cannot cut a list between two reads.
    const { rows } = await this.#query(this.#sql.readLists, [runId, refs.map((ref) => ref.id), refs.map((ref) => ref.n)])
    const lists = refs.map((): string[] => [])
    for (const row of rows) lists[Number(row.ref) - 1]?.push(row.item as string)
    return lists
  }

  async deleteCheckpoints(runId: string, checkpointIds: readonly string[]): Promise<number> {
    const sql = this.#sql
    return this.#transaction(async (db) => {
      await db.query(sql.lockRun, [runId])
      const deleted = (await db.query(sql.deleteCheckpoints, [runId, [...checkpointIds]])).rowCount ?? 0
      // Drop the list items no remaining checkpoint needs; keep everything if a row is unreadable.
      const keep = retainedListLengths((await db.query(sql.listRefsOfRun, [runId])).rows as { lists: string }[])
      if (keep) await db.query(sql.truncateLists, [runId, [...keep.keys()], [...keep.values()]])
      return deleted
    })
  }

  async recordEffectIntent(row: EffectRow): Promise<EffectRow> {
    const { rows } = await this.#query(this.#sql.recordEffectIntent, EFFECT_PARAMS.map((key) => row[key]))
    return effectRow(rows[0]!)
  }

  async completeEffect(completion: EffectCompletionRow): Promise<{ recorded: boolean; row: EffectRow | undefined }> {
    // First writer wins: a concurrent UPDATE waits for the row lock, then finds it already complete.
    const updated = await this.#query(this.#sql.completeEffect, completionParams(completion))
    if (updated.rows[0]) return { recorded: true, row: effectRow(updated.rows[0]) }
    return { recorded: false, row: await this.getEffect(completion.runId, completion.callId) }
  }

  async startEffect(runId: string, callId: string): Promise<EffectRow | undefined> {
    const started = await this.#query(this.#sql.startEffect, [runId, callId])
    return started.rows[0] ? effectRow(started.rows[0]) : this.getEffect(runId, callId)
  }

  async getEffect(runId: string, callId: string): Promise<EffectRow | undefined> {
    const { rows } = await this.#query(this.#sql.getEffect, [runId, callId])
    return rows[0] && effectRow(rows[0])
  }

  async listEffects(runId: string): Promise<EffectRow[]> {
    return (await this.#query(this.#sql.listEffects, [runId])).rows.map(effectRow)
  }

  async deleteEffects(runId: string): Promise<number> {
    return (await this.#query(this.#sql.deleteEffects, [runId])).rowCount ?? 0
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    await this.#ready?.catch(() => {})
    await this.#onClose?.()
  }

  /**
   * The checks and writes of one commit, inside its transaction. The run row is locked first,
   * so the seq and list checks see every commit of the run that finished before this one.
   */
  async #commitIn(db: PostgresQueryable, { rows, appends, run, effects, runPatch, fence }: CommitRequest): Promise<CommitResult> {
    const sql = this.#sql
    const ids = rows.map((row) => row.id)
    let locked = await db.query(sql.lockRunForCommit, [run.runId, ids])
    // A fenced run must exist (it was enqueued and claimed); only an unfenced commit creates it.
    if (locked.rows.length === 0 && fence?.runId === run.runId) return { ok: false, reason: 'fenced' }
    for (let attempt = 0; locked.rows.length === 0; attempt++) {
      // The first commit of a run creates it (a concurrent creator wins the race harmlessly).
      if (attempt === 3) throw new Error(`run ${run.runId} disappeared while committing (deleted concurrently)`)
      await db.query(sql.insertRun, RUN_PARAMS.map((key) => run[key]))
      locked = await db.query(sql.lockRunForCommit, [run.runId, ids])
    }
    const state = locked.rows[0]!
    let cancelRequested = false
    if (fence) {
      // Checked under the run row's lock: a claim (which raises the epoch) waits for this commit or skips the run.
      const lease = fence.runId === run.runId ? state : (await db.query(sql.fenceOf, [fence.runId])).rows[0]
      if (!lease || lease.owner !== fence.owner || Number(lease.epoch) !== fence.epoch) return { ok: false, reason: 'fenced' }
      cancelRequested = lease.cancelRequested === true
    }
    if (state.duplicate === true) return { ok: false, reason: 'duplicate_id' }
    const lastSeq = Number(state.lastSeq)
    const first = rows[0]
    if (first && first.seq <= lastSeq) return { ok: false, reason: 'stale_seq', lastSeq }
    if (!(await this.#listsHaveLengths(db, run.runId, appends))) return { ok: false, reason: 'list_conflict' }
    const items = appends.flatMap((append) => append.items.map((item, i) => [append.listId, append.expectedLength + i, item] as const))
    if (items.length > 0) {
      await db.query(sql.insertItems, [run.runId, items.map(([listId]) => listId), items.map(([, idx]) => idx), items.map(([, , item]) => item)])
    }
    const last = rows[rows.length - 1]
    if (last) {
      const updatedAt = Math.max(...rows.map((row) => row.createdAt))
      await db.query(sql.finishCommit, [run.runId, last.seq, updatedAt, ...CHECKPOINT_PARAMS.map((key) => rows.map((row) => row[key]))])
    }
    // Effects commit with the checkpoints; each is one statement, so a call id may repeat.
    for (const intent of effects?.intents ?? []) await db.query(sql.recordEffectIntent, EFFECT_PARAMS.map((key) => intent[key]))
    for (const callId of effects?.starts ?? []) await db.query(sql.startEffect, [run.runId, callId])
    for (const completion of effects?.completions ?? []) await db.query(sql.completeEffect, completionParams(completion))
    if (runPatch) {
      const { text, values } = updateRunSql(this.#schema, run.runId, runPatch)
      await db.query(text, values)
    }
    return cancelRequested ? { ok: true, cancelRequested: true } : { ok: true }
  }

  async #listsHaveLengths(db: PostgresQueryable, runId: string, appends: readonly ListAppend[]): Promise<boolean> {
    if (appends.length === 0) return true
    const { rows } = await db.query(this.#sql.listLengths, [runId, appends.map((append) => append.listId)])
    const lengths = new Map(rows.map((row) => [row.listId, Number(row.length)]))
    return appends.every((append) => lengths.get(append.listId) === append.expectedLength)
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
    const client = await this.#pool.connect()
    const unguard = guardClient(client)
    let destroy = true
    try {
      await client.query('BEGIN')
      let result: T
      try {
        result = await fn(client)
      } catch (err) {
        await client.query('ROLLBACK').then(
          () => (destroy = false),
          () => {},
        )
        throw err
      }
      await client.query(keep(result) ? 'COMMIT' : 'ROLLBACK')
      destroy = false
      return result
    } finally {
      client.release(destroy)
      unguard()
    }
  }

  #assertOpen(): void {
    if (this.#closed) throw new StoreError(`the Postgres store (schema "${this.#schema}") is closed`, { code: 'store_closed' })
  }
}

/**
 * Listen for `error` on a checked-out `pg` client until it is back in the pool. The server ends
 * every connection when it shuts down (a restart), and a checked-out client then emits `error`
 * between queries; unheard, that event would crash the process. The query in flight, or the next
 * one, fails anyway and the transaction's caller sees that. Returns the function that stops
 * listening (call it after `release`, when the pool listens again).
 */
export function guardClient(client: PostgresPoolClient): () => void {
  const emitter = client as Partial<{ on(event: 'error', listener: () => void): unknown; removeListener(event: 'error', listener: () => void): unknown }>
  if (typeof emitter.on !== 'function' || typeof emitter.removeListener !== 'function') return () => {}
  const ignore = () => {}
  emitter.on('error', ignore)
  return () => emitter.removeListener?.('error', ignore)
}

/** The constraint a unique violation (SQLSTATE 23505) names, if `err` is one. */
function uniqueViolation(err: unknown): string | undefined {
  const { code, constraint } = (err ?? {}) as { code?: unknown; constraint?: unknown }
  return code === '23505' && typeof constraint === 'string' ? constraint : undefined
}

function completionParams({ runId, callId, status, output, outputHash, completedAt }: EffectCompletionRow): unknown[] {
  return [runId, callId, status, output, outputHash, completedAt]
}

/** `bigint` columns arrive from `pg` as strings: make the numeric fields numbers again. */
function runRow(row: Record<string, unknown>): RunRow {
  return { ...row, lastSeq: Number(row.lastSeq), createdAt: Number(row.createdAt), updatedAt: Number(row.updatedAt) } as RunRow
}

function headerRow(row: Record<string, unknown>): CheckpointHeaderRow {
  return { ...row, seq: Number(row.seq), schemaVersion: Number(row.schemaVersion), createdAt: Number(row.createdAt) } as CheckpointHeaderRow
}

function checkpointRow(row: Record<string, unknown>): CheckpointRow {
  return headerRow(row) as CheckpointRow
}

function effectRow(row: Record<string, unknown>): EffectRow {
  const completedAt = row.completedAt === null ? null : Number(row.completedAt)
  return { ...row, attempts: Number(row.attempts), startedAt: Number(row.startedAt), completedAt } as EffectRow
}
