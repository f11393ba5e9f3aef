import type { JsonObject } from '../core/codec.js'
import { CheckpointError } from '../core/errors.js'
import { toolUsesOf } from '../model/messages.js'
import type { CheckpointRecord, CheckpointStore, EffectRecord, StoreReader } from '../store/checkpoint-store.js'
import { expandPhases, loadPhase, PHASE_LOG_KEY, storedIdOf } from './phase-log.js'
import { RUNNER_KIND, type RuntimeSnapshot } from './phases.js'

/** What {@link forkRun} takes. */
export interface ForkRunOptions {
  /** The checkpoint the new run continues from: any checkpoint of any run. */
  checkpointId: string
  /** Id of the new run; a fresh id by default. */
  runId?: string
  /** Kept with the new run, beside `forkedFrom`. */
  metadata?: JsonObject
}

/** What {@link forkRun} made. */
export interface ForkRunResult {
  runId: string
  /** The new run's first checkpoint. */
  checkpoint: CheckpointRecord
  /** The source checkpoint whose runtime snapshot the fork resumes from (runner runs). */
  snapshotFrom: string | undefined
  /** Effects copied into the fork's journal: the calls that completed before the fork point. */
  effectsCopied: number
}

/**
 * Fork a run at any of its checkpoints: a new run, resumable with `runner.resume`, whose first
 * checkpoint continues from `checkpointId`.
 *
 * For a runner run, the fork carries the newest runtime snapshot at or before that checkpoint
 * (a `pre_llm` or `post_tool_batch` checkpoint holds none of its own), so it resumes from there;
 * and the effect journal entries of the calls that had completed when the fork point was written
 * are copied into the fork, so resuming it replays those calls instead of running them again.
 * Calls that completed after the fork point are not copied: the fork runs them itself.
 * Other runs (workflows, manual agent checkpoints) hold their whole state in each checkpoint and
 * are forked with `store.fork`.
 *
 * @example
 * ```ts
 * const { runId } = await forkRun(store, { checkpointId, runId: 'try-again' })
 * await new Runner({ store }).resume(buildAgent(), { runId })
 * ```
 */
export async function forkRun(store: CheckpointStore, options: ForkRunOptions): Promise<ForkRunResult> {
  const source = await loadPhase<Record<string, unknown>>(store, options.checkpointId)
  if (source.kind !== RUNNER_KIND) {
    const checkpoint = await store.fork(options)
    return { runId: checkpoint.runId, checkpoint, snapshotFrom: undefined, effectsCopied: 0 }
  }
  const snapshot = await snapshotAtOrBefore(store, source)
  const runtime = snapshot.payload.runtime as RuntimeSnapshot
  const sourceRun = await store.getRun(source.runId)
  const forkedFrom = { runId: source.runId, checkpointId: source.id }
  const run = await store.createRun({
    ...(options.runId === undefined ? {} : { runId: options.runId }),
    status: 'paused',
    name: sourceRun?.name ?? null,
    threadId: sourceRun?.threadId ?? null,
    configSignature: sourceRun?.configSignature ?? null,
    metadata: { ...(options.metadata ?? {}), forkedFrom },
  })
  const effects = completedBefore(await store.listEffects(source.runId), runtime, source, snapshot)
  const terminal = source.phase === 'run_terminal'
  const [id] = await store.write({
    runId: run.runId,
    checkpoints: [
      {
        runId: run.runId,
        parentId: storedIdOf(source.id),
        kind: RUNNER_KIND,
        phase: source.phase,
        schemaVersion: source.schemaVersion,
        terminal,
        metadata: { ...ownMetadata(source.metadata), forkedFrom, ...(terminal ? {} : { snapshot: true, snapshotFrom: snapshot.id }) },
        payload: terminal ? source.payload : { ...source.payload, runtime },
      },
    ],
    intents: effects.map((effect) => ({ runId: run.runId, callId: effect.callId, name: effect.name, inputHash: effect.inputHash, idempotencyKey: effect.idempotencyKey })),
    completions: effects.map((effect) => ({ runId: run.runId, callId: effect.callId, status: effect.status as 'succeeded' | 'failed', output: effect.output })),
  })
  return { runId: run.runId, checkpoint: await store.load(id!), snapshotFrom: snapshot.id, effectsCopied: effects.length }
}

