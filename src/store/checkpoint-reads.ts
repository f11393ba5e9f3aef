import { CheckpointCorruptionError, CheckpointIntegrityError, CheckpointNotFoundError, InvalidArgumentError } from '../core/errors.js'
import type { SchemaRegistry } from '../core/schema.js'
import type { CheckpointInfo, CheckpointRecord, CheckpointTail, LatestQuery, ListCheckpointsQuery, LoadRunQuery, LoadTailsQuery, OpenRunQuery } from './checkpoint-store.js'
import { listRows, type RunLoad, type StorageEngine } from './engine/storage-engine.js'
import type { CheckpointHeaderRow, CheckpointRow, EffectRow, RunRow } from './engine/rows.js'
import { RUN_LOG_LIST } from './engine/list-retention.js'
import { aheadOfRun, checkEffectsAgainstLog, checkLatestAgainstRun, checkStatusAgainstLog, parseRunLogEntry } from './encoding/rollback.js'
import { decodeMany, decodeTails, readRows, readRunRows } from './encoding/load-many.js'
import { checkRow, decodeCheckedHeader, decodeHeader, listCacheOf, readStoredCheckpoint, toRecord } from './encoding/checkpoint-rows.js'
import { checkRunRow } from './encoding/run-rows.js'
import { assertId } from './encoding/validate.js'
import type { WriterState } from './encoding/batch.js'
import type { CachedList, ListCache } from './encoding/payload-lists.js'

/** What {@link CheckpointReads.openRun} reads: the run opened, and what its store keeps of it for the next write. */
export interface OpenedRunRows {
  run: RunRow | undefined
  latest: CheckpointRecord | undefined
  base: CheckpointRecord | undefined
  effects: EffectRow[]
  /** Where the run's next write goes on from; undefined for a run without checkpoints. */
  writer: WriterState | undefined
  logLength: number
}

/** Runs one call to the engine, turning a driver's failure into a `StoreError` that names it. */
export type EngineCall = <T>(runId: string | undefined, what: string, fn: () => Promise<T>) => Promise<T>

/** What the parts of an engine-backed store (its reads, writes, log and maintenance) share. */
export interface StoreCore {
  engine: StorageEngine
  schemas: SchemaRegistry
  call: EngineCall
  /** Runs a read of checkpoints, reporting a failed check as the store's kind of failure (integrity, when keyed). */
  trusted: <T>(read: () => Promise<T>) => Promise<T>
  warn: (message: string) => void
}

/**
 * The checkpoint reads of an engine-backed store: every record read is checked against its
 * digest and its lists, and a run's newest checkpoint against the run row, so that a truncated,
 * edited or rolled-back store is refused rather than resumed from.
 */
export class CheckpointReads {
  readonly #core: StoreCore

  constructor(core: StoreCore) {
    this.#core = core
  }

