import type { CheckpointInfo, CheckpointInput, CheckpointRecord, CheckpointStore, CheckpointTail, CreateRunInput, EffectCompletion, EffectCompletionResult } from './checkpoint-store.js'
import type { EffectIntent, EffectRecord, ForkOptions, LatestQuery, ListCheckpointsQuery, ListRunsQuery, LoadRunQuery, LoadTailsQuery, OpenedRun } from './checkpoint-store.js'
import type { OpenRunQuery, PendingWriteRecord, PruneOptions, PruneResult, PutPendingWritesInput, RunRecord, RunStore, StoreReader } from './checkpoint-store.js'
import type { UpdateRunInput, WriteBatch } from './checkpoint-store.js'
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
    return this.inner.loadMany<P>(checkpointIds)
  }
  loadRun<P = unknown>(runId: string, query?: LoadRunQuery): Promise<CheckpointRecord<P>[]> {
    return this.inner.loadRun<P>(runId, query)
  }
  getLatest<P = unknown>(query: LatestQuery): Promise<CheckpointRecord<P> | undefined> {
    return this.inner.getLatest<P>(query)
  }
  openRun<P = unknown>(runId: string, query?: OpenRunQuery): Promise<OpenedRun<P>> {
    return this.inner.openRun<P>(runId, query)
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
  getEffects(runId: string, callIds: readonly string[]): Promise<EffectRecord[]> {
    return this.inner.getEffects(runId, callIds)
  }
  loadTails<P = unknown>(checkpointIds: readonly string[], query: LoadTailsQuery): Promise<CheckpointTail<P>[]> {
    return this.inner.loadTails<P>(checkpointIds, query)
  }
  listPendingWrites(runId: string, checkpointIds: readonly string[]): Promise<PendingWriteRecord[]> {
    return this.inner.listPendingWrites(runId, checkpointIds)
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
  recordEffectIntent(intent: EffectIntent): Promise<EffectRecord> {
    return this.inner.recordEffectIntent(intent)
  }
  startEffect(runId: string, callId: string): Promise<EffectRecord> {
    return this.inner.startEffect(runId, callId)
  }
  completeEffect(completion: EffectCompletion): Promise<EffectCompletionResult> {
    return this.inner.completeEffect(completion)
  }
  putPendingWrites(input: PutPendingWritesInput): Promise<void> {
    if (!this.inner.putPendingWrites) return Promise.reject(new InvalidArgumentError('the wrapped store has no place for pending writes'))
    return this.inner.putPendingWrites(input)
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
