import { InvalidArgumentError } from '../core/errors.js'
import type { EffectCompletion, EffectCompletionResult, EffectIntent, EffectRecord, WriteBatch } from './checkpoint-store.js'
import { completionRow, decodeEffectRow } from './encoding/effect-rows.js'
import { assertId } from './encoding/validate.js'
import type { StorageEngine } from './engine/storage-engine.js'
import type { RunLog } from './run-log.js'

/** What a store's effect journal works with (see {@link EffectJournal}). */
export interface EffectJournalContext {
  engine: StorageEngine
  log: RunLog
  /** A backend call, with the store's closed check and error wrapping. */
  call<T>(runId: string | undefined, what: string, fn: () => Promise<T>): Promise<T>
  /** A read whose corrupt records are integrity failures in a keyed store. */
  trusted<T>(read: () => Promise<T>): Promise<T>
  /** A write of the store (an effects-only batch is one commit). */
  write(batch: WriteBatch): Promise<unknown>
}

/**
 * The effect journal of an engine-backed store: intents, starts and outcomes, each one commit
 * (with its entry in the run's log), and reads of effect rows checked against that log, so a row
 * put back to pending or deleted is refused, never run again.
 */
export class EffectJournal {
  readonly #ctx: EffectJournalContext

  constructor(ctx: EffectJournalContext) {
    this.#ctx = ctx
  }

  /** Mark a `pending` effect `started`, once (see `CheckpointStore.startEffect`). */
  async start(runId: string, callId: string): Promise<EffectRecord> {
    assertId(runId, 'runId')
    // A compare-and-set inside one commit: pending → started happens once.
    await this.#ctx.write({ runId, starts: [callId] })
    return (await this.#effectRow(runId, callId))!
  }

  /** An effect's row as stored now (after a write of this store), decoded. */
  async #effectRow(runId: string, callId: string): Promise<EffectRecord | undefined> {
    const [row] = await this.#ctx.call(runId, `read effect ${callId}`, () => this.#ctx.engine.listEffects(runId, [callId]))
    return row && decodeEffectRow(row)
  }

  /** An intent in a commit of its own; the row as stored after it (one more attempt when it was there). */
  async recordIntent(intent: EffectIntent): Promise<EffectRecord> {
    const runId = intent.runId
    assertId(runId, 'runId')
    await this.#ctx.write({ runId, intents: [intent] })
    return (await this.#effectRow(runId, intent.callId))!
  }

  /** An outcome in a commit of its own, with its entry in the run's log; the first outcome wins. */
  async complete(completion: EffectCompletion): Promise<EffectCompletionResult> {
    const { runId, callId } = completion
    assertId(runId, 'runId')
    const sent = completionRow(completion, runId)
    const before = await this.#effectRow(runId, callId)
    if (!before) throw new InvalidArgumentError(`run ${runId} has no intent for effect ${callId}; record the intent before the effect starts`, { runId })
    if (before.status !== 'pending' && before.status !== 'started') return { recorded: false, effect: before }
    await this.#ctx.write({ runId, completions: [completion] })
    const effect = (await this.#effectRow(runId, callId))!
    // Recorded when this outcome is the one stored (another writer's may have landed first).
    const recorded = effect.status === completion.status && effect.completedAt !== null && effect.completedAt >= sent.completedAt && sent.outputHash.includes(effect.outputHash ?? '\u0000')
    return { recorded, effect }
  }

  async get(runId: string, callId: string): Promise<EffectRecord | undefined> {
    assertId(runId, 'runId')
    const read = () => this.#ctx.call(runId, `read effect ${callId}`, () => this.#ctx.engine.listEffects(runId, [callId]))
    const [row] = await this.#ctx.trusted(() => this.#ctx.log.checkEffects(runId, read, callId))
    return row && decodeEffectRow(row)
  }

  async getMany(runId: string, callIds: readonly string[]): Promise<EffectRecord[]> {
    assertId(runId, 'runId')
    for (const callId of callIds) assertId(callId, 'callId')
    const read = () => this.#ctx.call(runId, `read ${callIds.length} effects`, () => this.#ctx.engine.listEffects(runId, callIds))
    const rows = await this.#ctx.trusted(() => this.#ctx.log.checkEffects(runId, read, new Set(callIds)))
    // In the order given.
    const byId = new Map(rows.map((row) => [row.callId, row]))
    return callIds.flatMap((callId) => byId.get(callId) ?? []).map(decodeEffectRow)
  }

  async list(runId: string): Promise<EffectRecord[]> {
    assertId(runId, 'runId')
    // Checked against the run's log: a row put back to pending or deleted is refused, never run again.
    const rows = await this.#ctx.trusted(() => this.#ctx.log.checkEffects(runId, () => this.#ctx.call(runId, 'list effects', () => this.#ctx.engine.listEffects(runId))))
    return rows.map(decodeEffectRow)
  }
}
