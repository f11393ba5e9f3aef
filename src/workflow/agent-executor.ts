import type { JsonValue } from '../core/codec.js'
import { Agent } from '../agent/agent.js'
import type { AgentResult, AgentStopReason } from '../agent/result.js'
import type { PartialAgentSnapshot } from '../agent/snapshot.js'
import type { Interrupt } from '../agent/interrupts.js'
import type { ContentBlock, Message } from '../model/messages.js'
import type { WorkflowContext } from './context.js'
import type { RequestInfoEvent } from './events.js'
import { Executor, type ExecutorState } from './executor.js'
import { InvalidArgumentError } from '../core/errors.js'

/** What an {@link AgentExecutor} sends downstream (or yields as output). Plain data. */
export interface AgentExecutorResponse {
  executorId: string
  /** The text of the agent's final message. */
  text: string
  message: Message | null
  stopReason: AgentStopReason
}

/** What an agent executor accepts: a prompt, or the response(s) of upstream agents. */
export type AgentExecutorInput = string | readonly ContentBlock[] | AgentExecutorResponse | readonly AgentExecutorResponse[]

/** What an agent executor asks when a tool interrupts the agent: answer with `{ [interruptId]: response }`. */
export interface AgentInterruptRequest {
  agentExecutorId: string
  interrupts: Interrupt[]
}

/** Options of {@link AgentExecutor}. */
export interface AgentExecutorOptions {
  /** Default `'agent'`. */
  id?: string
  /** Yield each response as a workflow output. Default: when the executor has no outgoing edges. */
  output?: boolean
}

/**
 * An agent as a workflow executor. Each delivered message is one `agent.invoke`; the response
 * goes along the executor's edges (or out as an output). The agent's conversation, state and
 * interrupts are part of every workflow checkpoint, so a resumed workflow continues the same
 * conversation. A tool interrupt becomes a `request_info` event; the answer
 * (`{ [interruptId]: response }`) resumes the agent.
 *
 * The workflow checkpoints at super steps: build the agent without `checkpointing`.
 *
 * @example
 * ```ts
 * const writer = new AgentExecutor(new Agent({ model, systemPrompt: 'Write a haiku.' }), { id: 'writer' })
 * const workflow = new WorkflowBuilder({ name: 'haiku', startExecutor: writer, store: storage }).build()
 * ```
 */
export class AgentExecutor extends Executor<AgentExecutorInput> {
  readonly agent: Agent
  readonly #output: boolean | undefined

  constructor(agent: Agent, options: AgentExecutorOptions = {}) {
    super(options.id ?? 'agent')
    if (!(agent instanceof Agent)) throw new InvalidArgumentError('AgentExecutor needs an Agent')
    if (agent.checkpointing) {
      throw new InvalidArgumentError(`agent executor ${this.id}: build the agent with checkpointing: false; the workflow checkpoints it at every super step`)
    }
    this.agent = agent
    this.#output = options.output
  }

  override async handle(input: AgentExecutorInput, ctx: WorkflowContext): Promise<void> {
    await this.#respond(await this.agent.invoke(promptOf(input), { signal: ctx.signal }), ctx)
  }

  override async handleResponse(response: unknown, _request: RequestInfoEvent, ctx: WorkflowContext): Promise<void> {
    const answers = Object.entries(response as Record<string, JsonValue>)
    const blocks = answers.map(([interruptId, answer]) => ({ interruptResponse: { interruptId, response: answer } }))
    await this.#respond(await this.agent.invoke(blocks, { signal: ctx.signal }), ctx)
  }

  override onCheckpointSave(): ExecutorState {
    return { snapshot: this.agent.takeSnapshot() }
  }

  override onCheckpointRestore(state: ExecutorState): void {
    if (state.snapshot !== undefined) this.agent.loadSnapshot(state.snapshot as PartialAgentSnapshot)
  }

  /** The agent's configuration (model, tools, system prompt) is part of the graph signature. */
  override signature(): string {
    return `AgentExecutor(${this.agent.configSignature.hash})`
  }

  async #respond(result: AgentResult, ctx: WorkflowContext): Promise<void> {
    if (result.stopReason === 'interrupt') {
      const request: AgentInterruptRequest = { agentExecutorId: this.id, interrupts: result.interrupts }
      await ctx.requestInfo(request, { responseSchema: { type: 'object' } })
      return
    }
    const response: AgentExecutorResponse = { executorId: this.id, text: result.toString(), message: result.message ?? null, stopReason: result.stopReason }
    if (this.#output ?? ctx.targetIds.length === 0) await ctx.yieldOutput(response)
    if (ctx.targetIds.length > 0) await ctx.sendMessage(response)
  }
}

function promptOf(input: AgentExecutorInput): string | readonly ContentBlock[] {
  if (typeof input === 'string') return input
  if (isResponse(input)) return input.text
  if (Array.isArray(input) && input.length > 0 && input.every(isResponse)) {
    return (input as readonly AgentExecutorResponse[]).map((r) => `${r.executorId}: ${r.text}`).join('\n\n')
  }
  return input as readonly ContentBlock[]
}

function isResponse(value: unknown): value is AgentExecutorResponse {
  return typeof value === 'object' && value !== null && typeof (value as AgentExecutorResponse).executorId === 'string' && typeof (value as AgentExecutorResponse).text === 'string'
}
