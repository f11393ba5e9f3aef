import type { JsonValue } from '../core/codec.js'
import { CheckpointCorruptionError, EffectStartedError } from '../core/errors.js'
import { isDeepFrozen } from '../core/freeze.js'
import { hashValue } from '../core/hash.js'
import type { ToolResultBlock, ToolUseBlock } from '../model/messages.js'
import type { EffectCompletion, EffectIntent, EffectRecord, RunStore, WriteBatch } from '../store/checkpoint-store.js'

/** A write of the run's execution: to its run, fenced by its lease. */
export type RunWrite = (batch: Omit<WriteBatch, 'runId' | 'fence'>) => Promise<unknown>
import type { Tool } from '../tools/tool.js'
import type { RunToolCall, ToolCallOutcome, ToolExecutor } from '../tools/tool-executor.js'

type ToolUse = ToolUseBlock['toolUse']

/** What an operator answers to a call of unknown outcome: run it again, or give the model an error result. */
export type OperatorAnswer = 'retry' | 'skip'
type ToolResult = ToolResultBlock['toolResult']

/** The interrupt raised for a call that started but recorded no outcome. */
export const OUTCOME_UNKNOWN = 'effect_outcome_unknown'

/**
 * Journals every tool call of a run on its own: a write-ahead intent before the batch starts,
 * a durable "started" mark just before a non-idempotent callback runs, and the outcome after.
 * On resume a completed call is replayed from the journal; a call whose outcome is unknown is
 * re-run with the same idempotency key when its tool is idempotent, and otherwise raised as an
 * `effect_outcome_unknown` interrupt for a human to answer `'retry'` or `'skip'`.
 */
export class EffectJournal {
  /** Calls satisfied from the journal instead of running. */
  replayed = 0
  /** Outcomes of idempotent calls, written with the batch's checkpoint. */
  pendingCompletions: EffectCompletion[] = []
  readonly #store: RunStore
  readonly #write: RunWrite
  readonly #runId: string
  readonly #tools: ReadonlyMap<string, Tool>
  readonly #effects: Map<string, EffectRecord>
  /** Calls that stopped at `ctx.interrupt` (not a crash): they may run again. */
  readonly #interrupted: Set<string>
  readonly #responses: Record<string, JsonValue>
  readonly #replayedIds = new Set<string>()
  /** Calls whose effect rows were read from the store, written by an earlier execution. */
  readonly #fromEarlier: Set<string>
  /** Calls whose callback ran in this execution. */
  readonly #ranHere = new Set<string>()
  /** The operator's answers applied in this execution to calls of unknown outcome. */
  readonly #answers = new Map<string, OperatorAnswer>()

  constructor(params: {
    store: RunStore
    write: RunWrite
    runId: string
    tools: ReadonlyMap<string, Tool>
    effects: readonly EffectRecord[]
    interruptedCalls: readonly string[]
    responses: Record<string, JsonValue>
  }) {
    this.#store = params.store
    this.#write = params.write
    this.#runId = params.runId
    this.#tools = params.tools
    this.#effects = new Map(params.effects.map((effect) => [effect.callId, effect]))
    this.#fromEarlier = new Set(params.effects.map((effect) => effect.callId))
    this.#interrupted = new Set(params.interruptedCalls)
    this.#responses = params.responses
  }

  /** The idempotency key of a call: stable across every attempt of it. */
  keyOf(toolUse: ToolUse): string {
    return `${this.#runId}:${toolUse.toolUseId}`
  }

  /** Whether a call's result came from the journal. */
  wasReplayed(toolUseId: string): boolean {
    return this.#replayedIds.has(toolUseId)
  }

