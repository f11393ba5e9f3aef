import type { JsonObject, JsonValue } from '../core/codec.js'
import { CairnError, CheckpointError, InvalidArgumentError } from '../core/errors.js'
import { freezeDeep } from '../core/freeze.js'
import { toolUsesOf, type Message, type ToolUseBlock } from '../model/messages.js'
import type { Model, ProviderTokens } from '../model/model.js'
import type { InputSchema } from '../tools/input-schema.js'
import { tool as defineTool, type Tool, type ToolTimeHost } from '../tools/tool.js'
import { concurrentToolExecutor, sequentialToolExecutor, type ToolExecutor } from '../tools/tool-executor.js'
import { KeyValueState } from './agent-state.js'
import type { Checkpoint } from './checkpoint.js'
import { assertSameConfig, signConfig, type ConfigSignature } from './config-signature.js'
import { NullConversationManager, type ConversationManager } from './conversation-manager.js'
import { runLoop, type Invocation, type LoopHost, type LoopObserver, type LoopStart } from './event-loop.js'
import type { AgentStreamEvent } from './events.js'
import { fireHook, type AgentHooks } from './hooks.js'
import { noInterrupts, type Interrupt, type InterruptState } from './interrupts.js'
import { parsePrompt, type AgentInput } from './prompt.js'
import { newMetrics, type AgentResult } from './result.js'
import { assertSnapshot, selectFields, SNAPSHOT_SCHEMA_VERSION, type PartialAgentSnapshot, type SnapshotField } from './snapshot.js'
import { cloneData } from '../core/clone.js'

/** How to build an {@link Agent}. */
export interface AgentOptions {
  model: Model
  /** A name for logs and run records. Default `agent`. */
  name?: string
  tools?: readonly Tool[]
  systemPrompt?: string
  /** Stop at the `after_model` and `after_tools` boundaries of tool-use cycles with a checkpoint. Default false. */
  checkpointing?: boolean
  hooks?: AgentHooks | readonly AgentHooks[]
  conversationManager?: ConversationManager
  /** How a batch of tool calls runs: `'concurrent'` (default), `'sequential'`, or your own executor. */
  toolExecution?: 'concurrent' | 'sequential' | ToolExecutor
  /** A conversation to start from. */
  messages?: readonly Message[]
  /** Initial agent state (JSON). */
  state?: JsonObject
}

/** What a managed runner passes to `agent.streamManaged`. @internal */
export interface ManagedInvocation {
  /** Where the loop starts: a model call, or the tools of the last assistant message. */
  start: LoopStart
  /** A new user message to add first (a fresh run), or none (a resume). */
  message: Message | undefined
  resumed: boolean
  observer: LoopObserver
  /** Wrap the agent's tool executor (the runner journals every call). */
  executor?: (inner: ToolExecutor) => ToolExecutor
  /** The idempotency key of a tool call, stable across attempts. */
  idempotencyKey?: (toolUse: ToolUseBlock['toolUse']) => string
  /** The runner's clock and events, for `ctx.sleep` and `ctx.waitForEvent`. */
  time?: ToolTimeHost
  /** Tool call ids the run used before, beyond those of the messages (which a conversation manager may have dropped). */
  usedCallIds?: Iterable<string>
  options?: InvokeOptions
}

/** Options of one invocation. */
export interface InvokeOptions {
  /** Cancels the invocation when aborted, like `agent.cancel()`. */
  signal?: AbortSignal
  /** Make the model answer with a value of this schema, returned as `result.structuredOutput`. */
  structuredOutputSchema?: InputSchema
  /** Resume a checkpoint written by an agent with a different configuration. Default false. */
  allowConfigChange?: boolean
  /**
   * Your own JSON, attached to any checkpoint this invocation emits. A resume carries the
   * resumed checkpoint's appData forward unless you pass another.
   */
  appData?: JsonObject
}

const STRUCTURED_OUTPUT_TOOL = 'StructuredOutput'

/**
 * An agent: a model and tools in a loop. With `checkpointing: true` it pauses at the two
 * boundaries of every tool-use cycle and returns a {@link Checkpoint}; resume it, in this
 * process or a fresh one, with `invoke([{ checkpointResume: { checkpoint } }])`.
 *
 * @example
 * ```ts
 * const agent = new Agent({ model, tools: [getWeather], checkpointing: true })
 * let result = await agent.invoke('What is the weather in Seattle?')
 * while (result.stopReason === 'checkpoint') {
 *   const persisted = JSON.stringify(result.checkpoint!.toJSON())
 *   result = await agent.invoke([{ checkpointResume: { checkpoint: JSON.parse(persisted) } }])
 * }
 * ```
 */
