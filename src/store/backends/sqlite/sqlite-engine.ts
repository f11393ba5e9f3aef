import type { ListRunsQuery } from '../../checkpoint-store.js'
import type { CheckpointListing, CommitRequest, CommitResult, ListRange, RewriteRequest, RunLoad, StorageEngine } from '../../engine/storage-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, EffectRow, PendingWriteRow, RunChanged, RunPatch, RunRow } from '../../engine/rows.js'
import { retainedListLengths } from '../../engine/list-retention.js'
import { configureConnection, SynchronousLevel, type SqliteConnectionOptions, type SqliteDatabase, type SqliteStatement, type SqliteTransaction } from './driver.js'
import { migrateSqlite } from './migrations.js'
import { SqliteLeases } from './sqlite-leases.js'
import { commitImmediate, commitInTransaction, patchRun, prepareStatements, type Statements } from './sqlite-commit.js'
import { listCheckpointsSql, listRunsSql, type ListCheckpointsShape } from './sql.js'

/** What {@link SqliteEngine} takes: an open database and its connection settings. */
export interface SqliteEngineOptions extends SqliteConnectionOptions {
  database: SqliteDatabase
}

/**
 * A {@link StorageEngine} over one SQLite database (better-sqlite3). Opening sets WAL journal
 * mode, the `synchronous` level and the busy timeout, then applies pending migrations. Every
 * write runs in a `BEGIN IMMEDIATE` transaction, so several processes on one machine can share
 * one database file. The driver is synchronous; the methods return promises to fit the interface.
 *
 * @example
 * ```ts
 * import Database from 'better-sqlite3'
 * const store = new EngineStore(new SqliteEngine({ database: new Database('cairn.db') }))
 * ```
 */
export class SqliteEngine implements StorageEngine {
  readonly #db: SqliteDatabase
  readonly #level: SynchronousLevel
  readonly #statements: Statements
  /** Statements of list queries, by SQL text (one per filter shape). */
  readonly #listStatements = new Map<string, SqliteStatement>()
  readonly #commit: SqliteTransaction<[CommitRequest], CommitResult>
  readonly #deleteCheckpoints: SqliteTransaction<[runId: string, ids: readonly string[]], number>
  readonly #deleteRun: SqliteTransaction<[runId: string], boolean>
  readonly #readLists: SqliteTransaction<[runId: string, ranges: readonly ListRange[]], string[][]>
  readonly #loadRun: SqliteTransaction<[runId: string, recent: number], RunLoad>
  readonly #inTransaction: SqliteTransaction<[fn: () => unknown], unknown>
  #leases: SqliteLeases | undefined

  constructor(options: SqliteEngineOptions) {
    const db = options.database
    this.#db = db
    configureConnection(db, options)
    this.#level = SynchronousLevel.of(db)!
    migrateSqlite(db)
    this.#statements = prepareStatements(db)
    this.#commit = db.transaction((request: CommitRequest) => commitInTransaction(this.#statements, request))
    this.#deleteCheckpoints = db.transaction((runId: string, ids: readonly string[]) => this.#deleteCheckpointsNow(runId, ids))
    this.#deleteRun = db.transaction((runId: string) => this.#deleteRunNow(runId))
    this.#inTransaction = db.transaction((fn: () => unknown) => fn())
    this.#readLists = db.transaction((runId: string, ranges: readonly ListRange[]) => this.#readListsNow(runId, ranges))
    this.#loadRun = db.transaction((runId: string, recent: number) => this.#loadRunNow(runId, recent))
  }

  /** The lease protocol, for workers in several processes on this machine (see {@link SqliteLeases}). */
  get leases(): SqliteLeases {
    this.#leases ??= new SqliteLeases(this.#db, (runId, patch) => patchRun(this.#statements, runId, patch), this.#level)
    return this.#leases
  }

  async insertRun(row: RunRow): Promise<boolean> {
    return this.#write(() => this.#statements.insertRun.run({ ...row, seal: row.seal ?? null, digest: row.digest ?? null }).changes === 1)
  }

  async getRun(runId: string): Promise<RunRow | undefined> {
    return this.#statements.getRun.get(runId) as RunRow | undefined
  }

