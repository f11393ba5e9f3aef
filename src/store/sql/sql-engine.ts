import type { ListRunsQuery } from '../checkpoint-store.js'
import type { CheckpointListing, CommitRequest, CommitResult, ListRange, RewriteRequest, RunLoad, StorageEngine } from '../engine/storage-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, EffectRow, PendingWriteRow, RunChanged, RunPatch, RunRow } from '../engine/rows.js'
import { RUN_CHANGED } from '../engine/run-patch.js'
import { retainedListLengths } from '../engine/list-retention.js'
import { each, sql, type SqlDriver, type SqlWork } from './sql-driver.js'
import { commitWork, type SqlBatches } from './sql-commit.js'
import {
  RUN_PARAMS,
  WRITE_PARAMS,
  checkpointRow,
  effectRow,
  engineSql,
  listCheckpointsSql,
  listRunsSql,
  paramsOf,
  runRow,
  updateRunSql,
  writeRow,
  type EngineSql,
} from './engine-sql.js'

/** Ids per statement of `getCheckpoints`: one statement per thousand ids rather than one per id. */
const IDS_PER_READ = 1000

/**
 * A {@link StorageEngine} over a {@link SqlDriver}: every read and write written once, for SQLite
 * and Postgres alike; a backend adds what only it has (its connection, migrations, leases, and
 * the {@link SqlBatches} it writes many rows with). Every write of several statements runs in one
 * transaction: on SQLite, `BEGIN IMMEDIATE`, synchronously; on Postgres, on one connection,
 * where a commit first locks the run's row, so writers of one run queue there.
 */
export class SqlEngine implements StorageEngine {
  protected readonly db: SqlDriver
  protected readonly sql: EngineSql
  readonly #batches: SqlBatches

  constructor(db: SqlDriver, batches: SqlBatches = {}) {
    this.db = db
    this.sql = engineSql(db.dialect)
    this.#batches = batches
  }

  async insertRun(row: RunRow): Promise<boolean> {
    return (await this.db.query(this.sql.insertRun, paramsOf(row, RUN_PARAMS))).changes === 1
  }

  async getRun(runId: string): Promise<RunRow | undefined> {
    const { rows } = await this.db.query(this.sql.getRun, [runId])
    return rows[0] && runRow(rows[0])
  }

  async listRuns(query: ListRunsQuery): Promise<RunRow[]> {
    const { text, values } = listRunsSql(this.db.dialect, query)
    return (await this.db.query(text, values)).rows.map(runRow)
  }

  async updateRun(runId: string, patch: RunPatch): Promise<RunRow | RunChanged | undefined> {
    const { text, values } = updateRunSql(this.db.dialect, runId, patch)
    const { rows } = await this.db.query(text, values)
    if (rows[0]) return runRow(rows[0])
    // No row updated: the run does not exist, or its digest is not the one the swap expects.
    return patch.swap && (await this.getRun(runId)) ? RUN_CHANGED : undefined
  }

  async deleteRun(runId: string): Promise<boolean> {
    const s = this.sql
    return this.db.run(
      function* () {
        if ((yield sql(s.deleteRun, runId)).changes === 0) return false
        yield* each(s.deleteRunRows.map((text) => sql(text, runId)))
        return true
      },
      { atomic: true },
    )
  }

