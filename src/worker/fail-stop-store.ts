import { isStoreOutage, StoreError } from '../core/errors.js'
import type {
  OpenedRun,
  OpenRunQuery,
  CheckpointInfo,
  CheckpointInput,
  CheckpointRecord,
  CreateRunInput,
  EffectCompletion,
  EffectCompletionResult,
  EffectIntent,
  EffectRecord,
  LatestQuery,
  ListCheckpointsQuery,
  ListRunsQuery,
  RunRecord,
  UpdateRunInput,
  WriteBatch,
} from '../store/checkpoint-store.js'
import { DelegatingRunStore } from '../store/delegating-store.js'
import type { FencedStore } from '../store/leases/fenced-store.js'
import { RUNNER_KIND } from '../runner/phases.js'

/**
 * The store an execution's runner (or workflow) writes through, over its fenced view: once any
 * call through it has failed because of the store (the database was away, a connection was cut),
 * every later write is refused without reaching the store. A lost lease is the fenced view's
 * business: its writes go on to the view, which refuses (and counts) them.
 *
 * Why: the runner answers an error by recording the run as `failed` (a terminal checkpoint and
 * the status), and the store is often back by then — a dropped connection fails one query, the
 * next one gets a new connection. A run would then end `failed` for an outage of a moment,
 * although its last checkpoint could be resumed by any worker. Refused, that record never lands;
 * the execution ends with the store failure, and the worker hands the run back, counting one
 * recovery (see `maxRecoveryAttempts`). For the same reason a runner's terminal checkpoint that
 * records a store failure as the run's end (a flush that timed out while the database stalled,
 * with no call failing) is refused, and stops the view too. Errors of the agent or workflow
 * itself, with the store healthy, are recorded as before.
 */
export class FailStopStore extends DelegatingRunStore<FencedStore> {
  readonly #view: FencedStore
  readonly #runId: string
  #failure: Error | undefined

  constructor(view: FencedStore) {
    super(view)
    this.#view = view
    this.#runId = view.fence.runId
  }

  /** The first store failure seen through this view, if any. */
  get failure(): Error | undefined {
    return this.#failure
  }

  override createRun(input?: CreateRunInput): Promise<RunRecord> {
    return this.#write(() => super.createRun(input))
  }
  override getRun(runId: string): Promise<RunRecord | undefined> {
    return this.#read(() => super.getRun(runId))
  }
  override listRuns(query?: ListRunsQuery): Promise<RunRecord[]> {
    return this.#read(() => super.listRuns(query))
  }
  override updateRun(runId: string, patch: UpdateRunInput): Promise<RunRecord> {
    return this.#write(() => super.updateRun(runId, patch))
  }
  override save<P>(record: CheckpointInput<P>): Promise<string> {
    return this.#write(() => super.save(record), [record])
  }
  override write(batch: WriteBatch): Promise<string[]> {
    return this.#write(() => super.write(batch), batch.checkpoints)
  }
  override load<P = unknown>(checkpointId: string): Promise<CheckpointRecord<P>> {
    return this.#read(() => super.load<P>(checkpointId))
  }
  override getLatest<P = unknown>(query: LatestQuery): Promise<CheckpointRecord<P> | undefined> {
    return this.#read(() => super.getLatest<P>(query))
  }
  override openRun<P = unknown>(runId: string, query?: OpenRunQuery): Promise<OpenedRun<P>> {
    return this.#read(() => super.openRun<P>(runId, query))
  }
  override listCheckpoints(query?: ListCheckpointsQuery): Promise<CheckpointInfo[]> {
    return this.#read(() => super.listCheckpoints(query))
  }
  override recordEffectIntent(intent: EffectIntent): Promise<EffectRecord> {
    return this.#write(() => super.recordEffectIntent(intent))
  }
  override startEffect(runId: string, callId: string): Promise<EffectRecord> {
    return this.#write(() => super.startEffect(runId, callId))
  }
  override completeEffect(completion: EffectCompletion): Promise<EffectCompletionResult> {
    return this.#write(() => super.completeEffect(completion))
  }
  override getEffect(runId: string, callId: string): Promise<EffectRecord | undefined> {
    return this.#read(() => super.getEffect(runId, callId))
  }
  override listEffects(runId: string): Promise<EffectRecord[]> {
    return this.#read(() => super.listEffects(runId))
  }

  async #read<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call()
    } catch (err) {
      if (this.#failure === undefined && isStoreOutage(err)) this.#failure = err as Error
      throw err
    }
  }

  async #write<T>(call: () => Promise<T>, checkpoints: readonly CheckpointInput[] = []): Promise<T> {
    if (this.#view.lost) return call()
    for (const checkpoint of checkpoints) this.#failure ??= storeFailureRecordedBy(checkpoint, this.#runId)
    const failure = this.#failure
    if (failure !== undefined) {
      throw new StoreError(
        `run ${this.#runId}: the store failed under this execution (${failure.message}), so it writes nothing more, not even the run's failure; ` +
          'the worker hands the run back to be resumed from its last checkpoint',
        { runId: this.#runId, cause: failure },
      )
    }
    return this.#read(call)
  }
}

/** The store failure a runner's terminal checkpoint records as the run's end, if it does. */
function storeFailureRecordedBy(checkpoint: CheckpointInput, runId: string): StoreError | undefined {
  if (checkpoint.kind !== RUNNER_KIND || checkpoint.phase !== 'run_terminal') return undefined
  const payload = checkpoint.payload as { state?: unknown; error?: { code?: unknown; message?: unknown } | null } | null
  const code = payload?.error?.code
  if (payload?.state !== 'failed' || (code !== 'store_failure' && code !== 'store_closed')) return undefined
  return new StoreError(String(payload.error?.message), { runId })
}
