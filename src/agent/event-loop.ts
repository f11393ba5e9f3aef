import type { JsonObject, JsonValue } from '../core/codec.js'
import { CairnError } from '../core/errors.js'
import { freezeDeep } from '../core/freeze.js'
import { addUsage, toolUsesOf, type Message, type ModelStopReason, type ToolResultBlock, type ToolUseBlock } from '../model/messages.js'
import { ResponseAssembler, type Model, type ModelResponse, type ModelStreamEvent, type ProviderTokens } from '../model/model.js'
import type { AgentState, Tool, ToolTimeHost } from '../tools/tool.js'
import type { ToolExecutor } from '../tools/tool-executor.js'
import { Checkpoint, type CheckpointPosition } from './checkpoint.js'
import type { ConfigSignature } from './config-signature.js'
import type { ConversationManager } from './conversation-manager.js'
import type { AgentStreamEvent } from './events.js'
import { fireHook, type AgentHooks } from './hooks.js'
import { noInterrupts, type Interrupt, type InterruptState } from './interrupts.js'
import { AgentResult, type AgentMetrics, type AgentStopReason } from './result.js'
import { takeSnapshot } from './snapshot.js'
import { cancelledResult, runToolCall } from './tool-calls.js'

/**
 * Called at every boundary of the loop, in order, by a managed runner that persists them:
 * `stepStarted`, `beforeModel` (pre_llm), `afterModel` (post_llm: the reply is appended, its
 * tools not run), `beforeTools` (pre_tool_batch), `afterTools` (post_tool_batch: the results are
 * appended). An error thrown by the observer ends the invocation with that error.
 *
 * @internal
 */
export interface LoopObserver {
  stepStarted(cycleIndex: number): Promise<void>
  beforeModel(cycleIndex: number): Promise<void>
  afterModel(cycleIndex: number, response: ModelResponse): Promise<void>
  beforeTools(cycleIndex: number, toolUses: ToolUseBlock['toolUse'][]): Promise<void>
  afterTools(cycleIndex: number, results: ToolResultBlock['toolResult'][]): Promise<void>
}

/** The agent's parts the loop reads and changes. */
export interface LoopHost {
  observer: LoopObserver | undefined
  /** Tokens from the last model call, sent with the next (updated in place). */
  providerTokens: ProviderTokens
  model: Model
  tools: ReadonlyMap<string, Tool>
  systemPrompt: string | undefined
  hooks: readonly AgentHooks[]
  checkpointing: boolean
  executor: ToolExecutor
  conversationManager: ConversationManager
  config: ConfigSignature
  messages: Message[]
  state: AgentState
  interrupts: InterruptState
}

/** One invocation's settings and counters. */
export interface Invocation {
  signal: AbortSignal
  metrics: AgentMetrics
  requestState: Record<string, unknown> & { stopEventLoop?: boolean }
  appData: JsonObject
  /** The idempotency key of a tool call (the runner scopes it to the run). */
  idempotencyKey?: ((toolUse: ToolUseBlock['toolUse']) => string) | undefined
  /** The runner's clock and events, for `ctx.sleep` and `ctx.waitForEvent`. */
  time?: ToolTimeHost | undefined
  /** Tool call ids used before this invocation beyond those in the messages (the runner's record of every call of the run). */
  usedCallIds?: Iterable<string> | undefined
  /** Every tool call id of the conversation and of `usedCallIds`, gathered at the first model call that asks for a tool. */
  callIds?: Set<string>
  /** Structured output requested for this invocation, and what the model gave. */
  structured: { tool: Tool; value?: unknown; captured: boolean; forced: boolean } | undefined
}

/** Where the loop starts: at a model call, or at the tools of the last assistant message. @internal */
export interface LoopStart {
  phase: 'model' | 'tools'
  cycleIndex: number
  responses: Record<string, JsonValue>
}

/**
 * The agent loop: call the model; if it asks for tools, cross the `after_model` boundary, run
 * them, cross the `after_tools` boundary, and go round again. With checkpointing on, the loop
 * returns at each boundary with a checkpoint. Precedence: an interrupt, a cancel or a stop
 * signal ends the loop without a checkpoint.
 */
