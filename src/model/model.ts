import { encodeValue, isPassThrough, type JsonObject } from '../core/codec.js'
import { CairnError, CheckpointError } from '../core/errors.js'
import { limits } from '../core/limits.js'
import { addUsage, emptyUsage, type ContentBlock, type Message, type ModelPrices, type ModelStopReason, type ProviderMetadata, type ReasoningBlock, type TextBlock, type Usage } from './messages.js'

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

/** Something a model adapter did that the run's history should show (a fallback, say). */
export interface ModelNotice {
  /** `provider_session_reset`: the provider forgot its session, the full conversation was sent. */
  code: string
  message: string
}

/**
 * What a model streams. Providers map their wire events onto these: text deltas, reasoning
 * (text, then its opaque signature or redacted content), tool-use starts and input deltas
 * (partial JSON text), the stop reason, and usage. `textStart` and `reasoningStart` open a new
 * block (a delta with no open block of its kind opens one too); `blockMetadata` merges provider
 * metadata into the last block.
 */
export type ModelStreamEvent =
  | { type: 'messageStart' }
  | { type: 'textStart'; providerMetadata?: ProviderMetadata }
  | { type: 'textDelta'; text: string }
  | { type: 'reasoningStart'; providerMetadata?: ProviderMetadata }
  | { type: 'reasoningDelta'; text?: string; signature?: string; redactedContent?: string }
  | { type: 'toolUseStart'; toolUseId: string; name: string; providerMetadata?: ProviderMetadata }
  | { type: 'toolUseInputDelta'; toolUseId: string; delta: string }
  | { type: 'blockMetadata'; providerMetadata: ProviderMetadata }
  | { type: 'messageStop'; stopReason: ModelStopReason }
  | { type: 'usage'; usage: Usage }
  | { type: 'providerTokens'; tokens: ProviderTokens }
  | { type: 'notice'; notice: ModelNotice }

/**
 * A language model. Streaming first: `stream` yields {@link ModelStreamEvent}s; the agent
 * assembles them into the assistant message. OpenAI, Anthropic, Bedrock and AI SDK adapters
 * implement this interface.
 */
export interface Model {
  /** Identifies the model in configuration signatures (e.g. `anthropic:claude-sonnet-4`). */
  readonly modelId: string
  /** Prices used to add each call's cost to a managed run's `total_cost_usd`. */
  readonly prices?: ModelPrices | undefined
  stream(request: ModelRequest, options?: ModelCallOptions): AsyncIterable<ModelStreamEvent>
}

/** An assembled model response. */
export interface ModelResponse {
  message: Message
  stopReason: ModelStopReason
  usage: Usage
  providerTokens?: ProviderTokens
  /** What the adapter reported doing besides answering (see {@link ModelNotice}). */
  notices?: ModelNotice[]
}

/** What a {@link ModelError} knows about the failed call. */
export interface ModelErrorDetails {
  /** `openai`, `anthropic`, `ai-sdk:<provider>`. */
  provider: string
  model: string
  /** The HTTP status, when a response arrived. */
  status?: number | undefined
  /** The provider's request id, when it sent one: quote it to the provider's support. */
  requestId?: string | undefined
  /** Whether trying again later may succeed (rate limits, overload, a cut connection). */
  retryable?: boolean | undefined
  cause?: unknown
}

/**
 * A model call failed: the provider answered with an error after the client's retries, the
 * stream was cut, or its body could not be read. No part of the answer is kept: the agent adds
 * no message and the runner writes no `post_llm` checkpoint for it. The message never holds an
 * API key.
 */
export class ModelError extends CairnError {
  readonly provider: string
  readonly model: string
  readonly status: number | undefined
  readonly requestId: string | undefined
  readonly retryable: boolean

  constructor(message: string, details: ModelErrorDetails) {
    const where = [details.status === undefined ? undefined : `status ${details.status}`, details.requestId === undefined ? undefined : `request id ${details.requestId}`].filter(Boolean).join(', ')
    super('model_error', `${details.provider} model ${details.model}: ${message}${where ? ` (${where})` : ''}`, { cause: details.cause })
    this.provider = details.provider
    this.model = details.model
    this.status = details.status
    this.requestId = details.requestId
    this.retryable = details.retryable ?? false
  }
}

