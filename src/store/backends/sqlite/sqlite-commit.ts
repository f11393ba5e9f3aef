/** What the SQLite engine runs inside a write transaction. */
import type { CommitRequest, CommitResult } from '../../engine/storage-engine.js'
import type { EffectRow, RunChanged, RunPatch, RunRow } from '../../engine/rows.js'
import { intentRowsOf } from '../../engine/effect-outcomes.js'
import { checkCommit } from '../../engine/commit-checks.js'
import { RUN_CHANGED, swapFails } from '../../engine/run-patch.js'
import type { SqliteDatabase, SqliteStatement } from './driver.js'
import { SQL } from './sql.js'

export type Statements = { [K in keyof typeof SQL]: SqliteStatement }

/** Statements whose result is a single column return that value (`pluck`). */
const PLUCKED: ReadonlySet<keyof typeof SQL> = new Set(['runLastSeq', 'listLength', 'readListRange', 'listIdsOfRun'] as const)

/** Statements that read checkpoint or effect rows return each as an array of its columns (`raw`): quicker to build. */
const RAW: ReadonlySet<keyof typeof SQL> = new Set(['getCheckpoints', 'latestOfRun', 'latestOfWorkflow', 'recentOfRun', 'listEffects', 'getEffects'] as const)

/**
 * The engine's statements, each prepared on first use: opening a store (a fresh process about to
 * resume one run) prepares only what it runs.
 */
export function prepareStatements(db: SqliteDatabase): Statements {
  const statements = {} as Statements
  for (const key of Object.keys(SQL) as (keyof typeof SQL)[]) {
    Object.defineProperty(statements, key, {
      enumerable: true,
      configurable: true,
      get() {
        const statement = db.prepare(SQL[key])
        const prepared = PLUCKED.has(key) ? statement.pluck() : RAW.has(key) ? statement.raw() : statement
        Object.defineProperty(statements, key, { value: prepared, enumerable: true })
        return prepared
      },
    })
  }
  return statements
}

/**
 * One commit, inside the caller's `BEGIN IMMEDIATE` transaction: check the fence, the ids, the
 * seq and the list lengths it expects, then write everything or nothing.
 */
export function commitInTransaction(s: Statements, { rows, appends, run, effects, runPatch, fence }: CommitRequest): CommitResult {
  let cancelRequested = false
  if (fence) {
    // Inside BEGIN IMMEDIATE: no other connection can claim the run until this commit ends.
    const lease = s.fenceOf.get(fence.runId) as { owner: string | null; epoch: number; cancelRequested: number } | undefined
    if (!lease || lease.owner !== fence.owner || lease.epoch !== fence.epoch) return { ok: false, reason: 'fenced' }
    cancelRequested = lease.cancelRequested === 1
  }
  const lastSeq = (s.runLastSeq.get(run.runId) as number | undefined) ?? 0
  const refused = checkCommit(
    { rows, appends, effects },
    {
      lastSeq,
      // A taken id is found by the primary key as the rows go in (see below).
      hasCheckpoint: () => false,
      listLength: (listId) => s.listLength.get(run.runId, listId) as number,
      effectStatus: (callId) => (s.getEffect.get(run.runId, callId) as EffectRow | undefined)?.status,
    },
  )
  // A commit refused before its rows go in looks for a taken id first, so that it is reported as it would be there.
  if (refused) return anyTaken(s, rows) ? { ok: false, reason: 'duplicate_id' } : refused
  if (runPatch?.swap && swapFails((s.getRun.get(run.runId) as RunRow | undefined) ?? run, runPatch.swap)) return { ok: false, reason: 'run_changed' }
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
    seal: run.seal ?? null,
    digest: run.digest ?? null,
    advance: last === undefined ? 0 : 1,
    seq: last?.seq ?? lastSeq,
    // The newest checkpoint's time (0 for an effects-only commit: updated_at stays).
    checkpointCreatedAt: rows.reduce((newest, row) => Math.max(newest, row.createdAt), 0),
  })
  try {
    insertCheckpoints(s, rows)
  } catch (err) {
    // The id's uniqueness is the primary key's to check: a taken one undoes the whole commit.
    if ((err as { code?: unknown }).code === 'SQLITE_CONSTRAINT_PRIMARYKEY') throw new DuplicateCheckpointId()
    throw err
  }
  for (const intent of intentRowsOf(effects)) s.commitEffectIntent.run(intent)
  for (const callId of effects?.starts ?? []) s.startEffect.run(run.runId, callId)
  for (const completion of effects?.completions ?? []) s.commitEffectCompletion.run(completion)
  if (runPatch) patchRun(s, run.runId, runPatch)
  return cancelRequested ? { ok: true, cancelRequested: true } : { ok: true }
}

/** Insert a commit's checkpoint rows, each column as the row carries it. */
function insertCheckpoints(s: Statements, rows: CommitRequest['rows']): void {
  for (const row of rows) {
    s.insertCheckpoint.run(
      row.id,
      row.runId,
      row.parentId,
      row.seq,
      row.kind,
      row.phase,
      row.schemaVersion,
      row.createdAt,
      row.workflowName,
      row.terminal ? 1 : 0,
      row.metadata,
      row.body,
      row.lists,
      row.digest,
    )
  }
}

function anyTaken(s: Statements, rows: readonly { id: string }[]): boolean {
  if (rows.length === 0) return false
  return (rows.length === 1 ? s.checkpointExists.get(rows[0]!.id) : s.anyCheckpointExists.get(JSON.stringify(rows.map((row) => row.id)))) !== undefined
}

/** Thrown inside a commit's transaction, to roll it back, when a checkpoint id is already taken. */
class DuplicateCheckpointId extends Error {}

/**
 * Run `commit` (a `db.transaction` of {@link commitInTransaction}) with `BEGIN IMMEDIATE`: a
 * checkpoint id already taken rolls the whole commit back and is reported as `duplicate_id`.
 */
export function commitImmediate(commit: { immediate(request: CommitRequest): CommitResult }, request: CommitRequest): CommitResult {
  try {
    return commit.immediate(request)
  } catch (err) {
    if (err instanceof DuplicateCheckpointId) return { ok: false, reason: 'duplicate_id' }
    throw err
  }
}

/** Apply a run patch (inside the caller's transaction), unless its swap expects another digest than the row's. */
export function patchRun(s: Statements, runId: string, patch: RunPatch): RunRow | RunChanged | undefined {
  if (patch.swap) {
    const current = s.getRun.get(runId) as RunRow | undefined
    if (!current) return undefined
    if (swapFails(current, patch.swap)) return RUN_CHANGED
  }
  const digest = patch.swap?.digest
  const params = {
    runId,
    updatedAt: patch.updatedAt,
    ...field('status', patch.status),
    ...field('name', patch.name),
    ...field('threadId', patch.threadId),
    ...field('workflowName', patch.workflowName),
    ...field('configSignature', patch.configSignature),
    ...field('metadata', patch.metadata),
    ...field('seal', patch.seal),
    ...field('digest', digest),
  }
  return s.updateRun.get(params) as RunRow | undefined
}

/** Named parameters that set one field of `updateRun` only when the patch has it. */
function field(name: string, value: string | null | undefined): Record<string, string | number | null> {
  const flag = `set${name[0]?.toUpperCase() ?? ''}${name.slice(1)}`
  return value === undefined ? { [flag]: 0, [name]: null } : { [flag]: 1, [name]: value }
}