  async load<P = unknown>(checkpointId: string): Promise<CheckpointRecord<P>> {
    assertId(checkpointId, 'checkpointId')
    return this.#core.trusted(async () => {
      const [row] = await this.#core.call(undefined, `load checkpoint ${checkpointId}`, () => this.#core.engine.getCheckpoints([checkpointId]))
      if (!row) throw new CheckpointNotFoundError(`checkpoint ${checkpointId} does not exist`, { checkpointId })
      return (await this.#decode(row)) as CheckpointRecord<P>
    })
  }

  async loadMany<P = unknown>(checkpointIds: readonly string[]): Promise<CheckpointRecord<P>[]> {
    assertIds(checkpointIds, 'loadMany')
    return this.#core.trusted(async () => {
      const rows = await this.#core.call(undefined, `load ${checkpointIds.length} checkpoints`, () => readRows(this.#core.engine, checkpointIds))
      return (await this.#core.call(rows[0]?.runId, `read ${rows.length} checkpoints`, () => decodeMany(rows, this.#core.engine, this.#core.schemas))) as CheckpointRecord<P>[]
    })
  }

  async loadTails<P = unknown>(checkpointIds: readonly string[], query: LoadTailsQuery): Promise<CheckpointTail<P>[]> {
    assertIds(checkpointIds, 'loadTails')
    assertId(query?.after, 'after')
    return this.#core.trusted(async () => {
      const [base, ...rows] = await this.#core.call(undefined, `load ${checkpointIds.length} checkpoints`, () => readRows(this.#core.engine, [query.after, ...checkpointIds]))
      return (await this.#core.call(base!.runId, `read ${rows.length} checkpoints`, () => decodeTails(rows, base, this.#core.engine, this.#core.schemas))) as CheckpointTail<P>[]
    })
  }

  async loadRun<P = unknown>(runId: string, query: LoadRunQuery = {}): Promise<CheckpointRecord<P>[]> {
    assertId(runId, 'runId')
    if (query.kind !== undefined && typeof query.kind !== 'string') throw new InvalidArgumentError(`kind must be a string, got ${typeof query.kind}`)
    return this.#core.trusted(async () => {
      // The row first, as for getLatest: the checkpoints read after it are never older than it says.
      const run = await this.#core.call(runId, 'read run', () => this.#core.engine.getRun(runId))
      const rows = await this.#core.call(runId, 'read the checkpoints of the run', () => readRunRows(this.#core.engine, runId))
      await this.#confirmLatest(runId, run, rows.at(-1))
      // A row of another kind is left out only once it reads: an unreadable one (a file that is
      // a link or a FIFO has no kind at all) is reported, never skipped as not wanted.
      const wanted = query.kind === undefined ? rows : rows.filter((row) => isWanted(row, query.kind!))
      return (await this.#core.call(runId, `read ${wanted.length} checkpoints`, () => decodeMany(wanted, this.#core.engine, this.#core.schemas))) as CheckpointRecord<P>[]
    })
  }

  async getLatest<P = unknown>(query: LatestQuery): Promise<CheckpointRecord<P> | undefined> {
    if (query.runId !== undefined) assertId(query.runId, 'runId')
    else if (typeof query.workflowName !== 'string' || query.workflowName === '') {
      throw new InvalidArgumentError('getLatest needs { runId } or { workflowName }')
    }
    const { runId, workflowName } = query
    return this.#core.trusted(async () => {
      if (runId !== undefined) {
        const { latest, lists } = await this.#runAndLatest(runId)
        return latest && ((await this.#decode(latest, lists)) as CheckpointRecord<P>)
      }
      // A workflow's latest is its newest checkpoint across runs, by time: what is left of it.
      const row = await this.#core.call(undefined, 'read latest checkpoint', () => this.#core.engine.getLatest({ workflowName }))
      return row && ((await this.#decode(row)) as CheckpointRecord<P>)
    })
  }

  async listCheckpoints(query: ListCheckpointsQuery = {}): Promise<CheckpointInfo[]> {
    assertLimit(query.limit)
    if (query.runId !== undefined) assertId(query.runId, 'runId')
    if (query.before !== undefined) assertId(query.before, 'before')
    const { verify = true, ...engineQuery } = query
    const { runId } = query
    const { call, engine } = this.#core
    if (!verify) return (await call(runId, 'list checkpoints', () => engine.listCheckpoints(engineQuery))).map(decodeHeader)
    // A run's history read from its newest end must reach the seq the run row records.
    const run = runId !== undefined && query.before === undefined && query.workflowName === undefined ? await call(runId, 'read run', () => engine.getRun(runId)) : undefined
    return this.#core.trusted(async () => {
      const rows = await call(runId, 'list checkpoints', () => listRows(engine, engineQuery))
      if (run) checkRunRow(run)
      if (run && checkLatestAgainstRun(run, rows[0], run.runId) === 'ahead') await this.#runAndLatest(run.runId)
      return rows.flatMap((row) => {
        try {
          checkRow(row)
          return [decodeCheckedHeader(row)]
        } catch (err) {
          if (query.unreadable !== 'skip' || !(err instanceof CheckpointCorruptionError)) throw err
          this.#core.warn(`skipped checkpoint ${row.id} of run ${row.runId} while listing, as asked (unreadable: 'skip'): ${err.message}`)
          return []
        }
      })
    })
  }

  /**
   * What a resume reads, in at most two engine calls (see `StoreReader.openRun`): the run, its
   * newest checkpoints, their lists and its log; then the effects `query.effects` picks from
   * them (none read when it picks none). Also where a writer of the run goes on from (its seq,
   * newest checkpoint and list refs) and the length of its log.
   */
  async openRun(runId: string, query: OpenRunQuery): Promise<OpenedRunRows> {
    const recent = query.recent ?? 8
    if (!Number.isInteger(recent) || recent < 1) throw new InvalidArgumentError(`recent must be a positive integer, got ${String(recent)}`)
    return this.#core.trusted(async () => {
      const read = await this.#core.call(runId, 'load the run', () => this.#core.engine.loadRun(runId, { recent }))
      const latest = read.checkpoints[0]
      const run = await this.#confirmLatest(runId, read.run, latest)
      const logItems = read.lists.find((list) => list.id === RUN_LOG_LIST)?.items ?? []
      const log = logItems.map((item) => parseRunLogEntry(runId, item))
      // A run row put back over a cancel or a completion is refused before anything runs.
      if (run) checkStatusAgainstLog(runId, log, run.status)
      let base: CheckpointRecord | undefined
      for (const row of query.base ? read.checkpoints : []) {
        checkRow(row)
        if (!query.base!(decodeCheckedHeader(row))) continue
        base = await this.#decode(row, read.lists)
        break
      }
      const record = latest && (base?.id === latest.id ? base : await this.#decode(latest, read.lists))
      const picked = query.effects?.({ latest: record, base }) ?? 'all'
      const only = picked === 'all' ? undefined : new Set(picked)
      // Read after the log, so each is at least as far as the log says; checked against it: a row
      // put back to pending or deleted is refused, never run again.
      const effects = only?.size === 0 ? [] : await this.#core.call(runId, 'read the effects of the run', () => this.#core.engine.listEffects(runId, only && [...only]))
      checkEffectsAgainstLog(runId, log, effects, only)
      const writer = latest && run ? { lastSeq: run.lastSeq, lastId: latest.id, lists: listCacheOf(latest, checkRow(latest)), run } : undefined
      return { run, latest: record, base, effects, writer, logLength: logItems.length }
    })
  }

  /** Where a writer that holds nothing of the run in memory goes on from: the run's seq, newest checkpoint and its list refs (no list is read). */
  async writerState(runId: string): Promise<WriterState> {
    // No rollback check here: a save after `delete` of the newest checkpoints (a workflow run
    // continued from an earlier checkpoint it names) is the caller's explicit choice; a resume
    // finds the run through getLatest, which refuses it.
    const run = await this.#core.call(runId, 'read run', () => this.#core.engine.getRun(runId))
    if (run) checkRunRow(run)
    const latest = run && (await this.#core.call(runId, 'read latest checkpoint', () => this.#core.engine.getLatest({ runId })))
    const lists: ListCache = latest ? listCacheOf(latest, checkRow(latest)) : new Map<string, CachedList>()
    return { lastSeq: run?.lastSeq ?? 0, lastId: latest?.id ?? null, lists }
  }

  /** The run, its newest checkpoint and that checkpoint's lists, in one engine call, checked one against the other. */
  async #runAndLatest(runId: string): Promise<{ run: RunRow | undefined; latest: CheckpointRow | undefined; lists: RunLoad['lists'] }> {
    const read = await this.#core.call(runId, 'read run and latest checkpoint', () => this.#core.engine.loadRun(runId, { recent: 1 }))
    const latest = read.checkpoints[0]
    return { run: await this.#confirmLatest(runId, read.run, latest), latest, lists: read.lists }
  }

  /** The run row, checked, after checking the run's newest checkpoint against it (see `checkLatestAgainstRun`). */
  async #confirmLatest(runId: string, run: RunRow | undefined, latest: CheckpointHeaderRow | undefined): Promise<RunRow | undefined> {
    if (run) checkRunRow(run)
    if (checkLatestAgainstRun(run, latest, runId) !== 'ahead') return run
    // A commit may have landed between the two reads: the row read again has caught up.
    const again = await this.#core.call(runId, 'read run', () => this.#core.engine.getRun(runId))
    if (again) checkRunRow(again)
    if (checkLatestAgainstRun(again, latest, runId) === 'ahead') throw aheadOfRun(again, latest!, runId)
    return again
  }

  async #decode(row: CheckpointRow, lists?: RunLoad['lists']): Promise<CheckpointRecord> {
    const stored = await this.#core.call(row.runId, `read checkpoint ${row.id}`, () => readStoredCheckpoint(row, this.#core.engine, lists))
    return toRecord(stored, this.#core.schemas)
  }
}

/**
 * Run a read of a keyed store: a record that fails any check (a list whose items do not match the
 * signed refs, a torn body) is an integrity failure, not mere corruption.
 */
export async function trustedRead<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read()
  } catch (err) {
    if (!(err instanceof CheckpointCorruptionError) || err instanceof CheckpointIntegrityError) throw err
    throw new CheckpointIntegrityError(`${err.message} (this store verifies its records: nothing of this one is used)`, { runId: err.runId, checkpointId: err.checkpointId, cause: err })
  }
}

/** A listing's `limit`, when given, is a positive integer. */
export function assertLimit(limit: number | undefined): void {
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1)) {
    throw new InvalidArgumentError(`limit must be a positive integer, got ${String(limit)}`)
  }
}

/** Whether a row is of the kind asked for; one of another kind must first pass its checks. */
function isWanted(row: CheckpointRow, kind: string): boolean {
  if (row.kind === kind) return true
  checkRow(row)
  return false
}

function assertIds(checkpointIds: readonly string[], method: string): void {
  const given: unknown = checkpointIds
  if (!Array.isArray(given)) throw new InvalidArgumentError(`${method} needs an array of checkpoint ids`)
  for (const checkpointId of checkpointIds) assertId(checkpointId, 'checkpointId')
}