/** A bound of a model call (see the provider adapters' `idleTimeoutMs`, `totalTimeoutMs`, `maxOutputChars`). */
export type ModelLimit = 'idleTimeoutMs' | 'totalTimeoutMs' | 'maxOutputChars'

/**
 * A model call hit one of its bounds and was aborted: the stream went quiet for longer than
 * `idleTimeoutMs`, the call took longer than `totalTimeoutMs`, or the answer grew beyond
 * `maxOutputChars`. `limit` names the option that sets the bound. A timeout is retryable; an
 * answer that was too long is not.
 */
export class ModelLimitError extends ModelError {
  readonly limit: ModelLimit

  constructor(message: string, details: ModelErrorDetails & { limit: ModelLimit }) {
    super(message, details)
    this.limit = details.limit
  }
}

/**
 * A model's stream cannot be assembled into a message (input for a tool use it never started,
 * tool input that is not JSON, no stop reason): a fault of the model adapter, not of the call.
 * Code `model_stream_invalid`.
 */
export class ModelStreamError extends CairnError {
  constructor(message: string) {
    super('model_stream_invalid', message)
  }
}

/**
 * Assembles streamed events into a response: text and reasoning deltas are joined into their
 * blocks, tool-use input deltas are joined and parsed as JSON.
 *
 * A response Cairn could not keep is refused with a {@link ModelError} before any of it is
 * recorded: one that streams more than the `maxPayloadChars` limit (counted as it streams), one
 * whose tool calls share an id, and one the checkpoint codec refuses (a string longer than
 * `maxStringLength`, tool input nested deeper than `maxDepth`). Give `modelId` so the error
 * names the model.
 */
export class ResponseAssembler {
  readonly #content: ContentBlock[] = []
  readonly #inputs = new Map<string, { name: string; json: string; index: number }>()
  readonly #duplicates = new Set<string>()
  readonly #modelId: string
  #chars = 0
  #open: TextBlock | ReasoningBlock | undefined
  #stopReason: ModelStopReason | undefined
  readonly #usage: Usage = emptyUsage()
  #tokens: ProviderTokens | undefined
  readonly #notices: ModelNotice[] = []

  constructor(options: { modelId?: string } = {}) {
    this.#modelId = options.modelId ?? 'unknown'
  }