/** The newest checkpoint at or before `source` in its run that holds a runtime snapshot. */
export async function snapshotAtOrBefore(store: StoreReader, source: CheckpointRecord<Record<string, unknown>>): Promise<CheckpointRecord<Record<string, unknown>>> {
  if (hasRuntime(source)) return source
  // A light phase: the stored checkpoint that carries it comes first when the phase came after
  // it (its `after` log), else the ones stored before it.
  const stored = storedIdOf(source.id)
  if (stored !== source.id) {
    const carrier = await store.load<Record<string, unknown>>(stored)
    const order = expandPhases(carrier).map((phase) => phase.id)
    if (hasRuntime(carrier) && order.indexOf(source.id) > order.indexOf(stored)) return carrier
  }
  let before = stored
  for (;;) {
    const page = await store.listCheckpoints({ runId: source.runId, limit: 64, before })
    const found = page.find((info) => info.kind === RUNNER_KIND && info.metadata.snapshot === true)
    if (found) {
      const record = await store.load<Record<string, unknown>>(found.id)
      if (hasRuntime(record)) return record
    }
    const last = page[page.length - 1]
    if (page.length < 64 || !last) break
    before = last.id
  }
  const later = (await store.listCheckpoints({ runId: source.runId, limit: 10_000 })).reverse().find((info) => info.seq >= source.seq && info.id !== source.id && info.metadata.snapshot === true)
  const hint = later ? `; the nearest checkpoint that can be forked is ${later.id} (${later.phase})` : ''
  throw new CheckpointError('missing_checkpoint', `checkpoint ${source.id} of run ${source.runId} has no runtime snapshot at or before it to fork from (older checkpoints were pruned)${hint}`, {
    runId: source.runId,
    checkpointId: stored,
  })
}

/** A checkpoint's metadata without what only its own run's history means (its phase log). */
function ownMetadata(metadata: JsonObject): JsonObject {
  const { [PHASE_LOG_KEY]: _log, storedIn: _storedIn, ...own } = metadata
  return own
}

function hasRuntime(record: CheckpointRecord<Record<string, unknown>>): boolean {
  const runtime = record.payload.runtime
  return typeof runtime === 'object' && runtime !== null
}

/**
 * The journal entries of the calls that had completed at the fork point: those whose results are
 * in the snapshot's conversation; the calls of the snapshot's pending batch once that batch closed
 * (the fork point is its `post_tool_batch`, or of a later step); and any other call whose outcome
 * was recorded before the fork point was written (a snapshot older than the fork point does not
 * know of them; a resume that asks for them again replays them). Times are in milliseconds, so a
 * call that completed in the fork point's millisecond is taken as after it: the fork runs it again
 * rather than replaying a result the fork point may not have seen.
 */
function completedBefore(effects: readonly EffectRecord[], runtime: RuntimeSnapshot, source: CheckpointRecord, snapshot: CheckpointRecord): EffectRecord[] {
  const answered = new Set(runtime.messages.flatMap((message) => message.content.flatMap((block) => ('toolResult' in block ? [block.toolResult.toolUseId] : []))))
  const pending = new Set(runtime.pending_llm_response ? toolUsesOf(runtime.pending_llm_response).map((use) => use.toolUseId) : [])
  const batchClosed = source.phase === 'post_tool_batch' || source.phase === 'post_subagent_batch' || stepOf(source) > stepOf(snapshot)
  return effects.filter((effect) => {
    if (effect.status !== 'succeeded' && effect.status !== 'failed') return false
    if (answered.has(effect.callId) || (batchClosed && pending.has(effect.callId))) return true
    return effect.completedAt !== null && effect.completedAt < source.createdAt
  })
}

function stepOf(record: CheckpointRecord): number {
  const step = record.metadata.step
  return typeof step === 'number' ? step : -1
}