export async function* runLoop(host: LoopHost, inv: Invocation, start: LoopStart): AsyncGenerator<AgentStreamEvent, AgentResult> {
  let cycle = start.cycleIndex
  let phase = start.phase
  let responses = start.responses
  let assistant = lastAssistant(host.messages)
  for (;;) {
    if (phase === 'model') {
      if (inv.signal.aborted) return finish(inv, 'cancelled', assistant)
      await host.observer?.stepStarted(cycle)
      await host.observer?.beforeModel(cycle)
      const response = yield* callModelUnlessCancelled(host, inv, cycle)
      if (!response) return finish(inv, 'cancelled', assistant)
      assistant = response.message
      yield* addMessage(host, response.message)
      await host.observer?.afterModel(cycle, response)
      if (response.stopReason !== 'tool_use' || toolUsesOf(response.message).length === 0) {
        if (inv.structured && !inv.structured.captured) {
          if (inv.structured.forced) throw structuredOutputMissing(inv.structured.tool.name)
          inv.structured.forced = true
          yield* addMessage(host, { role: 'user', content: [{ text: `Call the ${inv.structured.tool.name} tool now to give your answer in the required structure.` }] })
          cycle++
          continue
        }
        return finish(inv, response.stopReason, assistant)
      }
      if (inv.signal.aborted) {
        yield* addMessage(host, toolResultsMessage(toolUsesOf(response.message).map((use) => cancelledResult(use.toolUseId))))
        return finish(inv, 'cancelled', assistant)
      }
      if (host.checkpointing) return yield* boundary(host, inv, 'after_model', cycle, assistant)
    }
    phase = 'model'
    await host.observer?.beforeTools(cycle, toolUsesOf(assistant!))
    const batch = yield* runTools(host, inv, assistant!, cycle, responses)
    responses = {}
    if (batch.interrupts.length > 0) {
      yield { type: 'interrupt', interrupts: batch.interrupts }
      return finish(inv, 'interrupt', assistant, { interrupts: batch.interrupts })
    }
    yield* addMessage(host, toolResultsMessage(batch.results))
    await host.observer?.afterTools(cycle, batch.results)
    if (inv.signal.aborted) return finish(inv, 'cancelled', assistant)
    if (inv.structured?.captured) return finish(inv, 'end_turn', assistant, { structuredOutput: inv.structured.value })
    if (inv.requestState.stopEventLoop === true) return finish(inv, 'tool_use', assistant)
    if (host.checkpointing) return yield* boundary(host, inv, 'after_tools', cycle, assistant)
    cycle++
  }
}

/** A model call that failed because the invocation was cancelled (its HTTP request aborted) ends the loop as cancelled. */
async function* callModelUnlessCancelled(host: LoopHost, inv: Invocation, cycleIndex: number): AsyncGenerator<AgentStreamEvent, ModelResponse | undefined> {
  try {
    return yield* callModel(host, inv, cycleIndex)
  } catch (err) {
    if (inv.signal.aborted) return undefined
    throw err
  }
}

async function* callModel(host: LoopHost, inv: Invocation, cycleIndex: number): AsyncGenerator<AgentStreamEvent, ModelResponse> {
  host.conversationManager.apply(host.messages)
  await fireHook(host.hooks, 'beforeModelCall', { messages: host.messages, cycleIndex })
  const tools = [...host.tools.values()].map((t) => t.spec)
  if (inv.structured) tools.push(inv.structured.tool.spec)
  const assembler = new ResponseAssembler({ modelId: host.model.modelId })
  const stream = host.model.stream(
    {
      // Messages are deeply frozen once added, so the model can be given them without a copy.
      messages: [...host.messages],
      ...(host.systemPrompt === undefined ? {} : { systemPrompt: host.systemPrompt }),
      tools,
      ...(inv.structured?.forced ? { toolChoice: { tool: inv.structured.tool.name } } : {}),
      ...(host.providerTokens.sessionToken || host.providerTokens.checkpointToken ? { providerTokens: { ...host.providerTokens } } : {}),
    },
    { signal: inv.signal },
  )
  inv.metrics.modelCalls++
  const ids = new CallIds(host, inv)
  for await (const raw of stream) {
    const event = ids.unique(raw)
    assembler.add(event)
    yield { type: 'modelEvent', cycleIndex, event }
  }
  const response = assembler.finish()
  ids.keep(response.message)
  if (response.providerTokens) Object.assign(host.providerTokens, response.providerTokens)
  inv.metrics.cycleCount++
  addUsage(inv.metrics.usage, response.usage)
  await fireHook(host.hooks, 'afterModelCall', { message: response.message, stopReason: response.stopReason, cycleIndex })
  return response
}

/**
 * The tool call ids of one model response, made unique within the run. The runner's effect
 * journal and every call's idempotency key are keyed by the call id, but some providers number
 * calls per response (`search:0` in every round) or send one constant id: a call whose id an
 * earlier call of the run used gets `_2` (or `_3`, …) appended, in every event of the stream and
 * in the message kept, so the call is run as the new call it is and its result pairs with it. A
 * response that repeats an id within itself is still refused, as before.
 */
class CallIds {
  readonly #host: LoopHost
  readonly #inv: Invocation
  /** The model's id of each call of this response, and the id it is given. */
  readonly #given = new Map<string, string>()

  constructor(host: LoopHost, inv: Invocation) {
    this.#host = host
    this.#inv = inv
  }

  unique(event: ModelStreamEvent): ModelStreamEvent {
    if (event.type === 'toolUseStart') {
      const id = this.#given.get(event.toolUseId) ?? this.#fresh(event.toolUseId)
      this.#given.set(event.toolUseId, id)
      return id === event.toolUseId ? event : { ...event, toolUseId: id }
    }
    if (event.type === 'toolUseInputDelta') {
      const id = this.#given.get(event.toolUseId)
      return id === undefined || id === event.toolUseId ? event : { ...event, toolUseId: id }
    }
    return event
  }