  async getKeyCheck(keyId: string): Promise<string | undefined> {
    return (this.#statements.getKeyCheck.get(keyId) as { value: string } | undefined)?.value
  }

  async putKeyCheck(keyId: string, value: string): Promise<string> {
    this.#write(() => this.#statements.putKeyCheck.run(keyId, value))
    return (await this.getKeyCheck(keyId)) ?? value
  }

  async listRuns(query: ListRunsQuery): Promise<RunRow[]> {
    const shape = {
      status: query.status !== undefined,
      workflowName: query.workflowName !== undefined,
      threadId: query.threadId !== undefined,
      before: query.before !== undefined,
    }
    const params: Record<string, unknown> = { limit: query.limit ?? -1 }
    if (query.status !== undefined) params.statuses = JSON.stringify(typeof query.status === 'string' ? [query.status] : query.status)
    if (query.workflowName !== undefined) params.workflowName = query.workflowName
    if (query.threadId !== undefined) params.threadId = query.threadId
    if (query.before !== undefined) params.before = query.before
    return this.#listStatement(listRunsSql(shape)).all(params) as RunRow[]
  }

  async updateRun(runId: string, patch: RunPatch): Promise<RunRow | RunChanged | undefined> {
    return this.#write(() => patchRun(this.#statements, runId, patch))
  }

  async deleteRun(runId: string): Promise<boolean> {
    this.#level.use()
    return this.#deleteRun.immediate(runId)
  }

  async commit(request: CommitRequest): Promise<CommitResult> {
    // An `async` commit does not wait for the disk; the next write that does syncs it with its own.
    this.#level.use(request.durability === 'async' ? 'normal' : undefined)
    return commitImmediate(this.#commit, request)
  }

  async getCheckpoints(checkpointIds: readonly string[]): Promise<CheckpointRow[]> {
    if (checkpointIds.length === 0) return []
    return (this.#statements.getCheckpoints.all(JSON.stringify(checkpointIds)) as unknown[][]).map(rawCheckpointRow)
  }

  async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    const row = 'runId' in query ? this.#statements.latestOfRun.get(query.runId) : this.#statements.latestOfWorkflow.get(query.workflowName)
    return checkpointRow(row)
  }

  async listCheckpoints(query: CheckpointListing): Promise<CheckpointHeaderRow[]> {
    if (query.rows === true) {
      const statement = this.#listStatement(listCheckpointsSql(listShape(query), true)).raw(true)
      return (statement.all(listParams(query)) as unknown[][]).map(rawCheckpointRow)
    }
    return (this.#listStatement(listCheckpointsSql(listShape(query))).all(listParams(query)) as StoredHeader[]).map(headerRow)
  }

  async readLists(runId: string, ranges: readonly ListRange[]): Promise<string[][]> {
    // One snapshot for all ranges, so a concurrent prune cannot cut a list between two reads.
    return ranges.length === 0 ? [] : this.#readLists.deferred(runId, ranges)
  }

  async loadRun(runId: string, { recent }: { recent: number }): Promise<RunLoad> {
    return this.#loadRun.deferred(runId, recent)
  }

  async deleteCheckpoints(runId: string, checkpointIds: readonly string[]): Promise<number> {
    this.#level.use()
    return this.#deleteCheckpoints.immediate(runId, checkpointIds)
  }

  async listEffects(runId: string, callIds?: readonly string[]): Promise<EffectRow[]> {
    const rows = callIds === undefined ? this.#statements.listEffects.all(runId) : this.#statements.getEffects.all(runId, JSON.stringify(callIds))
    return (rows as unknown[][]).map(rawEffectRow)
  }

  async deleteEffects(runId: string): Promise<number> {
    return this.#write(() => this.#statements.deleteEffects.run(runId).changes)
  }

  async putWrites(rows: readonly PendingWriteRow[]): Promise<void> {
    this.#write(() => {
      for (const row of rows) this.#statements.putWrite.run(row)
    })
  }

  async listWrites(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRow[]> {
    if (checkpointIds.length === 0) return []
    return this.#statements.listWrites.all(runId, JSON.stringify(checkpointIds)) as PendingWriteRow[]
  }

  async rewrite(request: RewriteRequest): Promise<void> {
    const { runId } = request
    const checkpoint = this.#listStatement('UPDATE checkpoints SET body = ?, lists = ?, digest = ? WHERE id = ? AND run_id = ?')
    const item = this.#listStatement('UPDATE list_items SET item = ? WHERE run_id = ? AND list_id = ? AND idx = ?')
    const effect = this.#listStatement('UPDATE effects SET input_hash = ?, output = ?, output_hash = ? WHERE run_id = ? AND call_id = ?')
    this.#write(() => {
      for (const row of request.checkpoints) checkpoint.run(row.body, row.lists, row.digest, row.id, runId)
      for (const row of request.items) item.run(row.item, runId, row.listId, row.idx)
      for (const row of request.effects) effect.run(row.inputHash, row.output, row.outputHash, runId, row.callId)
    })
  }

  /** Closing the last connection checkpoints the WAL into the database file. */
  async close(): Promise<void> {
    this.#db.close()
  }

  #readListsNow(runId: string, ranges: readonly ListRange[]): string[][] {
    return ranges.map((range) => this.#statements.readListRange.all(runId, range.id, range.from ?? 0, range.n) as string[])
  }

