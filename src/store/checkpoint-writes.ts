import { setTimeout as sleep } from 'node:timers/promises'
import { CheckpointError, EffectStartedError, InvalidArgumentError, LeaseLostError, StoreError, type CairnError } from '../core/errors.js'
import { KeyedLock } from '../core/keyed-lock.js'
import type { CheckpointInput, EffectRecord, WriteBatch } from './checkpoint-store.js'
import { encodeBatch, type WriterState } from './encoding/batch.js'
import { completionRow, intentRow } from './encoding/effect-rows.js'
import { commitRunRow, swapPatch, toRunPatch } from './encoding/run-rows.js'
import { assertCheckpointInput, assertId, assertWellFormed } from './encoding/validate.js'
import type { Fence } from './engine/lease-engine.js'
import type { RunPatch, RunRow } from './engine/rows.js'
import { applyRunPatch } from './engine/run-patch.js'
import type { CommitRequest } from './engine/storage-engine.js'
import type { StoreCore } from './checkpoint-reads.js'
import { entriesOf, type RunLog } from './run-log.js'

const MAX_SAVE_ATTEMPTS = 12
/** How many runs a store remembers where their writes left off. */
const KEPT_RUNS = 1024

/** What the writes of a store work with (see {@link CheckpointWrites}). */
export interface WritesContext extends StoreCore {
  log: RunLog
  /** Where a writer that remembers nothing of the run goes on from (read through the store's checks). */
  writerState(runId: string): Promise<WriterState>
}

/** What a commit carries besides its checkpoints. */
interface CommitParts {
  effects: NonNullable<CommitRequest['effects']>
  change: RunPatch | undefined
  durability?: 'async'
}

/**
 * The write side of an engine-backed store: a batch of checkpoints, effect journal entries and a
 * run change, encoded and committed in one engine call, retried against concurrent writers; the
 * writes of one run in this store one after the other; and what each run's writes left off at
 * (its seq, list refs and run row), so the next save reads nothing. The cache holds refs and the
 * caller's own frozen values, never a copy of a list's items: a run that falls out, or ends, is
 * read back from its newest row's refs on its next save.
 */
export class CheckpointWrites {
  readonly #ctx: WritesContext
  readonly #cache = new Map<string, WriterState>()
  readonly #runLocks = new KeyedLock()

  constructor(ctx: WritesContext) {
    this.#ctx = ctx
  }

  /**
   * The run row as a read or a change outside a write left it; and, from a resume read, `writer`:
   * where the run's next write goes on from, kept when nothing of the run is.
   */
  seen(runId: string, run: RunRow | undefined, writer?: WriterState, terminal = false): void {
    const cached = this.#cache.get(runId)
    if (cached) cached.run = run
    else if (writer) this.#keep(runId, writer, terminal)
  }

  /** Forget where the run's writes left off (its rows were deleted or rewritten). */
  forget(runId: string): void {
    this.#cache.delete(runId)
    this.#ctx.log.forget(runId)
  }

  /** Once every write in flight has settled. */
  async settled(): Promise<void> {
    await this.#runLocks.idle()
  }

