import type {
  CheckpointInfo,
  CheckpointInput,
  CheckpointRecord,
  CheckpointStore,
  CreateRunInput,
  EffectCompletion,
  EffectCompletionResult,
  EffectIntent,
  EffectRecord,
  ForkOptions,
  LatestQuery,
  ListCheckpointsQuery,
  LoadRunQuery,
  LoadTailsQuery,
  CheckpointTail,
  OpenedRun,
  OpenRunQuery,
  ListRunsQuery,
  PendingWriteRecord,
  PruneOptions,
  PruneResult,
  PutPendingWritesInput,
  RunRecord,
  RunStore,
  StoreReader,
  UpdateRunInput,
  WriteBatch,
} from './checkpoint-store.js'
import type { RunLeases } from './leases/run-leases.js'
import type { RunEventLog } from './event-log/run-event-log.js'
import type { RunWaits } from './waits/run-waits.js'
import { InvalidArgumentError } from '../core/errors.js'

/**
 * The reads of a {@link RunStore}, forwarded to `inner`: what {@link DelegatingRunStore} and
 * `FencedStore`, views that change how an execution writes, inherit.
 */
export class DelegatingReads<S extends RunStore = RunStore> {
  protected readonly inner: S

  constructor(inner: S) {
    this.inner = inner
  }

  getRun(runId: string): Promise<RunRecord | undefined> {
    return this.inner.getRun(runId)
  }
  listRuns(query?: ListRunsQuery): Promise<RunRecord[]> {
    return this.inner.listRuns(query)
  }
  load<P = unknown>(checkpointId: string): Promise<CheckpointRecord<P>> {
    return this.inner.load<P>(checkpointId)
  }
  loadMany<P = unknown>(checkpointIds: readonly string[]): Promise<CheckpointRecord<P>[]> {
    return loadMany<P>(this.inner, checkpointIds)
  }
  loadRun<P = unknown>(runId: string, query?: LoadRunQuery): Promise<CheckpointRecord<P>[]> {
    return loadRun<P>(this.inner, runId, query)
  }
  getLatest<P = unknown>(query: LatestQuery): Promise<CheckpointRecord<P> | undefined> {
    return this.inner.getLatest<P>(query)
  }
  openRun<P = unknown>(runId: string, query?: OpenRunQuery): Promise<OpenedRun<P>> {
    return openRun<P>(this.inner, runId, query)
  }
  listCheckpoints(query?: ListCheckpointsQuery): Promise<CheckpointInfo[]> {
    return this.inner.listCheckpoints(query)
  }
  getEffect(runId: string, callId: string): Promise<EffectRecord | undefined> {
    return this.inner.getEffect(runId, callId)
  }
  listEffects(runId: string): Promise<EffectRecord[]> {
    return this.inner.listEffects(runId)
  }
}

/**
 * A {@link RunStore} that forwards every call to `inner`. Extend it to change a few methods of
 * an execution's store (stop writing after a failure, add a kill point to writes) and inherit
 * the rest.
 */
export class DelegatingRunStore<S extends RunStore = RunStore> extends DelegatingReads<S> implements RunStore {
  createRun(input?: CreateRunInput): Promise<RunRecord> {
    return this.inner.createRun(input)
  }
  updateRun(runId: string, patch: UpdateRunInput): Promise<RunRecord> {
    return this.inner.updateRun(runId, patch)
  }
  save<P>(record: CheckpointInput<P>): Promise<string> {
    return this.inner.save(record)
  }
  write(batch: WriteBatch): Promise<string[]> {
    return this.inner.write(batch)
  }
  loadTails<P = unknown>(checkpointIds: readonly string[], query: LoadTailsQuery): Promise<CheckpointTail<P>[]> {
    return loadTails<P>(this.inner, checkpointIds, query)
  }
  recordEffectIntent(intent: EffectIntent): Promise<EffectRecord> {
    return this.inner.recordEffectIntent(intent)
  }
  startEffect(runId: string, callId: string): Promise<EffectRecord> {
    return this.inner.startEffect(runId, callId)
  }
  completeEffect(completion: EffectCompletion): Promise<EffectCompletionResult> {
    return this.inner.completeEffect(completion)
  }
  async getEffects(runId: string, callIds: readonly string[]): Promise<EffectRecord[]> {
    if (this.inner.getEffects) return this.inner.getEffects(runId, callIds)
    return (await Promise.all(callIds.map((callId) => this.inner.getEffect(runId, callId)))).filter((effect) => effect !== undefined)
  }

