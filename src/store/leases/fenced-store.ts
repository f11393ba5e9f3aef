import { CheckpointNotFoundError, InvalidArgumentError, LeaseLostError } from '../../core/errors.js'
import type { CheckpointInput, CreateRunInput, EffectCompletion, EffectCompletionResult, EffectIntent, EffectRecord } from '../checkpoint-store.js'
import type { RunRecord, RunStore, UpdateRunInput, WriteBatch } from '../checkpoint-store.js'
import { completionRow, intentRow } from '../encoding/effect-rows.js'
import type { CommitRequest } from '../engine/storage-engine.js'
import type { Fence } from '../engine/lease-engine.js'
import { DelegatingReads } from '../delegating-store.js'
import { toRunPatch } from '../encoding/run-rows.js'
import type { RunEventLog } from '../event-log/run-event-log.js'
import type { RunWaits } from '../waits/run-waits.js'
import { assertCheckpointInput, assertId } from '../encoding/validate.js'

/** What a {@link FencedStore} calls when its lease is lost or a cancel of its run was requested. */
export interface FenceHooks {
  /** The first rejected write (or `seal`): the lease is gone and nothing more will be written. */
  onLost?: (error: LeaseLostError) => void
  /** A fenced write found a cancel request on the run (see `CairnClient.cancel`). */
  onCancelRequested?: () => void
}

/** The fenced commits a {@link FencedStore} is built on (provided by `EngineStore.fenced`). */
export interface FencedCommit {
  write(batch: WriteBatch): Promise<{ ids: string[]; cancelRequested: boolean }>
  effects(runId: string, parts: Pick<CommitRequest, 'effects' | 'runPatch'>): Promise<{ cancelRequested: boolean }>
}

/**
 * A {@link CheckpointStore} whose every write is conditioned on a lease (see `EngineStore.fenced`).
 * Checkpoints it writes record the lease in their metadata (`lease: { owner, epoch }`), an audit
 * trail of which worker wrote what. Once a write is rejected, or the view is sealed, every later
 * write throws {@link LeaseLostError} without reaching the store. The view is a {@link RunStore}:
 * what an execution reads and writes; deleting, forking, pruning and closing are the store's own.
 */
export class FencedStore extends DelegatingReads implements RunStore {
  readonly fence: Fence
  /** Writes refused: the one the store rejected and every one attempted after. */
  rejectedWrites = 0
  readonly #commit: FencedCommit
  readonly #hooks: FenceHooks
  #lost: LeaseLostError | undefined

  constructor(store: RunStore, fence: Fence, commit: FencedCommit, hooks: FenceHooks = {}) {
    super(store)
    this.fence = { ...fence }
    this.#commit = commit
    this.#hooks = hooks
  }

  /** What runs wait for (timers, events, schedules): shared by every view, not fenced. */
  get waits(): RunWaits | undefined {
    return this.inner.waits
  }

  /**
   * The store's event logs. Writes stop with the view's other writes: once a write was refused
   * (or the view sealed), an append or a replace throws {@link LeaseLostError} without reaching the log.
   */
  get events(): RunEventLog | undefined {
    const log = this.inner.events
    if (!log) return undefined
    return {
      append: (runId, events, texts) => (this.#lost ? Promise.reject(this.#lost) : log.append(runId, events, texts)),
      read: (runId, options) => log.read(runId, options),
      waitForMore: (runId, after, options) => log.waitForMore(runId, after, options),
      deleteRun: (runId) => log.deleteRun(runId),
      replace: (runId, events) => (this.#lost ? Promise.reject(this.#lost) : log.replace(runId, events)),
      close: () => Promise.resolve(),
    }
  }

  /** Why writes are refused, once they are. */
  get lost(): LeaseLostError | undefined {
    return this.#lost
  }

  /** Refuse every write from now on (the worker gave the run up); calls `onLost` once. */
  seal(message: string): void {
    this.#markLost(new LeaseLostError({ ...this.fence, message }))
  }

  async createRun(input: CreateRunInput = {}): Promise<RunRecord> {
    // The lease is checked first; the run row itself is created unfenced (an empty run is harmless).
    await this.#guard(() => this.#commit.effects(this.fence.runId, {}))
    return this.inner.createRun(input)
  }

  async updateRun(runId: string, patch: UpdateRunInput): Promise<RunRecord> {
    assertId(runId, 'runId')
    const runPatch = toRunPatch(patch)
    if (runId !== this.fence.runId && !(await this.inner.getRun(runId))) {
      throw new CheckpointNotFoundError(`run ${runId} does not exist`, { runId, code: 'run_not_found' })
    }
    await this.#guard(() => this.#commit.effects(runId, { runPatch }))
    const run = await this.inner.getRun(runId)
    if (!run) throw new CheckpointNotFoundError(`run ${runId} does not exist`, { runId, code: 'run_not_found' })
    return run
  }

  async save<P>(input: CheckpointInput<P>): Promise<string> {
    assertCheckpointInput(input)
    const [id] = await this.write({ runId: input.runId, checkpoints: [input] })
    return id!
  }

  async write(batch: WriteBatch): Promise<string[]> {
    const lease = { owner: this.fence.owner, epoch: this.fence.epoch }
    const checkpoints = batch.checkpoints?.map((checkpoint) => ({ ...checkpoint, metadata: { ...checkpoint.metadata, lease } }))
    const stamped = checkpoints === undefined ? batch : { ...batch, checkpoints }
    return (await this.#guard(() => this.#commit.write(stamped))).ids
  }

  async recordEffectIntent(intent: EffectIntent): Promise<EffectRecord> {
    return this.#writeEffect(intent.runId, intent.callId, { intents: [intentRow(intent, intent.runId)] })
  }

  async startEffect(runId: string, callId: string): Promise<EffectRecord> {
    assertId(runId, 'runId')
    return this.#writeEffect(runId, callId, { starts: [callId] })
  }

  async completeEffect(completion: EffectCompletion): Promise<EffectCompletionResult> {
    const row = completionRow(completion, completion.runId)
    const before = await this.#effect(completion.runId, completion.callId)
    // The first outcome wins; only this lease's holder writes to the run, so nobody races us here.
    if (before.status === 'succeeded' || before.status === 'failed') return { recorded: false, effect: before }
    return { recorded: true, effect: await this.#writeEffect(completion.runId, completion.callId, { completions: [row] }) }
  }

  /** A fenced write of the effect `callId`'s row; the effect as stored after. */
  async #writeEffect(runId: string, callId: string, effects: NonNullable<CommitRequest['effects']>): Promise<EffectRecord> {
    await this.#guard(() => this.#commit.effects(runId, { effects }))
    return this.#effect(runId, callId)
  }

  /** Run a fenced write; a rejection marks the view lost. */
  async #guard<T extends { cancelRequested: boolean }>(write: () => Promise<T>): Promise<T> {
    try {
      if (this.#lost) throw this.#lost
      const result = await write()
      if (result.cancelRequested) this.#hooks.onCancelRequested?.()
      return result
    } catch (err) {
      if (err instanceof LeaseLostError) {
        this.rejectedWrites++
        this.#markLost(err)
      }
      throw err
    }
  }

  #markLost(error: LeaseLostError): void {
    if (this.#lost) return
    this.#lost = error
    this.#hooks.onLost?.(error)
  }

  async #effect(runId: string, callId: string): Promise<EffectRecord> {
    const effect = await this.inner.getEffect(runId, callId)
    if (!effect) {
      throw new InvalidArgumentError(`run ${runId} has no intent for effect ${callId}; record the intent before the effect starts`, { runId })
    }
    return effect
  }
}
