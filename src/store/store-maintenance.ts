import { InvalidArgumentError } from '../core/errors.js'
import { FINISHED_STATUSES, type CheckpointRecord, type CheckpointStore, type ForkOptions, type PruneOptions, type PruneResult } from './checkpoint-store.js'
import type { CheckpointWrites } from './checkpoint-writes.js'
import type { RunEventLog } from './event-log/run-event-log.js'
import type { StoreCore } from './checkpoint-reads.js'
import { assertId } from './encoding/validate.js'
import { checkEncryptionOptions, checkRunForRekey, encryptionState, rekeyRun, resealRun, type EncryptionCount, type RekeyOptions, type RekeyResult } from './trust/rekey.js'
import { SealedEngine } from './trust/sealed-engine.js'
import type { RunLog } from './run-log.js'
import { allPages } from './delegating-store.js'

/** What the store's maintenance operations (prune, rekey) need of its internals. */
export interface MaintenanceContext extends StoreCore {
  /** The store's writes: a maintenance step of a run waits for the writes queued before it, and drops what they cached. */
  writes: CheckpointWrites
  /** The runs' logs: a prune marks the effects it deletes there first. */
  log: RunLog
  events: RunEventLog | undefined
  /** Rewrite a run's event log under the ring's writing key (`encrypt`) or in the clear; how many events. */
  resealEvents: (runId: string, encrypt: boolean) => Promise<number>
}

/**
 * `store.prune`: in each run (or the one given), remove checkpoints beyond the `keepLast` newest
 * (and, with `olderThan`, only those created before it), never the latest and never a terminal
 * one; and the effect journal and events of a finished run (last updated before `olderThan`).
 */
export async function pruneRuns(context: MaintenanceContext, options: PruneOptions): Promise<PruneResult> {
  const keepLast = Math.max(1, options.keepLast ?? 1)
  if (!Number.isInteger(keepLast)) throw new InvalidArgumentError(`keepLast must be an integer, got ${String(options.keepLast)}`)
  const olderThan = options.olderThan === undefined ? undefined : Number(options.olderThan)
  if (olderThan !== undefined && Number.isNaN(olderThan)) throw new InvalidArgumentError('olderThan must be a Date or Unix milliseconds')
  const runIds = options.runId !== undefined ? [options.runId] : await allRunIds(context)
  const total: PruneResult = { checkpointsDeleted: 0, effectsDeleted: 0 }
  const { engine, writes } = context
  for (const runId of runIds) {
    assertId(runId, 'runId')
    await writes.withRunLock(runId, async () => {
      writes.forget(runId)
      const run = await context.call(runId, 'prune', () => engine.getRun(runId))
      if (!run) return
      const history = await context.call(runId, 'prune', () => engine.listCheckpoints({ runId }))
      const doomed = history.slice(keepLast).filter((cp) => !cp.terminal && (olderThan === undefined || cp.createdAt < olderThan))
      if (doomed.length > 0) total.checkpointsDeleted += await context.call(runId, 'prune', () => engine.deleteCheckpoints(runId, doomed.map((cp) => cp.id)))
      if (!FINISHED_STATUSES.includes(run.status) || (olderThan !== undefined && !(run.updatedAt < olderThan))) return
      // Marked in the run's log first, so a check of the journal against the log expects the rows gone.
      await context.log.append(runId, [['pruned']])
      total.effectsDeleted += await context.call(runId, 'prune', () => engine.deleteEffects(runId))
      await context.events?.deleteRun(runId)
    })
  }
  return total
}

/** `store.rekey`: re-seal every record of the store under the key ring's writing key (see `EngineStore.rekey`). */
export async function rekeyRuns(context: MaintenanceContext, options: RekeyOptions): Promise<RekeyResult> {
  const engine = context.engine
  if (!(engine instanceof SealedEngine)) throw new InvalidArgumentError('rekey needs a store opened with keys ({ keys: [newKey, ...oldKeys] })')
  const rewrite = engine.inner.rewrite?.bind(engine.inner)
  if (!rewrite) throw new InvalidArgumentError('this store backend cannot rewrite records in place, so it cannot be rekeyed')
  const { encrypt } = engine.records.sealing
  checkEncryptionOptions(options, encrypt)
  await context.call(undefined, 'check the writing key', () => engine.checkWritingKey())
  const runIds = await allRunIds(context)
  const result: RekeyResult = { runs: 0, checkpoints: 0, items: 0, effects: 0, encrypted: { before: 'no', after: 'no' } }
  const before: EncryptionCount = { encrypted: 0, plain: 0 }
  for (const runId of runIds) {
    const { request, before: counted } = await context.writes.withRunLock(runId, async () => {
      context.writes.forget(runId)
      const row = await context.trusted(() => context.call(runId, 'check the run row', () => checkRunForRekey(engine, runId)))
      const rekeyed = await context.trusted(() => context.call(runId, 'rekey', () => rekeyRun(engine, runId, options)))
      await context.call(runId, 'rewrite records under the new key', () => rewrite(rekeyed.request))
      await context.call(runId, 'sign the run row under the new key', () => resealRun(engine, runId, row))
      await context.call(runId, "rewrite the run's events under the new key", () => context.resealEvents(runId, encrypt))
      return rekeyed
    })
    before.encrypted += counted.encrypted
    before.plain += counted.plain
    result.runs++
    result.checkpoints += request.checkpoints.length
    result.items += request.items.length
    result.effects += request.effects.length
    const rewritten = request.checkpoints.length + request.items.length + request.effects.length
    options.onProgress?.({ runId, runsDone: result.runs, runsTotal: runIds.length, rewritten })
  }
  const total = before.encrypted + before.plain
  result.encrypted = { before: encryptionState(before), after: encryptionState(encrypt ? { encrypted: total, plain: 0 } : { encrypted: 0, plain: total }) }
  return result
}

/** `store.fork`: a new run whose first checkpoint is a copy of the given one, both marked with where they came from. */
export async function forkRun(store: CheckpointStore, options: ForkOptions): Promise<CheckpointRecord> {
  const source = await store.load(options.checkpointId)
  const sourceRun = await store.getRun(source.runId)
  const forkedFrom = { runId: source.runId, checkpointId: source.id }
  const run = await store.createRun({
    ...(options.runId === undefined ? {} : { runId: options.runId }),
    name: sourceRun?.name ?? null,
    threadId: sourceRun?.threadId ?? null,
    workflowName: source.workflowName,
    configSignature: sourceRun?.configSignature ?? null,
    metadata: { ...(options.metadata ?? {}), forkedFrom },
  })
  const id = await store.save({
    runId: run.runId,
    parentId: source.id,
    kind: source.kind,
    phase: source.phase,
    schemaVersion: source.schemaVersion,
    workflowName: source.workflowName,
    metadata: { ...source.metadata, forkedFrom },
    payload: source.payload,
  })
  return store.load(id)
}

/** Every run id, listed below the signing layer (a rekey lists runs whose rows it has yet to sign). */
async function allRunIds(context: MaintenanceContext): Promise<string[]> {
  const engine = context.engine instanceof SealedEngine ? context.engine.inner : context.engine
  const runs = await allPages((before) => context.call(undefined, 'list runs', () => engine.listRuns({ limit: 500, ...(before === undefined ? {} : { before }) })), (run) => run.runId)
  return runs.map((run) => run.runId)
}
