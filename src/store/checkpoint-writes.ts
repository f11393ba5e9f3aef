import { setTimeout as sleep } from 'node:timers/promises'
import { CheckpointError, InvalidArgumentError, LeaseLostError, StoreError } from '../core/errors.js'
import type { SchemaRegistry } from '../core/schema.js'
import type { WriteBatch } from './checkpoint-store.js'
import { encodeBatch } from './encoding/batch.js'
import { completionRow, intentRow } from './encoding/effect-rows.js'
import { WriterStates, type WriterState } from './encoding/list-cache.js'
import { swapPatch, toRunPatch } from './encoding/run-rows.js'
import { assertCheckpointInput, assertId } from './encoding/validate.js'
import type { Fence } from './engine/lease-engine.js'
import type { RunRow } from './engine/rows.js'
import { applyRunPatch } from './engine/run-patch.js'
import type { CommitRequest, StorageEngine } from './engine/storage-engine.js'
import { durabilityOf, newRunRow, notPendingError, startIds } from './commit-parts.js'
import { entriesOf, type RunLog } from './run-log.js'
import { KeyedLock } from '../core/keyed-lock.js'

const MAX_SAVE_ATTEMPTS = 12

/** What the writes of a store work with (see {@link CheckpointWrites}). */
export interface WritesContext {
  engine: StorageEngine
  schemas: SchemaRegistry
  log: RunLog
  /** A backend call, with the store's closed check and error wrapping. */
  call<T>(runId: string | undefined, what: string, fn: () => Promise<T>): Promise<T>
  /** Where a writer that remembers nothing of the run goes on from (read through the store's checks). */
  writerState(runId: string): Promise<WriterState>
}

/**
 * The write side of an engine-backed store: a batch of checkpoints, effect journal entries and a
 * run change, encoded and committed in one engine call, retried against concurrent writers; the
 * writes of one run in this store one after the other; and what each run's writes left off at
 * (its seq, list refs and run row), so the next save reads nothing. `CheckpointReads` is the
 * read side.
 */
export class CheckpointWrites {
  readonly #ctx: WritesContext
  readonly #cache = new WriterStates()
  readonly #runLocks = new KeyedLock()

  constructor(ctx: WritesContext) {
    this.#ctx = ctx
  }

  /** What a resume read of a run is where its next write goes on from (the run row as read, at least). */
  opened(runId: string, writer: WriterState | undefined, terminal: boolean, run: RunRow | undefined): void {
    const cached = this.#cache.get(runId)
    if (!cached && writer) this.#cache.set(runId, writer, terminal)
    else if (cached) cached.run = run
  }

