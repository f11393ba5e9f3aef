/**
 * What the Postgres engine runs inside a commit's transaction: the checks (fence, duplicate id,
 * seq, list lengths) and the writes of one {@link CommitRequest}.
 */
import type { CommitRequest, CommitResult } from '../../engine/storage-engine.js'
import type { EffectCompletionRow, EffectRow, ListAppend, RunRow } from '../../engine/rows.js'
import { intentRowsOf } from '../../engine/effect-outcomes.js'
import { checkCommit } from '../../engine/commit-checks.js'
import { swapFails } from '../../engine/run-patch.js'
import type { PostgresQueryable } from './driver.js'
import { CHECKPOINT_PARAMS, EFFECT_PARAMS, RUN_PARAMS, updateRunSql, type PostgresStatements } from './sql.js'
import { CheckpointNotFoundError } from '../../../core/errors.js'

/** The statements and schema a commit writes with. */
export interface CommitContext {
  sql: PostgresStatements
  schema: string
}

/**
 * The checks and writes of one commit, inside its transaction. The run row is locked first,
 * so the seq and list checks see every commit of the run that finished before this one.
 */
export async function commitInTransaction(
db: PostgresQueryable,
{ sql, schema }: CommitContext,
{ rows, appends, run, effects, runPatch, fence }: CommitRequest,
): Promise<CommitResult> {
  const ids = rows.map((row) => row.id)
  let locked = await db.query(sql.lockRunForCommit, [run.runId, ids])
  // A fenced run must exist (it was enqueued and claimed); only an unfenced commit creates it.
  if (locked.rows.length === 0 && fence?.runId === run.runId) return { ok: false, reason: 'fenced' }
  for (let attempt = 0; locked.rows.length === 0; attempt++) {
    // The first commit of a run creates it (a concurrent creator wins the race harmlessly).
    if (attempt === 3) throw new CheckpointNotFoundError(`run ${run.runId} was deleted by another writer each time this commit created it; write again once the deletion is done`, { code: 'run_not_found', runId: run.runId })
    await db.query(sql.insertRun, RUN_PARAMS.map((key) => run[key] ?? null))
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
  const lastSeq = Number(state.lastSeq)
  // The list lengths are checked in SQL (below), the rest as every engine checks them.
  const view = { lastSeq, hasCheckpoint: () => state.duplicate === true, effectStatus: () => undefined }
  const refused = checkCommit({ rows, appends: [] }, view)
  if (refused) return refused
  if (runPatch && swapFails(state, runPatch.swap)) return { ok: false, reason: 'run_changed' }
  if (!(await listsHaveLengths(db, sql, run.runId, appends))) return { ok: false, reason: 'list_conflict' }
  const starts = effects?.starts ?? []
  const stored = new Map<string, EffectRow['status'] | undefined>()
  if (starts.length > 0) for (const row of (await db.query(sql.getEffects, [run.runId, [...starts]])).rows) stored.set(row.callId as string, row.status as EffectRow['status'])
  const notPending = checkCommit({ rows: [], appends: [], effects }, { ...view, effectStatus: (callId) => stored.get(callId) })
  if (notPending) return notPending
  const items = appends.flatMap((append) => append.items.map((item, i) => [append.listId, append.expectedLength + i, item] as const))
  if (items.length > 0) {
    await db.query(sql.insertItems, [run.runId, items.map(([listId]) => listId), items.map(([, idx]) => idx), items.map(([, , item]) => item)])
  }
  const last = rows[rows.length - 1]
  if (last) {
    const updatedAt = Math.max(...rows.map((row) => row.createdAt))
    const columns = CHECKPOINT_PARAMS.map((key) => rows.map((row) => row[key]))
    await db.query(sql.finishCommit, [run.runId, last.seq, updatedAt, run.seal ?? null, ...columns])
  }
  // Effects commit with the checkpoints: in one statement per kind when their call ids are
  // distinct, else one statement each, in order (a call id may repeat).
  const intents = intentRowsOf(effects)
  if (intents.length > 1 && distinctCalls(intents)) await db.query(sql.recordEffectIntents, EFFECT_PARAMS.map((key) => intents.map((intent) => intent[key])))
  else for (const intent of intents) await db.query(sql.recordEffectIntent, EFFECT_PARAMS.map((key) => intent[key]))
  for (const callId of starts) await db.query(sql.startEffect, [run.runId, callId])
  const completions = effects?.completions ?? []
  if (completions.length > 1 && distinctCalls(completions)) {
    const params = completions.map(completionParams)
    await db.query(sql.completeEffects, params[0]!.map((_, k) => params.map((row) => row[k])))
  } else {
    for (const completion of completions) await db.query(sql.completeEffect, completionParams(completion))
  }
  if (runPatch) {
    // The run row is locked and its digest checked above.
    const { text, values } = updateRunSql(schema, run.runId, runPatch)
    await db.query(text, values)
  }
  return cancelRequested ? { ok: true, cancelRequested: true } : { ok: true }
}

/** The run columns of a selected row (`bigint` columns arrive as strings). */
export function runRowOf(row: Record<string, unknown>): RunRow {
  return {
    runId: row.runId as string,
    status: row.status as RunRow['status'],
    name: row.name as string | null,
    threadId: row.threadId as string | null,
    workflowName: row.workflowName as string | null,
    configSignature: row.configSignature as string | null,
    lastSeq: Number(row.lastSeq),
    createdAt: Number(row.createdAt),
    updatedAt: Number(row.updatedAt),
    metadata: row.metadata as string,
    seal: (row.seal as string | null | undefined) ?? null,
    digest: (row.digest as string | null | undefined) ?? null,
  }
}

async function listsHaveLengths(db: PostgresQueryable, sql: PostgresStatements, runId: string, appends: readonly ListAppend[]): Promise<boolean> {
  if (appends.length === 0) return true
  const { rows } = await db.query(sql.listLengths, [runId, appends.map((append) => append.listId)])
  const lengths = new Map(rows.map((row) => [row.listId, Number(row.length)]))
  return appends.every((append) => lengths.get(append.listId) === append.expectedLength)
}

function distinctCalls(effects: readonly { callId: string }[]): boolean {
  return new Set(effects.map((effect) => effect.callId)).size === effects.length
}

/** The parameters of the `completeEffect` statement. */
export function completionParams({ runId, callId, status, output, outputHash, completedAt }: EffectCompletionRow): unknown[] {
  return [runId, callId, status, output, outputHash, completedAt]
}