  /** A write of effects (and a run change) under `fence`, without checkpoints. */
  async effects(runId: string, { runPatch, effects = {} }: Pick<CommitRequest, 'effects' | 'runPatch'>, fence: Fence): Promise<{ cancelRequested: boolean }> {
    const { cancelRequested } = await this.withRunLock(runId, () => this.#commit(runId, [], { effects, change: runPatch }, fence))
    return { cancelRequested }
  }

  /** A batch in one commit (retried against concurrent writers), under `fence` when given. */
  async write(batch: WriteBatch, fence: Fence | undefined): Promise<{ ids: string[]; cancelRequested: boolean }> {
    const { runId } = batch
    assertId(runId, 'runId')
    const inputs = batch.checkpoints ?? []
    for (const input of inputs) {
      assertCheckpointInput(input)
      if (input.runId !== runId) throw new InvalidArgumentError(`a write to run ${runId} holds a checkpoint of run ${input.runId}`, { runId })
    }
    const effects = {
      intents: (batch.intents ?? []).map((intent) => intentRow(intent, runId)),
      completions: (batch.completions ?? []).map((completion) => completionRow(completion, runId)),
      ...(batch.starts === undefined || batch.starts.length === 0 ? {} : { starts: startIds(batch.starts) }),
    }
    const parts: CommitParts = { effects, change: batch.run === undefined ? undefined : toRunPatch(batch.run), ...durabilityOf(batch) }
    return this.withRunLock(runId, () => this.#commit(runId, inputs, parts, fence))
  }

  /** Run `fn` after every earlier write of the run in this store has settled. */
  withRunLock<T>(runId: string, fn: () => Promise<T>): Promise<T> {
    return this.#runLocks.run(runId, fn)
  }

  async #commit(runId: string, inputs: readonly CheckpointInput[], { effects, change, durability }: CommitParts, fence: Fence | undefined): Promise<{ ids: string[]; cancelRequested: boolean }> {
    for (let attempt = 1; attempt <= MAX_SAVE_ATTEMPTS; attempt++) {
      // An effects-only write (an effect start, an outcome, a run change) encodes nothing.
      const encoded = inputs.length === 0 ? undefined : encodeBatch(inputs, this.#cache.get(runId) ?? (await this.#ctx.writerState(runId)), this.#ctx.schemas)
      const { rows, appends, next } = encoded ?? { rows: [], appends: [], next: undefined }
      const run = commitRunRow(runId, rows[0]?.workflowName ?? null, rows[0]?.createdAt ?? Date.now(), rows.at(-1)?.seq ?? 0)
      // A run change is a compare-and-set on the row as last seen (as read, or the row this commit creates).
      const before = change && (this.#cache.get(runId)?.run ?? (await this.#ctx.call(runId, 'read run', () => this.#ctx.engine.getRun(runId))) ?? run)
      const runPatch = change && swapPatch(before!, change)
      // The run's log records the effect starts, outcomes and status change with them, in the same commit.
      const log = await this.#ctx.log.appendFor(runId, entriesOf({ effects, runPatch }))
      const request: CommitRequest = { rows, appends: log ? [...appends, log] : appends, run, effects, ...(runPatch ? { runPatch } : {}), ...(fence ? { fence } : {}), ...(durability ? { durability } : {}) }
      const result = await this.#ctx.call(runId, 'save checkpoint', () => this.#ctx.engine.commit(request))
      if (result.ok) {
        this.#ctx.log.committed(runId, log)
        const cached = this.#cache.get(runId)
        const after = before && runPatch ? applyRunPatch(before, runPatch) : cached?.run
        if (next) this.#keep(runId, { ...next, run: after }, rows.at(-1)!.terminal)
        else if (cached) cached.run = after
        return { ids: rows.map((row) => row.id), cancelRequested: result.cancelRequested === true }
      }
      if (result.reason === 'effect_not_pending') throw notPendingError(runId, result)
      this.forget(runId)
      if (result.reason === 'fenced') throw new LeaseLostError(fence!)
      if (result.reason === 'duplicate_id') throw new InvalidArgumentError(`a checkpoint id of this write already exists; omit id to get a fresh one`, { runId })
      if (result.reason === 'stale_seq' && inputs[0]?.seq !== undefined) {
        throw new CheckpointError(
          'seq_conflict',
          `run ${runId} is already at seq ${result.lastSeq}; a checkpoint with seq ${inputs[0].seq} would move its latest backwards (omit seq to append)`,
          { runId, checkpointId: rows[0]?.id },
        )
      }
      // Another writer got in first: back off with jitter so one warm writer cannot starve the other.
      await sleep(Math.random() * 2 ** attempt)
    }
    throw new StoreError(`run ${runId}: save kept conflicting with concurrent writers after ${MAX_SAVE_ATTEMPTS} attempts`, { runId })
  }

  /** Keep the run's state after a commit; a run whose newest record is terminal is forgotten. */
  #keep(runId: string, state: WriterState, terminal: boolean): void {
    this.#cache.delete(runId)
    if (terminal) return
    this.#cache.set(runId, state)
    if (this.#cache.size > KEPT_RUNS) this.#cache.delete(this.#cache.keys().next().value!)
  }
}

/** The call ids of a write's effect starts, checked. */
function startIds(starts: readonly string[]): string[] {
  for (const callId of starts) {
    if (typeof callId !== 'string' || callId === '') throw new InvalidArgumentError(`an effect start needs a call id, got ${JSON.stringify(callId)}`)
    assertWellFormed(callId, 'effect callId')
  }
  return [...starts]
}

/** The error of a commit whose effect start found the effect not `pending`. */
function notPendingError(runId: string, result: { callId: string; status: EffectRecord['status'] | null }): CairnError {
  if (result.status === null || result.status === 'pending') {
    return new InvalidArgumentError(`run ${runId} has no intent for effect ${result.callId}; record the intent before the effect starts`, { runId })
  }
  return new EffectStartedError({ runId, callId: result.callId, status: result.status })
}

/** A batch's durability for the engine: only `async` is passed on (the default is `sync`). */
function durabilityOf(batch: WriteBatch): { durability?: 'async' } {
  if (batch.durability === undefined || batch.durability === 'sync') return {}
  if (batch.durability === 'async') return { durability: 'async' }
  throw new InvalidArgumentError(`durability must be 'async' or 'sync', got ${JSON.stringify(batch.durability)}`, { runId: batch.runId })
}
