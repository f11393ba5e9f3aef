import type { ListCheckpointsQuery, ListRunsQuery } from '../checkpoint-store.js'
import type {
  CheckpointHeaderRow,
  CheckpointRow,
  CommitRequest,
  CommitResult,
  EffectCompletionRow,
  EffectRow,
  ListRef,
  RunPatch,
  RunRow,
  StorageEngine,
} from '../engine.js'
import { retainedListLengths } from '../engine-util.js'
import { migrateSqlite } from './migrations.js'
import { SqliteLeases } from './sqlite-leases.js'
import { SQL, listCheckpointsSql, listRunsSql } from './sql.js'

/**
 * The slice of a better-sqlite3 `Database` the engine uses. Declared here so the engine does
 * not depend on the driver's types; a better-sqlite3 `Database` satisfies it.
 */
export interface SqliteDatabase {
  prepare(source: string): SqliteStatement
  exec(source: string): unknown
  pragma(source: string, options?: { simple?: boolean }): unknown
  transaction<A extends unknown[], R>(fn: (...args: A) => R): SqliteTransaction<A, R>
  close(): unknown
}

/** The slice of a better-sqlite3 `Statement` the engine uses. */
export interface SqliteStatement {
  run(...params: unknown[]): { changes: number }
  get(...params: unknown[]): unknown
  all(...params: unknown[]): unknown[]
  pluck(toggle?: boolean): SqliteStatement
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
  readonly #statements: Statements
  /** Statements of list queries, by SQL text (one per filter shape). */
  readonly #listStatements = new Map<string, SqliteStatement>()
  readonly #commit: SqliteTransaction<[CommitRequest], CommitResult>
  readonly #deleteCheckpoints: SqliteTransaction<[runId: string, ids: readonly string[]], number>
  readonly #deleteRun: SqliteTransaction<[runId: string], boolean>
  readonly #readLists: SqliteTransaction<[runId: string, refs: readonly ListRef[]], string[][]>
  readonly #inTransaction: SqliteTransaction<[fn: () => unknown], unknown>
  /** The lease protocol, for workers in several processes on this machine (see {@link SqliteLeases}). */
  readonly leases: SqliteLeases

  constructor(options: SqliteEngineOptions) {
    const db = options.database
    this.#db = db
    configureConnection(db, options)
    migrateSqlite(db)
    this.#statements = prepareStatements(db)
    this.#commit = db.transaction((request: CommitRequest) => this.#commitNow(request))
    this.#deleteCheckpoints = db.transaction((runId: string, ids: readonly string[]) => this.#deleteCheckpointsNow(runId, ids))
    this.#deleteRun = db.transaction((runId: string) => this.#deleteRunNow(runId))
    this.#inTransaction = db.transaction((fn: () => unknown) => fn())
    this.#readLists = db.transaction((runId: string, refs: readonly ListRef[]) =>
      refs.map((ref) => this.#statements.readList.all(runId, ref.id, ref.n) as string[]),
    )
    this.leases = new SqliteLeases(db, (runId, patch) => this.#patchRun(runId, patch))
  }

  async insertRun(row: RunRow): Promise<boolean> {
    return this.#write(() => this.#statements.insertRun.run(row).changes === 1)
  }

  async getRun(runId: string): Promise<RunRow | undefined> {
    return this.#statements.getRun.get(runId) as RunRow | undefined
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

  async updateRun(runId: string, patch: RunPatch): Promise<RunRow | undefined> {
    return this.#write(() => this.#patchRun(runId, patch))
  }

  async deleteRun(runId: string): Promise<boolean> {
    return this.#deleteRun.immediate(runId)
  }

  async commit(request: CommitRequest): Promise<CommitResult> {
    return this.#commit.immediate(request)
  }

  async getCheckpoint(checkpointId: string): Promise<CheckpointRow | undefined> {
    return checkpointRow(this.#statements.getCheckpoint.get(checkpointId))
  }

  async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    const row = 'runId' in query ? this.#statements.latestOfRun.get(query.runId) : this.#statements.latestOfWorkflow.get(query.workflowName)
    return checkpointRow(row)
  }

  async listCheckpoints(query: ListCheckpointsQuery): Promise<CheckpointHeaderRow[]> {
    const shape = { runId: query.runId !== undefined, workflowName: query.workflowName !== undefined, before: query.before !== undefined }
    const params: Record<string, unknown> = { limit: query.limit ?? -1 }
    if (query.runId !== undefined) params.runId = query.runId
    if (query.workflowName !== undefined) params.workflowName = query.workflowName
    if (query.before !== undefined) params.before = query.before
    const rows = this.#listStatement(listCheckpointsSql(shape)).all(params) as StoredHeader[]
    return rows.map(headerRow)
  }

  async readLists(runId: string, refs: readonly ListRef[]): Promise<string[][]> {
    // One snapshot for all refs, so a concurrent prune cannot cut a list between two reads.
    return refs.length === 0 ? [] : this.#readLists.deferred(runId, refs)
  }

  async deleteCheckpoints(runId: string, checkpointIds: readonly string[]): Promise<number> {
    return this.#deleteCheckpoints.immediate(runId, checkpointIds)
  }

  async recordEffectIntent(row: EffectRow): Promise<EffectRow> {
    return this.#write(() => this.#statements.recordEffectIntent.get(row) as EffectRow)
  }

  async completeEffect(completion: EffectCompletionRow): Promise<{ recorded: boolean; row: EffectRow | undefined }> {
    return this.#write(() => {
      const updated = this.#statements.completeEffect.get(completion) as EffectRow | undefined
      if (updated) return { recorded: true, row: updated }
      return { recorded: false, row: this.#statements.getEffect.get(completion.runId, completion.callId) as EffectRow | undefined }
    })
  }

  async startEffect(runId: string, callId: string): Promise<EffectRow | undefined> {
    return this.#write(() => {
      const started = this.#statements.startEffect.get(runId, callId) as EffectRow | undefined
      return started ?? (this.#statements.getEffect.get(runId, callId) as EffectRow | undefined)
    })
  }

