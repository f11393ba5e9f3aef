import { CheckpointNotFoundError } from '../../core/errors.js'
import type { CommitRequest, CommitResult } from '../engine/storage-engine.js'
import type { CheckpointRow, EffectCompletionRow, EffectRow, PendingWriteRow } from '../engine/rows.js'
import { intentRowsOf } from '../engine/effect-outcomes.js'
import { checkCommit } from '../engine/commit-checks.js'
import { swapFails } from '../engine/run-patch.js'
import { each, sql, type SqlDialect, type SqlQuery, type SqlWork } from './sql-driver.js'
import { CHECKPOINT_PARAMS, COMPLETION_PARAMS, EFFECT_PARAMS, RUN_PARAMS, paramsOf, updateRunSql, type EngineSql } from './engine-sql.js'

/** One item of a list, as a commit appends it. */
export type ListItem = readonly [listId: string, idx: number, item: string]

/**
 * Statements that write or read many rows in one, where a backend has them (Postgres: one
 * array per column, one round trip). Absent, the engine runs one statement per row, which costs
 * SQLite nothing: its statements do not cross a network.
 */
export interface SqlBatches {
  /**
   * The run's row locked for the commit (the columns of `lockRunForCommit`) and the length of each
   * list, as `lengths`: JSON text `[[listId, length], …]`.
   */
  lockRun?(runId: string, listIds: readonly string[]): SqlQuery
  insertItems?(runId: string, items: readonly ListItem[]): SqlQuery
  /** The run's new `last_seq`, `updated_at` and `seal` (see `advanceRun`), the commit's checkpoint rows and its list items. */
  finishCommit?(run: { runId: string; seq: number; updatedAt: number; seal: string | null }, rows: readonly CheckpointRow[], items: readonly ListItem[]): SqlQuery
  /** Intents of distinct call ids, in order. */
  recordEffectIntents?(intents: readonly EffectRow[]): SqlQuery
  /** Completions of distinct call ids. */
  completeEffects?(completions: readonly EffectCompletionRow[]): SqlQuery
  putWrites?(rows: readonly PendingWriteRow[]): SqlQuery
  /** Cut each list of the run to the length in `keep`; lists not named go whole. */
  truncateLists?(runId: string, keep: ReadonlyMap<string, number>): SqlQuery
}

/**
 * One commit, inside its transaction: lock the run row (creating the run when missing), check
 * the fence, the seq, the list lengths, the effect starts and the run patch's swap, then write;
 * a checkpoint id already taken fails the insert (a unique violation the engine answers as
 * `duplicate_id`). A refused commit may have created the run: its transaction is rolled back.
 */
export function* commitWork(s: EngineSql, d: SqlDialect, b: SqlBatches, request: CommitRequest): SqlWork<CommitResult> {
  const { rows, appends, run, effects, runPatch, fence } = request
  const listIds = appends.map((append) => append.listId)
  const lock = b.lockRun ? b.lockRun(run.runId, listIds) : sql(s.lockRunForCommit, run.runId)
  let state = (yield lock).rows[0]
  // A fenced run must exist (it was enqueued and claimed); only an unfenced commit creates it.
  if (!state && fence?.runId === run.runId) return { ok: false, reason: 'fenced' }
  for (let attempt = 0; !state; attempt++) {
    // The first commit of a run creates it (a concurrent creator wins the race harmlessly).
    if (attempt === 3) throw new CheckpointNotFoundError(`run ${run.runId} was deleted by another writer each time this commit created it; write again once the deletion is done`, { code: 'run_not_found', runId: run.runId })
    yield sql(s.insertRun, ...paramsOf(run, RUN_PARAMS))
    state = (yield lock).rows[0]
  }
  let cancelRequested = false
  if (fence) {
    // Checked under the run row's lock: a claim (which raises the epoch) waits for this commit or skips the run.
    const lease = fence.runId === run.runId ? state : (yield sql(s.fenceOf, fence.runId)).rows[0]
    if (!lease || lease.owner !== fence.owner || Number(lease.epoch) !== fence.epoch) return { ok: false, reason: 'fenced' }
    cancelRequested = lease.cancelRequested === true || lease.cancelRequested === 1
  }
  const lengths = new Map<unknown, number>(b.lockRun ? (JSON.parse(String(state.lengths)) as [string, number][]) : [])
  if (!b.lockRun) for (const listId of listIds) lengths.set(listId, Number((yield sql(s.listLength, run.runId, listId)).rows[0]!.length))
  const starts = effects?.starts ?? []
  const stored = new Map<unknown, EffectRow['status']>()
  if (starts.length > 0) for (const row of (yield sql(s.getEffects, run.runId, d.list(starts))).rows) stored.set(row.callId, row.status as EffectRow['status'])
  const refused =
    checkCommit(request, {
      lastSeq: Number(state.lastSeq),
      // A taken id is found by the primary key as the rows go in (the engine answers `duplicate_id`).
      hasCheckpoint: () => false,
      listLength: (listId) => lengths.get(listId) ?? 0,
      effectStatus: (callId) => stored.get(callId),
    }) ?? (runPatch && swapFails(state, runPatch.swap) ? ({ ok: false, reason: 'run_changed' } as const) : undefined)
  if (refused) {
    // A commit refused before its rows go in looks for a taken id first, to answer as it would have there.
    const taken = rows.length > 0 && (yield sql(s.anyCheckpointExists, d.list(rows.map((row) => row.id)))).rows.length > 0
    return taken ? { ok: false, reason: 'duplicate_id' } : refused
  }

  const items = appends.flatMap((append) => append.items.map((item, i): ListItem => [append.listId, append.expectedLength + i, item]))
  const last = rows[rows.length - 1]
  if (items.length > 0 && !(last && b.finishCommit)) yield* each(b.insertItems ? [b.insertItems(run.runId, items)] : items.map((item) => sql(s.insertItem, run.runId, ...item)))
  if (last) {
    const advance = { runId: run.runId, seq: last.seq, updatedAt: Math.max(...rows.map((row) => row.createdAt)), seal: run.seal ?? null }
    if (b.finishCommit) yield b.finishCommit(advance, rows, items)
    else {
      yield sql(s.advanceRun, advance.runId, advance.seq, advance.updatedAt, advance.seal)
      yield* each(rows.map((row) => sql(s.insertCheckpoint, ...paramsOf(row, CHECKPOINT_PARAMS))))
    }
  }
  // Effects in one statement per kind where the backend batches and call ids are distinct; else
  // one statement each, in order (a call id may repeat).
  const intents = intentRowsOf(effects)
  if (b.recordEffectIntents && intents.length > 1 && distinctCalls(intents)) yield b.recordEffectIntents(intents)
  else yield* each(intents.map((intent) => sql(s.recordEffectIntent, ...paramsOf(intent, EFFECT_PARAMS))))
  yield* each(starts.map((callId) => sql(s.startEffect, run.runId, callId)))
  const completions = effects?.completions ?? []
  if (b.completeEffects && completions.length > 1 && distinctCalls(completions)) yield b.completeEffects(completions)
  else yield* each(completions.map((completion) => sql(s.completeEffect, ...paramsOf(completion, COMPLETION_PARAMS))))
  // The run row is locked and its digest checked above.
  if (runPatch) yield updateRunSql(d, run.runId, runPatch)
  return cancelRequested ? { ok: true, cancelRequested: true } : { ok: true }
}

function distinctCalls(effects: readonly { callId: string }[]): boolean {
  return new Set(effects.map((effect) => effect.callId)).size === effects.length
}