  add(event: ModelStreamEvent): void {
    this.#count(event)
    switch (event.type) {
      case 'textStart':
        this.#push({ text: '', ...withMetadata(event.providerMetadata) })
        break
      case 'textDelta':
        this.#text().text += event.text
        break
      case 'reasoningStart':
        this.#push({ reasoning: { text: '' }, ...withMetadata(event.providerMetadata) })
        break
      case 'reasoningDelta':
        this.#reasoning(event)
        break
      case 'toolUseStart':
        if (this.#inputs.has(event.toolUseId)) {
          this.#duplicates.add(event.toolUseId)
          break
        }
        this.#inputs.set(event.toolUseId, { name: event.name, json: '', index: this.#content.length })
        this.#push({ toolUse: { toolUseId: event.toolUseId, name: event.name, input: {} }, ...withMetadata(event.providerMetadata) })
        this.#open = undefined
        break
      case 'toolUseInputDelta': {
        const pending = this.#inputs.get(event.toolUseId)
        if (!pending) throw new ModelStreamError(`model streamed input for unknown tool use ${event.toolUseId}`)
        pending.json += event.delta
        break
      }
      case 'blockMetadata': {
        const last = this.#content[this.#content.length - 1]
        if (!last) throw new ModelStreamError('model streamed block metadata before any block')
        last.providerMetadata = mergeMetadata(last.providerMetadata, event.providerMetadata)
        break
      }
      case 'messageStop':
        this.#stopReason = event.stopReason
        break
      case 'usage':
        addUsage(this.#usage, event.usage)
        break
      case 'providerTokens':
        this.#tokens = { ...this.#tokens, ...event.tokens }
        break
      case 'notice':
        this.#notices.push(event.notice)
        break
      case 'messageStart':
        break
    }
  }

  finish(): ModelResponse {
    if (this.#duplicates.size > 0) {
      const ids = [...this.#duplicates].join(', ')
      throw this.#refusal(`the response was refused: it holds several tool calls with the same id (${ids}); a tool call id must be unique within a response`, true)
    }
    for (const [toolUseId, pending] of this.#inputs) {
      let input: unknown = {}
      if (pending.json.trim() !== '') {
        try {
          input = JSON.parse(pending.json)
        } catch {
          throw new ModelStreamError(`model streamed tool-use input for ${pending.name} (${toolUseId}) that is not valid JSON`)
        }
      }
      const block = this.#content[pending.index] as ContentBlock & { toolUse: object }
      block.toolUse = { toolUseId, name: pending.name, input: input as JsonObject }
    }
    if (this.#stopReason === undefined) throw new ModelStreamError('model stream ended without a stop reason')
    this.#assertStorable()
    const response: ModelResponse = { message: { role: 'assistant', content: this.#content }, stopReason: this.#stopReason, usage: { ...this.#usage } }
    if (this.#tokens) response.providerTokens = this.#tokens
    if (this.#notices.length > 0) response.notices = this.#notices
    return response
  }

  /** Refuse a response that grows beyond what one checkpoint may hold, before it fills memory. */
  #count(event: ModelStreamEvent): void {
    if (event.type === 'textDelta') this.#chars += event.text.length
    else if (event.type === 'toolUseInputDelta') this.#chars += event.delta.length
    else if (event.type === 'reasoningDelta') this.#chars += (event.text?.length ?? 0) + (event.signature?.length ?? 0) + (event.redactedContent?.length ?? 0)
    else return
    const { maxPayloadChars } = limits()
    if (this.#chars > maxPayloadChars) {
      throw this.#refusal(`the response streamed more than ${maxPayloadChars} characters, more than one checkpoint may hold (limit maxPayloadChars); it was not kept`, false)
    }
  }

  /** Refuse a message the checkpoint codec would refuse, so the failure is the model call's and is recorded. */
  #assertStorable(): void {
    if (isPassThrough(this.#content)) return
    try {
      encodeValue(this.#content, 'response')
    } catch (err) {
      if (!(err instanceof CheckpointError)) throw err
      throw this.#refusal(`the response cannot be stored, so it was not kept: ${err.message}`, false, err)
    }
  }

  #refusal(message: string, retryable: boolean, cause?: unknown): ModelError {
    const at = this.#modelId.indexOf(':')
    const provider = at > 0 ? this.#modelId.slice(0, at) : this.#modelId
    const model = at > 0 ? this.#modelId.slice(at + 1) : this.#modelId
    return new ModelError(message, { provider, model, retryable, cause })
  }

  #push(block: ContentBlock): void {
    this.#content.push(block)
    this.#open = 'text' in block || 'reasoning' in block ? block : undefined
  }

  #text(): TextBlock {
    if (this.#open && 'text' in this.#open) return this.#open
    const block: TextBlock = { text: '' }
    this.#push(block)
    return block
  }

  #reasoning(delta: { text?: string; signature?: string; redactedContent?: string }): void {
    let block = this.#open && 'reasoning' in this.#open ? this.#open : undefined
    if (!block) this.#push((block = { reasoning: { text: '' } }))
    if (delta.text !== undefined) block.reasoning.text += delta.text
    if (delta.signature !== undefined) block.reasoning.signature = (block.reasoning.signature ?? '') + delta.signature
    if (delta.redactedContent !== undefined) block.reasoning.redactedContent = delta.redactedContent
  }
}

function withMetadata(metadata: ProviderMetadata | undefined): { providerMetadata?: ProviderMetadata } {
  return metadata && Object.keys(metadata).length > 0 ? { providerMetadata: metadata } : {}
}

function mergeMetadata(into: ProviderMetadata | undefined, more: ProviderMetadata): ProviderMetadata {
  const merged: ProviderMetadata = { ...into }
  for (const [provider, values] of Object.entries(more)) merged[provider] = { ...merged[provider], ...values }
  return merged
}
