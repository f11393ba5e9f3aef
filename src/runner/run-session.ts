import type { JsonObject, JsonValue } from '../core/codec.js'
import { freezeDeep } from '../core/freeze.js'
import type { Agent } from '../agent/agent.js'
import type { LoopObserver } from '../agent/event-loop.js'
import { addUsage, costOf, textOf, toolUsesOf, type Message, type ToolResultBlock, type ToolUseBlock } from '../model/messages.js'
import type { ModelResponse } from '../model/model.js'
import type { CheckpointWriter } from './checkpoint-writer.js'
import type { EffectJournal } from './effect-journal.js'
import type { Emit } from './run-observer.js'
import { RUNNER_KIND, RUNNER_SCHEMA_VERSION, type RunnerPhase, type RuntimeSnapshot, type SubagentExecutionRecord } from './phases.js'
import { cloneData } from '../core/clone.js'

/**
 * One process's drive of one run: observes the agent loop's boundaries, keeps the runtime
 * snapshot, and records a checkpoint at every phase (every runner phase write is here). Durability points in sync mode: before a
 * tool batch starts (the model's response and the batch's intents, with everything staged, in
 * one commit) and when the next step starts (the batch's outcomes, before the model sees them).
 */
export class RunSession implements LoopObserver {
  readonly runtime: RuntimeSnapshot
  readonly runId: string
  readonly #agent: Agent
  readonly #writer: CheckpointWriter
  readonly #journal: EffectJournal
  readonly #sync: boolean
  readonly #emit: Emit
  /** The process writing, as the phase log names it. */
  readonly #by: string
  /** A tool batch ended since the last sync commit. */
  #batchUncommitted = false

  constructor(params: { agent: Agent; runId: string; writer: CheckpointWriter; journal: EffectJournal; runtime: RuntimeSnapshot; sync: boolean; emit?: Emit; by: string }) {
    this.#by = params.by
    this.#emit = params.emit ?? (() => {})
    this.#agent = params.agent
    this.runId = params.runId
    this.#writer = params.writer
    this.#journal = params.journal
    this.runtime = params.runtime
    this.#sync = params.sync
  }