  /** The run row as a change outside a write left it. */
  changed(runId: string, run: RunRow): void {
    const cached = this.#cache.get(runId)
    if (cached) cached.run = run
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

  /**
   * A write of effects (and a run change) under `fence`, without checkpoints: retried while
   * another writer appends to the run's log or changes its row first.
   */
  async effects(runId: string, { runPatch: change, ...parts }: Pick<CommitRequest, 'effects' | 'runPatch'>, fence: Fence): Promise<{ cancelRequested: boolean }> {
    const run = newRunRow(runId, null, Date.now(), 0)
    const result = await this.withRunLock(runId, async () => {
      for (let attempt = 1; ; attempt++) {
        const runPatch = change && swapPatch((await this.#ctx.call(runId, 'read run', () => this.#ctx.engine.getRun(runId))) ?? run, change)
        const log = await this.#ctx.log.appendFor(runId, entriesOf({ ...parts, runPatch }))
        const request: CommitRequest = { rows: [], appends: log ? [log] : [], run, fence, ...parts, ...(runPatch ? { runPatch } : {}) }
        const outcome = await this.#ctx.call(runId, 'write under a lease', () => this.#ctx.engine.commit(request))
        if (outcome.ok) this.#ctx.log.committed(runId, log)
        else this.#ctx.log.forget(runId)
        // Another writer appended to the run's log, or changed the run row: read again.
        if (outcome.ok || (outcome.reason !== 'list_conflict' && outcome.reason !== 'run_changed') || attempt === MAX_SAVE_ATTEMPTS) return outcome
      }
    })
    if (result.ok) return { cancelRequested: result.cancelRequested === true }
    if (result.reason === 'fenced') throw new LeaseLostError(fence)
    if (result.reason === 'effect_not_pending') throw notPendingError(runId, result)
    throw new StoreError(`run ${runId}: an effects-only write was refused (${result.reason})`, { runId })
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
    const change = batch.run === undefined ? undefined : toRunPatch(batch.run)
    return this.withRunLock(runId, async () => {
      for (let attempt = 1; attempt <= MAX_SAVE_ATTEMPTS; attempt++) {
        // An effects-only write (an effect start, an outcome, a run change) encodes nothing.
        const encoded = inputs.length === 0 ? undefined : encodeBatch(inputs, await this.#writerState(runId), this.#ctx.schemas)
        const { rows, appends, next } = encoded ?? { rows: [], appends: [], next: undefined }
        const run = newRunRow(runId, rows[0]?.workflowName ?? null, rows[0]?.createdAt ?? Date.now(), rows[rows.length - 1]?.seq ?? 0)
        // A run change is a compare-and-set on the row as last seen (as read, or the row this commit creates).
        const before = change && (this.#cache.get(runId)?.run ?? (await this.#ctx.call(runId, 'read run', () => this.#ctx.engine.getRun(runId))) ?? run)
        const runPatch = change && swapPatch(before!, change)
        // The run's log records the effect starts, outcomes and status change with them, in the same commit.
        const log = await this.#ctx.log.appendFor(runId, entriesOf({ effects, runPatch }))
        const request: CommitRequest = { rows, appends: log ? [...appends, log] : appends, run, effects, ...(runPatch ? { runPatch } : {}), ...(fence ? { fence } : {}), ...durabilityOf(batch) }
        const result = await this.#ctx.call(runId, 'save checkpoint', () => this.#ctx.engine.commit(request))
        if (result.ok) {
          this.#ctx.log.committed(runId, log)
          const cached = this.#cache.get(runId)
          const after = before && runPatch ? applyRunPatch(before, runPatch) : cached?.run
          if (next) this.#cache.set(runId, { ...next, run: after }, rows[rows.length - 1]!.terminal)
          else if (cached) cached.run = after
          return { ids: rows.map((row) => row.id), cancelRequested: result.cancelRequested === true }
        }
        if (result.reason === 'effect_not_pending') throw notPendingError(runId, result)
        this.#cache.delete(runId)
        this.#ctx.log.forget(runId)
        if (result.reason === 'fenced') throw new LeaseLostError(fence!)
        const explicitSeq = inputs[0]?.seq !== undefined
        if (result.reason === 'duplicate_id') {
          throw new InvalidArgumentError(`a checkpoint id of this write already exists; omit id to get a fresh one`, { runId })
        }
        if (result.reason === 'stale_seq' && explicitSeq) {
          throw new CheckpointError(
            'seq_conflict',
            `run ${runId} is already at seq ${result.lastSeq}; a checkpoint with seq ${inputs[0]?.seq} would move its latest backwards (omit seq to append)`,
            { runId, checkpointId: rows[0]?.id },
          )
        }
        // Another writer got in first: back off with jitter so one warm writer cannot starve the other.
        await sleep(Math.random() * 2 ** attempt)
      }
      throw new StoreError(`run ${runId}: save kept conflicting with concurrent writers after ${MAX_SAVE_ATTEMPTS} attempts`, { runId })
    })
  }

  /** Run `fn` after every earlier write of the run in this store has settled. */
  withRunLock<T>(runId: string, fn: () => Promise<T>): Promise<T> {
    return this.#runLocks.run(runId, fn)
  }

  async #writerState(runId: string): Promise<WriterState> {
    return this.#cache.get(runId) ?? this.#ctx.writerState(runId)
  }
}