  async getEffect(runId: string, callId: string): Promise<EffectRow | undefined> {
    return this.#statements.getEffect.get(runId, callId) as EffectRow | undefined
  }

  async listEffects(runId: string): Promise<EffectRow[]> {
    return this.#statements.listEffects.all(runId) as EffectRow[]
  }

  async deleteEffects(runId: string): Promise<number> {
    return this.#write(() => this.#statements.deleteEffects.run(runId).changes)
  }

  /** Closing the last connection checkpoints the WAL into the database file. */
  async close(): Promise<void> {
    this.#db.close()
  }

  #commitNow({ rows, appends, run, effects, runPatch, fence }: CommitRequest): CommitResult {
    const s = this.#statements
    let cancelRequested = false
    if (fence) {
      // Inside BEGIN IMMEDIATE: no other connection can claim the run until this commit ends.
      const lease = s.fenceOf.get(fence.runId) as { owner: string | null; epoch: number; cancelRequested: number } | undefined
      if (!lease || lease.owner !== fence.owner || lease.epoch !== fence.epoch) return { ok: false, reason: 'fenced' }
      cancelRequested = lease.cancelRequested === 1
    }
    if (rows.some((row) => s.checkpointExists.get(row.id) !== undefined)) return { ok: false, reason: 'duplicate_id' }
    const lastSeq = (s.runLastSeq.get(run.runId) as number | undefined) ?? 0
    const first = rows[0]
    if (first && first.seq <= lastSeq) return { ok: false, reason: 'stale_seq', lastSeq }
    for (const append of appends) {
      if (s.listLength.get(run.runId, append.listId) !== append.expectedLength) return { ok: false, reason: 'list_conflict' }
    }
    for (const append of appends) {
      append.items.forEach((item, i) => s.insertItem.run(run.runId, append.listId, append.expectedLength + i, item))
    }
    const last = rows[rows.length - 1]
    s.upsertRunForCommit.run({
      runId: run.runId,
      status: run.status,
      name: run.name,
      threadId: run.threadId,
      workflowName: run.workflowName,
      configSignature: run.configSignature,
      createdAt: run.createdAt,
      updatedAt: run.updatedAt,
      metadata: run.metadata,
      seq: last?.seq ?? lastSeq,
      // The newest checkpoint's time (0 for an effects-only commit: updated_at stays).
      checkpointCreatedAt: rows.reduce((newest, row) => Math.max(newest, row.createdAt), 0),
    })
    for (const row of rows) s.insertCheckpoint.run({ ...row, terminal: row.terminal ? 1 : 0 })
    for (const intent of effects?.intents ?? []) s.recordEffectIntent.get(intent)
    for (const callId of effects?.starts ?? []) s.startEffect.get(run.runId, callId)
    for (const completion of effects?.completions ?? []) s.completeEffect.get(completion)
    if (runPatch) this.#patchRun(run.runId, runPatch)
    return cancelRequested ? { ok: true, cancelRequested: true } : { ok: true }
  }

  /** Apply a run patch (inside the caller's transaction). */
  #patchRun(runId: string, patch: RunPatch): RunRow | undefined {
    const params = {
      runId,
      updatedAt: patch.updatedAt,
      ...field('status', patch.status),
      ...field('name', patch.name),
      ...field('threadId', patch.threadId),
      ...field('workflowName', patch.workflowName),
      ...field('configSignature', patch.configSignature),
      ...field('metadata', patch.metadata),
    }
    return this.#statements.updateRun.get(params) as RunRow | undefined
  }

  #deleteCheckpointsNow(runId: string, checkpointIds: readonly string[]): number {
    const s = this.#statements
    let deleted = 0
    for (const id of checkpointIds) deleted += s.deleteCheckpoint.run(id, runId).changes
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
    return true
  }

  /** Run one write in a `BEGIN IMMEDIATE` transaction. */
  #write<T>(fn: () => T): T {
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