  /** Remember the calls of the response kept, for the next responses of the invocation. */
  keep(message: Message): void {
    if (this.#inv.callIds) for (const use of toolUsesOf(message)) this.#inv.callIds.add(use.toolUseId)
  }

  #fresh(id: string): string {
    const used = this.#used()
    if (!used.has(id)) return id
    let k = 2
    while (used.has(`${id}_${k}`) || this.#given.has(`${id}_${k}`)) k++
    return `${id}_${k}`
  }

  #used(): Set<string> {
    if (this.#inv.callIds) return this.#inv.callIds
    const used = new Set<string>(this.#inv.usedCallIds ?? [])
    for (const message of this.#host.messages) {
      for (const block of message.content) {
        if ('toolUse' in block) used.add(block.toolUse.toolUseId)
        else if ('toolResult' in block) used.add(block.toolResult.toolUseId)
      }
    }
    this.#inv.callIds = used
    return used
  }
}

async function* runTools(
  host: LoopHost,
  inv: Invocation,
  assistant: Message,
  cycleIndex: number,
  responses: Record<string, JsonValue>,
): AsyncGenerator<AgentStreamEvent, { results: ToolResultBlock['toolResult'][]; interrupts: Interrupt[] }> {
  const uses = toolUsesOf(assistant)
  const done = new Map(host.interrupts.completed.map((result) => [result.toolUseId, result]))
  const allResponses = { ...host.interrupts.responses, ...responses }
  const tools = inv.structured ? new Map([...host.tools, [inv.structured.tool.name, inv.structured.tool]]) : host.tools
  const pending = uses.filter((use) => !done.has(use.toolUseId))
  const outcomes = yield* drain<AgentStreamEvent, Awaited<ReturnType<ToolExecutor['execute']>>>((emit) => {
    const scope = {
      tools,
      hooks: host.hooks,
      signal: inv.signal,
      requestState: inv.requestState,
      agentState: host.state,
      responses: allResponses,
      pending: host.interrupts.pending,
      time: inv.time,
      metrics: inv.metrics,
      emit,
      idempotencyKey: inv.idempotencyKey,
    }
    return host.executor.execute(pending, (use) => runToolCall(scope, use))
  })
  const interrupts: Interrupt[] = []
  for (const outcome of outcomes) {
    if (outcome.type === 'result') done.set(outcome.result.toolUseId, outcome.result)
    else interrupts.push(outcome.interrupt)
  }
  host.interrupts =
    interrupts.length > 0 ? { pending: interrupts, completed: [...done.values()], responses: allResponses, cycleIndex } : noInterrupts()
  const results = uses.flatMap((use) => {
    const result = done.get(use.toolUseId)
    return result ? [result] : []
  })
  return { results, interrupts }
}

async function* boundary(host: LoopHost, inv: Invocation, position: CheckpointPosition, cycleIndex: number, assistant: Message | undefined) {
  const snapshot = takeSnapshot({
    messages: host.messages,
    state: host.state.toJSON(),
    conversationManager: host.conversationManager.getState(),
    interrupts: host.interrupts,
    config: host.config,
  })
  const checkpoint = new Checkpoint({ position, cycleIndex, snapshot, appData: structuredClone(inv.appData) })
  yield { type: 'checkpoint', checkpoint } satisfies AgentStreamEvent
  return finish(inv, 'checkpoint', assistant, { checkpoint })
}

/** Messages are deeply frozen once added, so stores serialize each one only once. */
async function* addMessage(host: LoopHost, message: Message): AsyncGenerator<AgentStreamEvent, void> {
  host.messages.push(freezeDeep(message))
  await fireHook(host.hooks, 'messageAdded', { message })
  yield { type: 'messageAdded', message }
}

function finish(
  inv: Invocation,
  stopReason: AgentStopReason | ModelStopReason,
  message: Message | undefined,
  extra: { checkpoint?: Checkpoint; interrupts?: Interrupt[]; structuredOutput?: unknown } = {},
): AgentResult {
  return new AgentResult({ stopReason, message: message && structuredClone(message), metrics: inv.metrics, ...extra })
}

function toolResultsMessage(results: ToolResultBlock['toolResult'][]): Message {
  return { role: 'user', content: results.map((toolResult) => ({ toolResult })) }
}

function lastAssistant(messages: readonly Message[]): Message | undefined {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]?.role === 'assistant') return messages[i]
  return undefined
}

function structuredOutputMissing(toolName: string): CairnError {
  return new CairnError('structured_output', `the model ended its turn without calling ${toolName}, even when required to; no structured output was produced`)
}

/**
 * Run `work`, yielding the events it emits while it runs, and return its result. Lets
 * concurrent tool calls stream their events through the loop's generator.
 */
async function* drain<E, T>(work: (emit: (event: E) => void) => Promise<T>): AsyncGenerator<E, T> {
  const queue: E[] = []
  let wake: (() => void) | undefined
  let settled = false
  const running = work((event) => {
    queue.push(event)
    wake?.()
  }).finally(() => {
    settled = true
    wake?.()
  })
  running.catch(() => {})
  for (;;) {
    while (queue.length > 0) yield queue.shift()!
    if (settled) break
    await new Promise<void>((resolve) => (wake = resolve))
    wake = undefined
  }
  return running
}