  /** Inside one read transaction: the run, its newest checkpoints, their lists and its effects. */
  #loadRunNow(runId: string, recent: number): RunLoad {
    const s = this.#statements
    const checkpoints = (s.recentOfRun.all(runId, recent) as unknown[][]).map(rawCheckpointRow)
    const wanted = [...(retainedListLengths(checkpoints) ?? retainedListLengths([])!)].map(([id, n]) => ({ id, n }))
    const lists = this.#readListsNow(runId, wanted).map((items, k) => ({ id: wanted[k]!.id, items }))
    return { run: s.getRun.get(runId) as RunRow | undefined, checkpoints, lists: lists.filter((list) => list.items.length > 0), effects: (s.listEffects.all(runId) as unknown[][]).map(rawEffectRow) }
  }

  #deleteCheckpointsNow(runId: string, checkpointIds: readonly string[]): number {
    const s = this.#statements
    let deleted = 0
    for (const id of checkpointIds) {
      deleted += s.deleteCheckpoint.run(id, runId).changes
      s.deleteCheckpointWrites.run(runId, id)
    }
    // Drop the list items no remaining checkpoint needs; keep everything if a row is unreadable.
    const keep = retainedListLengths(s.listRefsOfRun.all(runId) as { lists: string }[])
    if (keep) {
      for (const listId of s.listIdsOfRun.all(runId) as string[]) s.truncateList.run(runId, listId, keep.get(listId) ?? 0)
    }
    return deleted
  }

  #deleteRunNow(runId: string): boolean {
    const s = this.#statements
    if (s.deleteRun.run(runId).changes === 0) return false
    s.deleteRunCheckpoints.run(runId)
    s.deleteRunItems.run(runId)
    s.deleteRunEffects.run(runId)
    s.deleteRunWrites.run(runId)
    return true
  }

  /** Run one write in a `BEGIN IMMEDIATE` transaction. */
  #write<T>(fn: () => T): T {
    this.#level.use()
    return this.#inTransaction.immediate(fn) as T
  }

  #listStatement(sql: string): SqliteStatement {
    let statement = this.#listStatements.get(sql)
    if (!statement) {
      statement = this.#db.prepare(sql)
      this.#listStatements.set(sql, statement)
    }
    return statement
  }
}

function listShape(query: CheckpointListing): ListCheckpointsShape {
  return { runId: query.runId !== undefined, workflowName: query.workflowName !== undefined, before: query.before !== undefined }
}

function listParams(query: CheckpointListing): Record<string, unknown> {
  const params: Record<string, unknown> = { limit: query.limit ?? -1 }
  if (query.runId !== undefined) params.runId = query.runId
  if (query.workflowName !== undefined) params.workflowName = query.workflowName
  if (query.before !== undefined) params.before = query.before
  return params
}

/** A header as stored: `terminal` is 0 or 1. */
type StoredHeader = Omit<CheckpointHeaderRow, 'terminal'> & { terminal: unknown }

/** Map the stored 0/1 to a boolean; any other value is passed on for EngineStore to reject. */
function headerRow(row: StoredHeader): CheckpointHeaderRow {
  row.terminal = row.terminal === 1 ? true : row.terminal === 0 ? false : row.terminal
  return row as CheckpointHeaderRow
}

function checkpointRow(row: unknown): CheckpointRow | undefined {
  return row === undefined ? undefined : rawCheckpointRow(row as unknown[])
}

/** A checkpoint row read as an array of its columns, in the order of `CHECKPOINT_COLUMNS` (sql.ts). */
function rawCheckpointRow(c: unknown[]): CheckpointRow {
  // Indexed reads, not a destructuring: a fresh process runs this before it is optimized, when a
  // destructuring walks the array's iterator (a run's history makes thousands of rows).
  // As `headerRow`: 0/1 to a boolean, any other value passed on for EngineStore to reject.
  const terminal = c[9]
  const flag = terminal === 1 ? true : terminal === 0 ? false : terminal
  return {
    id: c[0],
    runId: c[1],
    parentId: c[2],
    seq: c[3],
    kind: c[4],
    phase: c[5],
    schemaVersion: c[6],
    createdAt: c[7],
    workflowName: c[8],
    terminal: flag,
    metadata: c[10],
    body: c[11],
    lists: c[12],
    digest: c[13],
  } as CheckpointRow
}

/** An effect row from its columns (a raw statement: arrays are cheaper to read than objects; indexed reads, as above). */
function rawEffectRow(c: unknown[]): EffectRow {
  return { runId: c[0], callId: c[1], name: c[2], inputHash: c[3], idempotencyKey: c[4], status: c[5], output: c[6], outputHash: c[7], attempts: c[8], startedAt: c[9], completedAt: c[10] } as EffectRow
}