  async stepStarted(cycleIndex: number): Promise<void> {
    this.runtime.step = cycleIndex
    this.runtime.next = 'model'
    // A light phase: the runtime it would hold is the previous stored checkpoint's (a new run's
    // `run_started`, or the `post_tool_batch` before it under async durability) or is replayed from
    // the journal on resume (sync: the model response's snapshot, tools next, with the outcomes).
    this.#notePhase('step_started', { state: this.runtime.state, message_count: this.#agent.messages.length })
    // Sync: the last tool batch's outcomes and records are durable before the model sees them.
    if (this.#sync && this.#batchUncommitted) await this.#writer.commit()
    this.#batchUncommitted = false
  }

  async beforeModel(): Promise<void> {
    this.#emit({ type: 'model_call_started', runId: this.runId, step: this.runtime.step, model: this.runtime.requested_model })
    this.#notePhase('pre_llm', { model: this.runtime.requested_model, provider: this.runtime.provider_adapter, message_count: this.#agent.messages.length })
  }

  async afterModel(_cycleIndex: number, response: ModelResponse): Promise<void> {
    const rt = this.runtime
    rt.llm_calls++
    addUsage(rt.usage, response.usage)
    const prices = this.#agent.model.prices
    const cost = prices ? costOf(response.usage, prices) : 0
    rt.total_cost_usd += cost
    rt.session_token = this.#agent.providerTokens.sessionToken ?? rt.session_token
    rt.checkpoint_token = this.#agent.providerTokens.checkpointToken ?? rt.checkpoint_token
    const toolCalls = toolUsesOf(response.message).length
    rt.pending_llm_response = response.stopReason === 'tool_use' && toolCalls > 0 ? response.message : null
    rt.next = rt.pending_llm_response ? 'tools' : 'model'
    rt.final_text = textOf(response.message)
    this.#emit({ type: 'model_call_finished', runId: this.runId, step: rt.step, model: rt.requested_model, stopReason: response.stopReason, usage: { ...response.usage }, toolCalls })
    await this.#recordPhase('post_llm', {
      snapshot: true,
      payload: {
        model: rt.normalized_model,
        provider: rt.provider_adapter,
        finish_reason: response.stopReason,
        tool_call_count: toolCalls,
        session_token: rt.session_token,
        checkpoint_token: rt.checkpoint_token,
        usage: { ...response.usage },
        cost_usd: cost,
        total_cost_usd: rt.total_cost_usd,
        ...(response.notices ? { notices: response.notices.map((notice) => ({ ...notice })) } : {}),
      },
    })
  }

  async beforeTools(cycleIndex: number, toolUses: ToolUseBlock['toolUse'][]): Promise<void> {
    this.runtime.step = cycleIndex
    this.#notePhase('pre_tool_batch', { tool_call_count: toolUses.length })
    const subagents = toolUses.filter((use) => this.#agent.tools.get(use.name)?.subagent === true)
    if (subagents.length > 0) this.#notePhase('pre_subagent_batch', { subagent_call_count: subagents.length, tool_call_ids: subagents.map((u) => u.toolUseId) })
    const intents = this.#journal.intentsFor(toolUses)
    const allIdempotent = toolUses.every((use) => this.#agent.tools.get(use.name)?.idempotent === true)
    if (!this.#sync && allIdempotent) {
      // Async and every call safe to repeat: the intents go with the next background commit,
      // atomically with the model response. A crash before it lands re-runs the calls with the
      // same keys, which is what an unknown outcome of an idempotent call gets anyway.
      this.#writer.stageIntents(intents)
    } else {
      // Write-ahead: the intents, with everything staged so far (and the light phases before the
      // tools, in the phase log), are durable before any tool starts.
      await this.#writer.commit({ intents })
    }
    this.#journal.noteIntents(intents)
  }

  async afterTools(cycleIndex: number, results: ToolResultBlock['toolResult'][]): Promise<void> {
    const rt = this.runtime
    const uses = new Map(toolUsesOf(rt.pending_llm_response ?? { role: 'assistant', content: [] }).map((use) => [use.toolUseId, use]))
    // A new array, never a push: staged snapshots share the one they were given.
    rt.tool_executions = [
      ...rt.tool_executions,
      ...results.map((result) =>
        freezeDeep({
          tool_call_id: result.toolUseId,
          tool_name: uses.get(result.toolUseId)?.name ?? 'unknown',
          step: cycleIndex,
          status: result.status,
          replayed: this.#journal.wasReplayed(result.toolUseId),
          ...answerOf(this.#journal, result.toolUseId),
        }),
      ),
    ]
    rt.tool_calls += results.length
    rt.replayed_effect_count = this.#journal.replayed
    const subagentIds = [...uses.values()].filter((use) => this.#agent.tools.get(use.name)?.subagent === true).map((use) => use.toolUseId)
    rt.pending_llm_response = null
    rt.next = 'model'
    for (const id of subagentIds) {
      const use = uses.get(id)!
      const result = results.find((r) => r.toolUseId === id)
      this.noteSubagent({ tool_call_id: id, child_run_id: this.#journal.keyOf(use).replace(/[^A-Za-z0-9_.:@-]/g, '_'), agent_name: use.name, step: cycleIndex, state: result?.status === 'success' ? 'completed' : 'failed' })
    }
    if (subagentIds.length > 0) this.#notePhase('post_subagent_batch', { subagent_call_count: subagentIds.length, tool_call_ids: subagentIds }, cycleIndex)
    this.#writer.stageCompletions(this.#journal.pendingCompletions.splice(0))
    const failures = results.filter((result) => result.status === 'error').length
    // The runtime now resumes at the next step; the record belongs to this one. Async: it holds
    // the runtime snapshot a resume continues from (the model next), which a later one in the
    // same write replaces. Sync: none; the next step's commit makes the batch's outcomes durable,
    // and the model response's snapshot before them (tools next) with those outcomes is a resume
    // point that runs nothing again: a resume from it replays the batch from the journal.
    rt.step = cycleIndex + 1
    await this.#recordPhase('post_tool_batch', { payload: { tool_calls_total: rt.tool_calls, tool_failures: failures }, step: cycleIndex, snapshot: !this.#sync })
    this.#batchUncommitted = true
  }

  /**
   * The run starts (or resumes) in this process. A new run's checkpoint carries the full runtime
   * snapshot, input included; a resumed run's continues from the snapshot it was restored from.
   */
  async runStarted(params: { resumed: boolean; owner: JsonObject; answers?: JsonObject }): Promise<void> {
    const payload: JsonObject = { agent_name: this.#agent.name, resumed: params.resumed, owner: params.owner }
    // The answers a resume of a paused run was given, and by whom: the timeline's record of them.
    if (params.answers) payload.answers = params.answers
    // A new run's is stored (it holds the input); a resume's is a light phase (it continues from
    // the snapshot it was restored from).
    if (params.resumed) this.#notePhase('run_started', payload)
    else await this.#recordPhase('run_started', { payload, snapshot: true })
  }

  /** A resumed run's tool calls without results were answered as interrupted (see `repairDanglingToolUses`). */
  async danglingToolUsesRepaired(): Promise<void> {
    await this.#recordPhase('post_tool_batch', { payload: { tool_calls_total: this.runtime.tool_calls, tool_failures: 0, repaired_dangling_tool_uses: true }, snapshot: true })
  }

  /** The run waits for a human: the pending interrupts, with the snapshot a resume answers them from. */
  async runPaused(interrupts: JsonValue): Promise<void> {
    await this.#recordPhase('run_paused', { payload: { interrupts }, snapshot: true })
  }

  /** The run ended: its terminal checkpoint, holding the result (see `terminalPayload`). */
  async runFinished(payload: JsonObject): Promise<void> {
    await this.#recordPhase('run_terminal', { payload, terminal: true })
  }

  /** Record a subagent's child run. */
  noteSubagent(record: SubagentExecutionRecord): void {
    this.runtime.subagent_executions = [...this.runtime.subagent_executions, freezeDeep(record)]
  }

  /**
   * A light phase (no runtime snapshot): noted with the writer, it rides in the phase log of the
   * stored checkpoint that commits it (see `phase-log.ts`), not in a stored checkpoint of its own.
   */
  #notePhase(phase: RunnerPhase, payload: JsonObject, step = this.runtime.step): void {
    this.#writer.note({ phase, step, at: Date.now(), by: this.#by, payload })
  }

  /**
   * Every stored runner checkpoint is written here: the phase's payload, staged with the writer (which
   * commits it with the next durability point). With `snapshot`, it carries the full runtime
   * snapshot a resume continues from; `terminal` marks a finished run's last checkpoint; `step`
   * defaults to the runtime's current step.
   */
  async #recordPhase(phase: RunnerPhase, options: RecordPhaseOptions): Promise<void> {
    const snapshot = options.snapshot === true
    if (snapshot) this.refreshAgentState()
    await this.#writer.stage({
      runId: this.runId,
      kind: RUNNER_KIND,
      phase,
      schemaVersion: RUNNER_SCHEMA_VERSION,
      // When the phase happened, like its phase log's entries (an async write comes later).
      createdAt: Date.now(),
      metadata: { step: options.step ?? this.runtime.step, snapshot },
      // Object.assign, not a spread: on Node 20 a key added after a spread costs about a microsecond.
      payload: snapshot ? Object.assign({}, options.payload, { runtime: snapshotOf(this.runtime) }) : options.payload,
      ...(options.terminal === true ? { terminal: true } : {}),
    })
  }

  /** Copy the agent's current messages and state into the runtime snapshot. */
  refreshAgentState(): void {
    const parts = this.#agent.snapshotParts()
    this.runtime.messages = [...this.#agent.messages] as Message[]
    this.runtime.agent = { state: parts.state, conversation_manager: parts.conversationManager, interrupts: parts.interrupts, config: parts.config }
  }
}

/** How {@link RunSession} records a phase. */
interface RecordPhaseOptions {
  payload: JsonObject
  /** Carry the full runtime snapshot (a resume point). */
  snapshot?: boolean
  /** The run's last checkpoint (a finished run's result). */
  terminal?: boolean
  /** The step the checkpoint belongs to; the runtime's current step by default. */
  step?: number
}

/**
 * The runtime snapshot as staged. Messages and execution records are deeply frozen, and so are
 * their lists in effect: the session replaces `messages` (`refreshAgentState`, just before) and
 * the execution lists (a new array per addition) instead of changing them, so the snapshot shares
 * them (the store serializes each item once). The agent part likewise; the small mutable parts
 * are copied.
 */
function snapshotOf(runtime: RuntimeSnapshot): RuntimeSnapshot {
  return { ...runtime, usage: { ...runtime.usage }, context: cloneData(runtime.context) }
}

/** `{ answer }` for a call an operator's answer decided, else nothing. */
function answerOf(journal: EffectJournal, toolUseId: string): { answer?: 'retry' | 'skip' } {
  const answer = journal.answerOf(toolUseId)
  return answer === undefined ? {} : { answer }
}
