import type { JsonObject } from '../core/codec.js'
import { CairnError } from '../core/errors.js'
import type { ContentBlock, Message, ModelStopReason, Usage } from './messages.js'

/** A tool as the model sees it. */
export interface ToolSpec {
  name: string
  description: string
  /** JSON Schema of the tool's input. */
  inputSchema: JsonObject
}

/** Opaque tokens of providers that keep server-side session state; stored and passed back on resume. */
export interface ProviderTokens {
  sessionToken?: string
  checkpointToken?: string
}

/** What the agent asks of a model. */
export interface ModelRequest {
  messages: Message[]
  systemPrompt?: string
  tools: ToolSpec[]
  /** The tokens the model returned last time, if it returns any. */
  providerTokens?: ProviderTokens
  /** Force a specific tool (structured output), or let the model choose. */
  toolChoice?: { tool: string } | 'auto' | 'any'
}

/** Options of one model call. */
export interface ModelCallOptions {
  signal?: AbortSignal
}

/**
 * What a model streams. Providers map their wire events onto these: text deltas, tool-use
 * starts and input deltas (partial JSON text), the stop reason, and usage.
 */
export type ModelStreamEvent =
  | { type: 'messageStart' }
  | { type: 'textDelta'; text: string }
  | { type: 'toolUseStart'; toolUseId: string; name: string }
  | { type: 'toolUseInputDelta'; toolUseId: string; delta: string }
  | { type: 'messageStop'; stopReason: ModelStopReason }
  | { type: 'usage'; usage: Usage }
  | { type: 'providerTokens'; tokens: ProviderTokens }

/**
 * A language model. Streaming first: `stream` yields {@link ModelStreamEvent}s; the agent
 * assembles them into the assistant message. OpenAI, Anthropic, Bedrock and AI SDK adapters
 * implement this interface.
 */
export interface Model {
  /** Identifies the model in configuration signatures (e.g. `anthropic:claude-sonnet-4`). */
  readonly modelId: string
  stream(request: ModelRequest, options?: ModelCallOptions): AsyncIterable<ModelStreamEvent>
}

/** An assembled model response. */
export interface ModelResponse {
  message: Message
  stopReason: ModelStopReason
  usage: Usage
  providerTokens?: ProviderTokens
}

/** A model stream that cannot be assembled into a message. */
export class ModelStreamError extends CairnError {
  constructor(message: string) {
    super('invalid_argument', message)
  }
}

/**
 * Assembles streamed events into a response: text deltas are joined, tool-use input deltas
 * are joined and parsed as JSON.
 */
export class ResponseAssembler {
  readonly #content: ContentBlock[] = []
  readonly #inputs = new Map<string, { name: string; json: string; index: number }>()
  #text: { text: string } | undefined
  #stopReason: ModelStopReason | undefined
  readonly #usage: Usage = { inputTokens: 0, outputTokens: 0, totalTokens: 0 }
  #tokens: ProviderTokens | undefined

  add(event: ModelStreamEvent): void {
    switch (event.type) {
      case 'textDelta':
        if (!this.#text) this.#content.push((this.#text = { text: '' }))
        this.#text.text += event.text
        break
      case 'toolUseStart':
        this.#text = undefined
        this.#inputs.set(event.toolUseId, { name: event.name, json: '', index: this.#content.length })
        this.#content.push({ toolUse: { toolUseId: event.toolUseId, name: event.name, input: {} } })
        break
      case 'toolUseInputDelta': {
        const pending = this.#inputs.get(event.toolUseId)
        if (!pending) throw new ModelStreamError(`model streamed input for unknown tool use ${event.toolUseId}`)
        pending.json += event.delta
        break
      }
      case 'messageStop':
        this.#stopReason = event.stopReason
        break
      case 'usage':
        this.#usage.inputTokens += event.usage.inputTokens
        this.#usage.outputTokens += event.usage.outputTokens
        this.#usage.totalTokens += event.usage.totalTokens
        break
      case 'providerTokens':
        this.#tokens = { ...this.#tokens, ...event.tokens }
        break
      case 'messageStart':
        break
    }
  }

  finish(): ModelResponse {
    for (const [toolUseId, pending] of this.#inputs) {
      let input: unknown = {}
      if (pending.json.trim() !== '') {
        try {
          input = JSON.parse(pending.json)
        } catch {
          throw new ModelStreamError(`model streamed tool-use input for ${pending.name} (${toolUseId}) that is not valid JSON`)
        }
      }
      this.#content[pending.index] = { toolUse: { toolUseId, name: pending.name, input: input as JsonObject } }
    }
    if (this.#stopReason === undefined) throw new ModelStreamError('model stream ended without a stop reason')
    const response: ModelResponse = { message: { role: 'assistant', content: this.#content }, stopReason: this.#stopReason, usage: { ...this.#usage } }
    if (this.#tokens) response.providerTokens = this.#tokens
    return response
  }
}