  putPendingWrites(input: PutPendingWritesInput): Promise<void> {
    if (!this.inner.putPendingWrites) return Promise.reject(new InvalidArgumentError('the wrapped store has no place for pending writes'))
    return this.inner.putPendingWrites(input)
  }

  listPendingWrites(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRecord[]> {
    if (!this.inner.listPendingWrites) return Promise.reject(new InvalidArgumentError('the wrapped store has no place for pending writes'))
    return this.inner.listPendingWrites(runId, checkpointIds)
  }
  get leases(): RunLeases | undefined {
    return this.inner.leases
  }
  get events(): RunEventLog | undefined {
    return this.inner.events
  }
  get waits(): RunWaits | undefined {
    return this.inner.waits
  }
}

/**
 * A `CheckpointStore` that forwards every call to `inner`. Extend it to change a few methods of
 * a store (intercept run creation, add a kill point to writes) and inherit the rest.
 */
export class DelegatingStore extends DelegatingRunStore<CheckpointStore> implements CheckpointStore {
  delete(checkpointId: string): Promise<boolean> {
    return this.inner.delete(checkpointId)
  }
  deleteRun(runId: string): Promise<boolean> {
    return this.inner.deleteRun(runId)
  }
  fork(options: ForkOptions): Promise<CheckpointRecord> {
    return this.inner.fork(options)
  }
  prune(options?: PruneOptions): Promise<PruneResult> {
    return this.inner.prune(options)
  }
  close(): Promise<void> {
    return this.inner.close()
  }
}

/** `store.loadMany` when the store has it, else its records loaded one by one. */
export function loadMany<P = unknown>(store: StoreReader, checkpointIds: readonly string[]): Promise<CheckpointRecord<P>[]> {
  return store.loadMany ? store.loadMany<P>(checkpointIds) : Promise.all(checkpointIds.map((id) => store.load<P>(id)))
}

/**
 * `store.loadTails` when the store has it; else the records loaded whole (their arrays hold every
 * item, and no list is named as cut).
 */
export async function loadTails<P = unknown>(store: StoreReader, checkpointIds: readonly string[], query: LoadTailsQuery): Promise<CheckpointTail<P>[]> {
  if (store.loadTails) return store.loadTails<P>(checkpointIds, query)
  return (await loadMany<P>(store, checkpointIds)).map((record) => ({ record, lists: [] }))
}

/** `store.openRun` when the store has it, else its parts read one by one (no `base`: the caller looks for it). */
export async function openRun<P = unknown>(store: StoreReader, runId: string, query: OpenRunQuery = {}): Promise<OpenedRun<P>> {
  if (store.openRun) return store.openRun<P>(runId, query)
  const latest = await store.getLatest<P>({ runId })
  const base = latest && query.base?.(latest) ? latest : undefined
  const picked = query.effects?.({ latest, base }) ?? 'all'
  const effects = picked === 'all' || !store.getEffects ? await store.listEffects(runId) : picked.length === 0 ? [] : await store.getEffects(runId, picked)
  return { run: await store.getRun(runId), latest, base, effects }
}

/** `store.loadRun` when the store has it; else the run's checkpoints listed (verified) and loaded with {@link loadMany}. */
export async function loadRun<P = unknown>(store: StoreReader, runId: string, query: LoadRunQuery = {}): Promise<CheckpointRecord<P>[]> {
  if (store.loadRun) return store.loadRun<P>(runId, query)
  const wanted = (await allCheckpoints(store, runId)).filter((info) => query.kind === undefined || info.kind === query.kind)
  return loadMany<P>(store, wanted.map((info) => info.id))
}

/** Every checkpoint of a run, oldest first; `verify: false` lists the headers unchecked. */
export async function allCheckpoints(store: StoreReader, runId: string, { verify = true }: { verify?: boolean } = {}): Promise<CheckpointInfo[]> {
  return (await allPages((before) => store.listCheckpoints({ runId, limit: PAGE, verify, ...(before === undefined ? {} : { before }) }), (info) => info.id)).reverse()
}

const PAGE = 500

/** Every item of a listing read a page at a time, each page after the last `key` of the one before. */
export async function allPages<T>(read: (before: string | undefined) => Promise<T[]>, key: (item: T) => string): Promise<T[]> {
  const all: T[] = []
  for (let before: string | undefined; ; ) {
    const page = await read(before)
    all.push(...page)
    if (page.length < PAGE) return all
    before = key(page[page.length - 1]!)
  }
}