  async commit(request: CommitRequest): Promise<CommitResult> {
    try {
      // An `async` commit does not wait for the disk; the next write that does syncs it with its own.
      return await this.db.run(() => commitWork(this.sql, this.db.dialect, this.#batches, request), { atomic: true, keep: (result) => result.ok, relaxed: request.durability === 'async' })
    } catch (err) {
      // A unique index caught what the checks could not see yet (a writer of another run
      // committing the same checkpoint id): report it as the check would have.
      const constraint = this.db.dialect.constraintOf(err)
      if (constraint === 'checkpoints_pkey') return { ok: false, reason: 'duplicate_id' }
      if (constraint === 'list_items_pkey') return { ok: false, reason: 'list_conflict' }
      if (constraint === 'checkpoints_run_seq') {
        const { rows } = await this.db.query(this.sql.runLastSeq, [request.run.runId])
        return { ok: false, reason: 'stale_seq', lastSeq: Number(rows[0]?.lastSeq ?? 0) }
      }
      throw err
    }
  }

  async getCheckpoints(checkpointIds: readonly string[]): Promise<CheckpointRow[]> {
    const rows: CheckpointRow[] = []
    for (let start = 0; start < checkpointIds.length; start += IDS_PER_READ) {
      const batch = await this.db.query(this.sql.getCheckpoints, [this.db.dialect.list(checkpointIds.slice(start, start + IDS_PER_READ))])
      for (const row of batch.rows) rows.push(checkpointRow(row))
    }
    return rows
  }

  async getLatest(query: { runId: string } | { workflowName: string }): Promise<CheckpointRow | undefined> {
    const { rows } = 'runId' in query ? await this.db.query(this.sql.latestOfRun, [query.runId]) : await this.db.query(this.sql.latestOfWorkflow, [query.workflowName])
    return rows[0] && checkpointRow(rows[0])
  }

  async listCheckpoints(query: CheckpointListing): Promise<CheckpointHeaderRow[]> {
    const { text, values } = listCheckpointsSql(this.db.dialect, query, query.rows === true)
    return (await this.db.query(text, values)).rows.map(checkpointRow)
  }

  async readLists(runId: string, ranges: readonly ListRange[]): Promise<string[][]> {
    if (ranges.length === 0) return []
    // One snapshot for all ranges, so a concurrent prune cannot cut a list between two reads.
    return this.db.run(() => this.#readLists(runId, ranges), { snapshot: true })
  }

  /** In one snapshot: the run, its newest checkpoints and the lists they refer to. */
  async loadRun(runId: string, { recent }: { recent: number }): Promise<RunLoad> {
    const s = this.sql
    const readLists = (ranges: readonly ListRange[]) => this.#readLists(runId, ranges)
    return this.db.run(
      function* () {
        const checkpoints = (yield sql(s.recentOfRun, runId, recent)).rows.map(checkpointRow)
        const wanted = [...(retainedListLengths(checkpoints) ?? retainedListLengths([])!)].map(([id, n]) => ({ id, n }))
        const lists = (yield* readLists(wanted)).map((items, k) => ({ id: wanted[k]!.id, items }))
        const run = (yield sql(s.getRun, runId)).rows[0]
        return { run: run && runRow(run), checkpoints, lists: lists.filter((list) => list.items.length > 0) }
      },
      { snapshot: true },
    )
  }

  async deleteCheckpoints(runId: string, checkpointIds: readonly string[]): Promise<number> {
    const [s, d, b] = [this.sql, this.db.dialect, this.#batches]
    return this.db.run(
      function* () {
        yield sql(s.lockRun, runId)
        const deleted = (yield sql(s.deleteCheckpoints, runId, d.list(checkpointIds))).changes
        yield sql(s.deleteCheckpointWrites, runId, d.list(checkpointIds))
        // Drop the list items no remaining checkpoint needs; keep everything if a row is unreadable.
        const keep = retainedListLengths((yield sql(s.listRefsOfRun, runId)).rows as { lists: string }[])
        if (!keep) return deleted
        if (b.truncateLists) yield b.truncateLists(runId, keep)
        else for (const { listId } of (yield sql(s.listIdsOfRun, runId)).rows) yield sql(s.truncateList, runId, listId, keep.get(listId as string) ?? 0)
        return deleted
      },
      { atomic: true },
    )
  }

  async getKeyCheck(keyId: string): Promise<string | undefined> {
    const { rows } = await this.db.query(this.sql.getKeyCheck, [keyId])
    return rows[0]?.value as string | undefined
  }

  async putKeyCheck(keyId: string, value: string): Promise<string> {
    await this.db.query(this.sql.putKeyCheck, [keyId, value])
    return (await this.getKeyCheck(keyId)) ?? value
  }

  async listEffects(runId: string, callIds?: readonly string[]): Promise<EffectRow[]> {
    const { rows } = callIds === undefined ? await this.db.query(this.sql.listEffects, [runId]) : await this.db.query(this.sql.getEffects, [runId, this.db.dialect.list(callIds)])
    return rows.map(effectRow)
  }

  async deleteEffects(runId: string): Promise<number> {
    return (await this.db.query(this.sql.deleteEffects, [runId])).changes
  }

  async putWrites(rows: readonly PendingWriteRow[]): Promise<void> {
    if (rows.length === 0) return
    const b = this.#batches
    const queries = b.putWrites ? [b.putWrites(rows)] : rows.map((row) => sql(this.sql.putWrite, ...paramsOf(row, WRITE_PARAMS)))
    // One statement is atomic by itself: no transaction around it (on Postgres, two round trips fewer).
    if (queries.length === 1) await this.db.query(queries[0]!.text, queries[0]!.values)
    else await this.db.run(() => each(queries), { atomic: true })
  }

  async listWrites(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRow[]> {
    if (checkpointIds.length === 0) return []
    return (await this.db.query(this.sql.listWrites, [runId, this.db.dialect.list(checkpointIds)])).rows.map(writeRow)
  }

  async rewrite({ runId, checkpoints, items, effects }: RewriteRequest): Promise<void> {
    const s = this.sql
    const queries = [
      ...checkpoints.map((row) => sql(s.rewriteCheckpoint, row.body, row.lists, row.digest, row.id, runId)),
      ...items.map((row) => sql(s.rewriteItem, row.item, runId, row.listId, row.idx)),
      ...effects.map((row) => sql(s.rewriteEffect, row.inputHash, row.output, row.outputHash, runId, row.callId)),
    ]
    await this.db.run(() => each(queries), { atomic: true })
  }

  async close(): Promise<void> {}

  /** Items of each range, in order, one statement a range. */
  *#readLists(runId: string, ranges: readonly ListRange[]): SqlWork<string[][]> {
    const lists: string[][] = []
    for (const range of ranges) lists.push((yield sql(this.sql.readListRange, runId, range.id, range.from ?? 0, range.n)).rows.map((row) => row.item as string))
    return lists
  }
}