export class Agent {
  readonly name: string
  readonly model: Model
  readonly tools: ReadonlyMap<string, Tool>
  readonly systemPrompt: string | undefined
  readonly checkpointing: boolean
  readonly conversationManager: ConversationManager
  /** The conversation so far. Each message is deeply frozen once added: copy one to change it. */
  messages: Message[]
  /** Provider session/checkpoint tokens from the last model call, passed back on the next. */
  providerTokens: ProviderTokens = {}
  /** Persisted key-value state, also reachable from tools as `ctx.agentState`. */
  state: KeyValueState
  readonly #hooks: readonly AgentHooks[]
  readonly #executor: ToolExecutor
  readonly #config: ConfigSignature
  #interrupts: InterruptState = noInterrupts()
  #running: AbortController | undefined

  constructor(options: AgentOptions) {
    if (!options?.model || typeof options.model.stream !== 'function') throw new InvalidArgumentError('Agent needs a model with a stream() method')
    const tools = options.tools ?? []
    this.tools = new Map(tools.map((t) => [t.name, t]))
    if (this.tools.size !== tools.length) throw new InvalidArgumentError('two tools have the same name; tool names must be unique')
    this.model = options.model
    this.name = options.name ?? 'agent'
    this.systemPrompt = options.systemPrompt
    this.checkpointing = options.checkpointing ?? false
    this.conversationManager = options.conversationManager ?? new NullConversationManager()
    this.messages = structuredClone([...(options.messages ?? [])]).map(freezeDeep)
    this.state = new KeyValueState(options.state)
    this.#hooks = options.hooks === undefined ? [] : Array.isArray(options.hooks) ? (options.hooks as AgentHooks[]) : [options.hooks as AgentHooks]
    const execution = options.toolExecution ?? 'concurrent'
    this.#executor = execution === 'concurrent' ? concurrentToolExecutor : execution === 'sequential' ? sequentialToolExecutor : execution
    // Never changed after this: deeply frozen, so a snapshot can share it instead of copying it.
    this.#config = freezeDeep(signConfig({ modelId: options.model.modelId, systemPrompt: options.systemPrompt, tools }))
  }

  /** The hash of this agent's model, system prompt and tools, as stored in its checkpoints. */
  get configSignature(): ConfigSignature {
    return structuredClone(this.#config)
  }

  /** Interrupts raised by tools and waiting for `interruptResponse` blocks. */
  get pendingInterrupts(): Interrupt[] {
    return structuredClone(this.#interrupts.pending)
  }

  /** Run until the model ends its turn, a checkpoint boundary (with checkpointing), an interrupt or a cancel. */
  async invoke(prompt?: AgentInput, options: InvokeOptions = {}): Promise<AgentResult> {
    const events = this.stream(prompt, options)
    for (;;) {
      const next = await events.next()
      if (next.done) return next.value
    }
  }

  /** Like `invoke`, yielding typed events as they happen; returns the result. */
  async *stream(prompt?: AgentInput, options: InvokeOptions = {}): AsyncGenerator<AgentStreamEvent, AgentResult> {
    this.#assertIdle()
    const parsed = parsePrompt(prompt, this.checkpointing)
    const start = this.#prepare(parsed, options)
    const carried = parsed.kind === 'resume' ? parsed.checkpoint.appData : {}
    return yield* this.#drive({
      start,
      message: parsed.kind === 'message' ? parsed.message : undefined,
      resumed: parsed.kind !== 'message',
      options: { ...options, appData: options.appData ?? carried },
    })
  }

  /**
   * The loop as a managed runner drives it: the runner restores the agent with `loadSnapshot`,
   * says where to start, observes every boundary (to persist it) and wraps tool calls (to
   * journal them). Checkpointing mode is ignored: the loop runs to the end. Use `Runner` rather
   * than calling this.
   *
   * @internal
   */
  async *streamManaged(params: ManagedInvocation): AsyncGenerator<AgentStreamEvent, AgentResult> {
    this.#assertIdle()
    return yield* this.#drive({ ...params, options: params.options ?? {} })
  }

