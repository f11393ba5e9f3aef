import { InvalidArgumentError } from '../core/errors.js'
import type { CheckpointRecord, CheckpointStore, ForkOptions, PruneOptions, PruneResult } from './checkpoint-store.js'
import type { StorageEngine } from './engine/storage-engine.js'
import type { EngineCall } from './checkpoint-reads.js'
import { pruneRun } from './prune.js'
import { assertId } from './encoding/validate.js'
import { checkEncryptionOptions, checkRunForRekey, encryptionState, rekeyRun, resealRun, type EncryptionCount, type RekeyOptions, type RekeyResult } from './trust/rekey.js'
import { SealedEngine } from './trust/sealed-engine.js'
import type { RunLog } from './run-log.js'

/** What the store's maintenance operations (prune, rekey) need of its internals. */
export interface MaintenanceContext {
  engine: StorageEngine
  call: EngineCall
  trusted: <T>(read: () => Promise<T>) => Promise<T>
  /** Runs `fn` after every write and maintenance step of the run queued before it. */
  withRunLock: <T>(runId: string, fn: () => Promise<T>) => Promise<T>
  /** Drop the writer's cached lists of the run: the next write reads them back. */
  forgetLists: (runId: string) => void
  /** The runs' logs: a prune marks the effects it deletes there first. */
  log: RunLog
  /** Rewrite a run's event log under the ring's writing key (`encrypt`) or in the clear; how many events. */
  resealEvents: (runId: string, encrypt: boolean) => Promise<number>
}

/** `store.prune`: in each run (or the one given), remove the checkpoints older than its newest `keepLast` and `olderThan`, and finished runs' old effects. */
export async function pruneRuns(context: MaintenanceContext, options: PruneOptions): Promise<PruneResult> {
  const keepLast = Math.max(1, options.keepLast ?? 1)
  if (!Number.isInteger(keepLast)) throw new InvalidArgumentError(`keepLast must be an integer, got ${String(options.keepLast)}`)
  const olderThan = options.olderThan === undefined ? undefined : Number(options.olderThan)
  if (olderThan !== undefined && Number.isNaN(olderThan)) throw new InvalidArgumentError('olderThan must be a Date or Unix milliseconds')
  const runIds = options.runId !== undefined ? [options.runId] : await allRunIds(context)
  const total: PruneResult = { checkpointsDeleted: 0, effectsDeleted: 0 }
  for (const runId of runIds) {
    assertId(runId, 'runId')
    const result = await context.withRunLock(runId, async () => {
      context.forgetLists(runId)
      return context.call(runId, 'prune', () => pruneRun(context.engine, { runId, keepLast, olderThan, markPruned: () => context.log.append(runId, [['pruned']]) }))
    })
    total.checkpointsDeleted += result.checkpointsDeleted
    total.effectsDeleted += result.effectsDeleted
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
    const { request, before: counted } = await context.withRunLock(runId, async () => {
      context.forgetLists(runId)
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
  const ids: string[] = []
  let before: string | undefined
  for (;;) {
    const page = await context.call(undefined, 'list runs', () => engine.listRuns({ limit: 500, ...(before === undefined ? {} : { before }) }))
    ids.push(...page.map((run) => run.runId))
    if (page.length < 500) return ids
    before = page[page.length - 1]?.runId
  }
}