  /** Calls of unknown outcome this execution did not run again, on an operator's 'skip'. */
  get skipped(): number {
    let n = 0
    for (const answer of this.#answers.values()) if (answer === 'skip') n++
    return n
  }

  /** The operator's answer applied to a call of unknown outcome in this execution, if any. */
  answerOf(toolUseId: string): OperatorAnswer | undefined {
    return this.#answers.get(toolUseId)
  }

  /** Intents for the calls of a batch that have none yet (a completed call needs none). */
  intentsFor(toolUses: readonly ToolUse[]): EffectIntent[] {
    return toolUses
      .filter((use) => !this.#effects.has(use.toolUseId))
      .map((use) => ({ runId: this.#runId, callId: use.toolUseId, name: use.name, inputHash: inputHash(use), idempotencyKey: this.keyOf(use) }))
  }

  /** Remember intents that were just committed. */
  noteIntents(intents: readonly EffectIntent[]): void {
    for (const intent of intents) {
      // Spelled out, not spread: on Node 20 each key added after a spread costs about a microsecond.
      this.#effects.set(intent.callId, {
        runId: intent.runId,
        callId: intent.callId,
        name: intent.name,
        inputHash: intent.inputHash,
        idempotencyKey: intent.idempotencyKey,
        status: 'pending',
        output: undefined,
        outputHash: null,
        attempts: 1,
        startedAt: Date.now(),
        completedAt: null,
      })
    }
  }

  /** Wrap an executor so every call goes through the journal. */
  wrap(inner: ToolExecutor): ToolExecutor {
    return {
      execute: (calls, runOne) => {
        // Check the whole batch against the journal before any call of it runs.
        for (const use of calls) this.#assertSameInput(use)
        return inner.execute(calls, (use) => this.#call(use, runOne))
      },
    }
  }

  #assertSameInput(use: ToolUse): void {
    const existing = this.#effects.get(use.toolUseId)
    if (existing && existing.inputHash !== inputHash(use)) {
      throw new CheckpointCorruptionError(
        `run ${this.#runId}: tool call ${use.toolUseId} (${use.name}) was journaled with other input than the checkpoint holds now; the journal and the checkpoint disagree`,
        { runId: this.#runId },
      )
    }
  }

  async #call(use: ToolUse, runOne: RunToolCall): Promise<ToolCallOutcome> {
    const existing = this.#effects.get(use.toolUseId)
    if (existing && (existing.status === 'succeeded' || existing.status === 'failed')) return this.#replay(use, existing)
    const idempotent = this.#tools.get(use.name)?.idempotent === true
    if (existing?.status === 'started' && !idempotent && !this.#interrupted.has(use.toolUseId)) {
      const answer = this.#responses[`${use.toolUseId}:${OUTCOME_UNKNOWN}`]
      if (answer !== 'skip' && answer !== 'retry') return unknownOutcome(use, this.keyOf(use))
      this.#answers.set(use.toolUseId, answer)
      if (answer === 'skip') return this.#complete(use, skippedResult(use), true)
    }
    // A compare-and-set under this execution's lease: a call another execution started is an
    // unknown outcome, never a fresh start. A call known started here was approved to run again
    // (answered 'retry', or it stopped at ctx.interrupt): it stays started.
    if (!idempotent && existing?.status !== 'started') {
      const refused = await this.#start(use)
      if (refused) return refused
    } else if (existing && this.#ranBefore(existing)) {
      await this.#countAttempt(existing)
    }
    this.#ranHere.add(use.toolUseId)
    const outcome = await runOne(use)
    if (outcome.type === 'interrupt') {
      this.#interrupted.add(use.toolUseId)
      return outcome
    }
    return this.#complete(use, outcome.result, !idempotent)
  }

  /**
   * Whether the callback of a call about to run ran before: it is marked started (a
   * non-idempotent call answered 'retry', or one that stopped at ctx.interrupt), it ran in this
   * execution already, or it is an idempotent call an earlier execution left without an outcome.
   * (An idempotent call is not marked before it runs, which would cost a write per call: one that
   * a dead process left pending counts as having begun there, although a batch run one call at a
   * time may have died before reaching it.)
   */
  #ranBefore(existing: EffectRecord): boolean {
    if (existing.status === 'started' || this.#ranHere.has(existing.callId)) return true
    return existing.status === 'pending' && this.#fromEarlier.has(existing.callId)
  }

  /** Count one more execution of a call in its effect row, durably, before it runs again. */
  async #countAttempt(existing: EffectRecord): Promise<void> {
    const { runId, callId, name, inputHash, idempotencyKey } = existing
    // An intent for a call the journal holds counts one more attempt and changes nothing else.
    await this.#write({ intents: [{ runId, callId, name, inputHash, idempotencyKey }] })
    this.#effects.set(callId, { ...existing, attempts: existing.attempts + 1 })
  }

  /** Mark a call started; what to return instead of running it when it was not pending. */
  async #start(use: ToolUse): Promise<ToolCallOutcome | undefined> {
    try {
      await this.#write({ starts: [use.toolUseId] })
      return undefined
    } catch (err) {
      if (!(err instanceof EffectStartedError)) throw err
      const stored = await this.#store.getEffect(this.#runId, use.toolUseId)
      if (stored) this.#effects.set(use.toolUseId, stored)
      if (stored && (stored.status === 'succeeded' || stored.status === 'failed')) return this.#replay(use, stored)
      return unknownOutcome(use, this.keyOf(use))
    }
  }

  async #complete(use: ToolUse, result: ToolResult, durableNow: boolean): Promise<ToolCallOutcome> {
    const completion: EffectCompletion = { runId: this.#runId, callId: use.toolUseId, status: result.status === 'success' ? 'succeeded' : 'failed', output: result }
    if (durableNow) await this.#write({ completions: [completion] })
    else this.pendingCompletions.push(completion)
    const known = this.#effects.get(use.toolUseId)
    if (known) this.#effects.set(use.toolUseId, { ...known, status: completion.status, output: result })
    return { type: 'result', result }
  }

  #replay(use: ToolUse, effect: EffectRecord): ToolCallOutcome {
    this.replayed++
    this.#replayedIds.add(use.toolUseId)
    const result = effect.output as ToolResult | undefined
    if (!result || typeof result !== 'object' || result.toolUseId !== use.toolUseId || !Array.isArray(result.content)) {
      throw new CheckpointCorruptionError(`run ${this.#runId}: the journaled outcome of tool call ${use.toolUseId} is not a tool result`, { runId: this.#runId })
    }
    return { type: 'result', result }
  }
}

/** Input hashes of tool uses that are deeply frozen (a model response's), computed once. */
const frozenInputHashes = new WeakMap<object, string>()

/** Hash of a tool call's name and canonical input. */
export function inputHash(use: ToolUse): string {
  const known = frozenInputHashes.get(use)
  if (known !== undefined) return known
  const hash = hashValue({ name: use.name, input: use.input })
  if (isDeepFrozen(use)) frozenInputHashes.set(use, hash)
  return hash
}

function unknownOutcome(use: ToolUse, idempotencyKey: string): ToolCallOutcome {
  return {
    type: 'interrupt',
    interrupt: {
      id: `${use.toolUseId}:${OUTCOME_UNKNOWN}`,
      name: OUTCOME_UNKNOWN,
      toolUseId: use.toolUseId,
      reason: {
        message: `tool ${use.name} started before the process died and recorded no outcome; it is not idempotent, so Cairn will not run it again on its own. Answer 'retry' to run it again (idempotency key ${idempotencyKey}) or 'skip' to give the model an error result.`,
        tool: use.name,
        input: use.input,
        idempotencyKey,
      },
    },
  }
}

function skippedResult(use: ToolUse): ToolResult {
  return {
    toolUseId: use.toolUseId,
    status: 'error',
    content: [{ text: `The outcome of this ${use.name} call is unknown (the process running it died); an operator chose not to run it again.` }],
  }
}