  async *#drive(params: {
    start: LoopStart
    message: Message | undefined
    resumed: boolean
    options: InvokeOptions
    observer?: LoopObserver
    executor?: (inner: ToolExecutor) => ToolExecutor
    idempotencyKey?: (toolUse: ToolUseBlock['toolUse']) => string
    time?: ToolTimeHost
    usedCallIds?: Iterable<string>
  }): AsyncGenerator<AgentStreamEvent, AgentResult> {
    const { options } = params
    const controller = new AbortController()
    const onAbort = () => controller.abort(options.signal?.reason)
    if (options.signal?.aborted) controller.abort(options.signal.reason)
    options.signal?.addEventListener('abort', onAbort, { once: true })
    this.#running = controller
    const started = Date.now()
    try {
      await fireHook(this.#hooks, 'beforeInvocation', { resumed: params.resumed })
      if (params.message) {
        this.messages.push(freezeDeep(params.message))
        await fireHook(this.#hooks, 'messageAdded', { message: params.message })
        yield { type: 'messageAdded', message: params.message }
      }
      const invocation = this.#invocation(controller.signal, options)
      invocation.idempotencyKey = params.idempotencyKey
      invocation.time = params.time
      invocation.usedCallIds = params.usedCallIds
      const host = this.#host(params.observer, params.executor)
      const result = yield* runLoop(host, invocation, params.start)
      invocation.metrics.durationMs = Date.now() - started
      await fireHook(this.#hooks, 'afterInvocation', { result })
      yield { type: 'result', result }
      return result
    } finally {
      options.signal?.removeEventListener('abort', onAbort)
      this.#running = undefined
    }
  }

  #assertIdle(): void {
    if (this.#running) throw new CairnError('agent_busy', 'this agent is already running an invocation; wait for it or use another Agent instance')
  }

  /**
   * Take a snapshot of this agent's state, e.g. to persist a conversation between sessions or
   * an interrupt waiting for a human. `include`/`exclude` pick fields (default: all, the
   * `session` preset); an empty selection is an error.
   */
  takeSnapshot(options: { preset?: 'session'; include?: readonly SnapshotField[]; exclude?: readonly SnapshotField[]; appData?: JsonObject } = {}): PartialAgentSnapshot {
    const fields = selectFields(options)
    const all = {
      messages: this.messages as unknown,
      state: this.state.toJSON(),
      conversationManager: this.conversationManager.getState(),
      interrupts: this.#interrupts,
    }
    // Messages are deeply frozen: share them (stores serialize each once); copy the rest.
    const data = Object.fromEntries(fields.map((field) => [field, field === 'messages' ? [...this.messages] : structuredClone(all[field])]))
    return {
      scope: 'agent' as const,
      schemaVersion: SNAPSHOT_SCHEMA_VERSION,
      createdAt: new Date().toISOString(),
      data: { ...data, config: structuredClone(this.#config) },
      appData: structuredClone(options.appData ?? {}),
    }
  }

  /**
   * @internal What a snapshot holds besides the messages, for the runner's runtime snapshot:
   * copies of the state, the conversation manager's state and the interrupts, and the
   * configuration signature, which never changes and is shared (deeply frozen), not copied.
   */
  snapshotParts(): { state: JsonObject; conversationManager: JsonObject; interrupts: InterruptState; config: ConfigSignature } {
    return {
      state: this.state.toJSON(),
      conversationManager: cloneData(this.conversationManager.getState()),
      interrupts: cloneData(this.#interrupts),
      config: this.#config,
    }
  }

  /**
   * Restore the fields a snapshot holds (from `takeSnapshot` or a checkpoint's snapshot). A
   * snapshot written under another configuration is a `ConfigMismatchError` unless allowed.
   */
  loadSnapshot(snapshot: PartialAgentSnapshot, options: { allowConfigChange?: boolean } = {}): void {
    if (this.#running) throw new CairnError('agent_busy', 'cannot load a snapshot while the agent is running')
    assertSnapshot(snapshot, false)
    if (options.allowConfigChange !== true) assertSameConfig(snapshot.data.config, this.#config)
    const { data } = structuredClone(snapshot)
    if (data.messages) this.messages.splice(0, this.messages.length, ...data.messages.map(freezeDeep))
    if (data.state) this.state = new KeyValueState(data.state)
    if (data.conversationManager) this.conversationManager.restoreState(data.conversationManager)
    if (data.interrupts) this.#interrupts = data.interrupts
  }

  /** Cancel the running invocation: it returns `stopReason: 'cancelled'` at the next boundary, with no checkpoint. */
  cancel(reason?: unknown): void {
    this.#running?.abort(reason)
  }

  #host(observer?: LoopObserver, wrapExecutor?: (inner: ToolExecutor) => ToolExecutor): LoopHost {
    const interrupts = {
      get: (): InterruptState => this.#interrupts,
      set: (value: InterruptState) => {
        this.#interrupts = value
      },
    }
    return {
      model: this.model,
      tools: this.tools,
      systemPrompt: this.systemPrompt,
      hooks: this.#hooks,
      checkpointing: this.checkpointing,
      executor: wrapExecutor ? wrapExecutor(this.#executor) : this.#executor,
      observer,
      providerTokens: this.providerTokens,
      conversationManager: this.conversationManager,
      config: this.#config,
      messages: this.messages,
      state: this.state,
      get interrupts() {
        return interrupts.get()
      },
      set interrupts(value: InterruptState) {
        interrupts.set(value)
      },
    }
  }

  #invocation(signal: AbortSignal, options: InvokeOptions): Invocation {
    const invocation: Invocation = { signal, metrics: newMetrics(), requestState: {}, appData: structuredClone(options.appData ?? {}), structured: undefined }
    if (options.structuredOutputSchema !== undefined) {
      const structured = { captured: false, forced: false, value: undefined as unknown, tool: undefined as unknown as Tool }
      structured.tool = defineTool({
        name: STRUCTURED_OUTPUT_TOOL,
        description: 'Give your final answer in the required structure. Call this once, with the complete answer.',
        inputSchema: options.structuredOutputSchema,
        callback: (value) => {
          structured.value = value
          structured.captured = true
          return 'Structured output recorded.'
        },
      })
      invocation.structured = structured
    }
    return invocation
  }

  #prepare(parsed: ReturnType<typeof parsePrompt>, options: InvokeOptions): LoopStart {
    switch (parsed.kind) {
      case 'resume':
        return this.#restore(parsed.checkpoint, options.allowConfigChange === true)
      case 'responses':
        return this.#answer(parsed.responses)
      case 'message':
        if (this.#interrupts.pending.length > 0) {
          const ids = this.#interrupts.pending.map((i) => i.id).join(', ')
          throw new InvalidArgumentError(`the agent is waiting for responses to interrupts ${ids}; invoke it with interruptResponse blocks`)
        }
        return { phase: 'model', cycleIndex: 0, responses: {} }
    }
  }

  #restore(checkpoint: Checkpoint, allowConfigChange: boolean): LoopStart {
    const { snapshot } = checkpoint
    assertSnapshot(snapshot)
    if (!allowConfigChange) assertSameConfig(snapshot.data.config, this.#config)
    const messages = structuredClone(snapshot.data.messages).map(freezeDeep)
    const last = messages[messages.length - 1]
    if (checkpoint.position === 'after_model' && (last?.role !== 'assistant' || toolUsesOf(last).length === 0)) {
      throw new CheckpointError('checkpoint_invalid', 'an after_model checkpoint must end with the assistant message that requested tools')
    }
    this.messages.splice(0, this.messages.length, ...messages)
    this.state = new KeyValueState(snapshot.data.state)
    this.conversationManager.restoreState(snapshot.data.conversationManager)
    this.#interrupts = structuredClone(snapshot.data.interrupts)
    return checkpoint.position === 'after_model'
      ? { phase: 'tools', cycleIndex: checkpoint.cycleIndex, responses: {} }
      : { phase: 'model', cycleIndex: checkpoint.cycleIndex + 1, responses: {} }
  }

  #answer(responses: Record<string, JsonValue>): LoopStart {
    const pending = new Set(this.#interrupts.pending.map((i) => i.id))
    if (pending.size === 0) throw new InvalidArgumentError('there are no pending interrupts to respond to')
    for (const id of Object.keys(responses)) {
      if (!pending.has(id)) throw new InvalidArgumentError(`interrupt ${id} is not pending; pending interrupts: ${[...pending].join(', ')}`)
    }
    return { phase: 'tools', cycleIndex: this.#interrupts.cycleIndex, responses }
  }
}