/** 8 KiB pages pack ~1-2 KB list items with far less slack than SQLite's default 4 KiB. */
const PAGE_SIZE = 8192
/**
 * A save appends ~7 pages to the WAL. Checkpointing every 16 pages (every ~3rd save) keeps the
 * WAL near 200 KB instead of SQLite's default 1000 pages (8 MB here), which would dwarf a run's
 * data; the size limit shrinks it back after a burst (a checkpoint held up by a reader).
 */
const WAL_AUTOCHECKPOINT_PAGES = 16
const JOURNAL_SIZE_LIMIT_BYTES = 1024 * 1024

function configureConnection(db: SqliteDatabase, options: SqliteConnectionOptions): void {
  const { synchronous = 'full', busyTimeoutMs = 5000 } = options
  if (!Number.isInteger(busyTimeoutMs) || busyTimeoutMs < 0) throw new RangeError(`busyTimeoutMs must be a non-negative integer, got ${busyTimeoutMs}`)
  if (synchronous !== 'full' && synchronous !== 'normal') throw new RangeError(`synchronous must be 'full' or 'normal', got ${String(synchronous)}`)
  // The busy timeout first, so switching to WAL and migrating wait for other processes.
  db.pragma(`busy_timeout = ${busyTimeoutMs}`)
  db.pragma(`page_size = ${PAGE_SIZE}`) // only takes effect on a new, empty file
  db.pragma('journal_mode = WAL')
  db.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`)
  db.pragma(`journal_size_limit = ${JOURNAL_SIZE_LIMIT_BYTES}`)
  db.pragma(`synchronous = ${synchronous.toUpperCase()}`)
}

type Statements = { [K in keyof typeof SQL]: SqliteStatement }

/** Statements whose result is a single column return that value (`pluck`). */
const PLUCKED: ReadonlySet<keyof typeof SQL> = new Set(['runLastSeq', 'listLength', 'readList', 'listIdsOfRun'] as const)

function prepareStatements(db: SqliteDatabase): Statements {
  const entries = Object.entries(SQL).map(([key, sql]) => {
    const statement = db.prepare(sql)
    return [key, PLUCKED.has(key as keyof typeof SQL) ? statement.pluck() : statement] as const
  })
  return Object.fromEntries(entries) as Statements
}

/** A header as stored: `terminal` is 0 or 1. */
type StoredHeader = Omit<CheckpointHeaderRow, 'terminal'> & { terminal: unknown }

/** Map the stored 0/1 to a boolean; any other value is passed on for EngineStore to reject. */
function headerRow<T extends StoredHeader>(row: T): Omit<T, 'terminal'> & { terminal: boolean } {
  const terminal = row.terminal === 1 ? true : row.terminal === 0 ? false : row.terminal
  return { ...row, terminal: terminal as boolean }
}

function checkpointRow(row: unknown): CheckpointRow | undefined {
  return row === undefined ? undefined : headerRow(row as Omit<CheckpointRow, 'terminal'> & { terminal: unknown })
}

/** Named parameters that set one field of `updateRun` only when the patch has it. */
function field(name: string, value: string | null | undefined): Record<string, string | number | null> {
  const flag = `set${name[0]?.toUpperCase() ?? ''}${name.slice(1)}`
  return value === undefined ? { [flag]: 0, [name]: null } : { [flag]: 1, [name]: value }
}
