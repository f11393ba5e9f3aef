import type Anthropic from '@anthropic-ai/sdk'
import type { MessageCreateParamsStreaming, RawMessageStreamEvent, ThinkingConfigParam } from '@anthropic-ai/sdk/resources/messages/messages'
import type { ModelPrices, ModelStopReason } from '../../model/messages.js'
import type { Model, ModelCallOptions, ModelRequest, ModelStreamEvent } from '../../model/model.js'
import { boundedStream, checkCallBounds, type BoundedCall } from '../call-bounds.js'
import { isAbort, STOP, toModelError, type AdapterOptions } from '../shared.js'
import { anthropicMessages, anthropicSystem, anthropicTools } from './anthropic-input.js'
import { importPeer } from '../../core/peers.js'
import { InvalidArgumentError } from '../../core/errors.js'

const anthropic = await importPeer<typeof import('@anthropic-ai/sdk')>({ name: '@anthropic-ai/sdk', neededBy: 'cairn-agents/anthropic' })

/** How to build an {@link AnthropicModel}. */
export interface AnthropicModelOptions extends AdapterOptions {
  /** The model name (`claude-sonnet-4-6`). */
  model: string
  /** A client you built; otherwise one is made from `apiKey`, `baseURL` and the retry options. */
  client?: Anthropic
  /** Defaults to the `ANTHROPIC_API_KEY` environment variable (read by the client). */
  apiKey?: string
  /** Defaults to the `ANTHROPIC_BASE_URL` environment variable, else the Anthropic API. */
  baseURL?: string
  /** Maximum output tokens of one call; 4096 unless given. */
  maxTokens?: number
  /** Extended thinking (`{ type: 'enabled', budget_tokens: 2048 }`), passed through. */
  thinking?: ThinkingConfigParam
  /** Put cache markers on the system prompt and on the tool definitions. */
  cache?: { system?: boolean; tools?: boolean }
  /** Your prices, to add each call's cost to a managed run's `total_cost_usd`. */
  prices?: ModelPrices
}

/**
 * A model on the Anthropic Messages API, streaming, on `@anthropic-ai/sdk` (its own retry loop
 * retries 408, 409, 429, 5xx and 529 overloaded answers and dropped connections, honouring
 * `retry-after`). Thinking blocks keep their signature and redacted thinking its data; both
 * are sent back unchanged. A block's `providerMetadata.anthropic.cacheControl` becomes its
 * `cache_control` marker.
 *
 * @example
 * ```ts
 * import { AnthropicModel } from 'cairn-agents/anthropic'
 * const model = new AnthropicModel({ model: 'claude-sonnet-4-6', thinking: { type: 'enabled', budget_tokens: 2048 } })
 * ```
 */
export class AnthropicModel implements Model {
  readonly modelId: string
  readonly prices: ModelPrices | undefined
  readonly #client: Anthropic
  readonly #options: AnthropicModelOptions

  constructor(options: AnthropicModelOptions) {
    if (!options?.model) throw new InvalidArgumentError("AnthropicModel needs a model name: new AnthropicModel({ model: 'claude-sonnet-4-6' })")
    checkCallBounds(options, 'AnthropicModel')
    this.#options = options
    this.#client =
      options.client ??
      new anthropic.default({
        ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
        ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
        maxRetries: options.maxRetries ?? 2,
        ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
      })
    this.modelId = `anthropic:${options.model}`
    this.prices = options.prices
  }

  /** Stream one answer, bounded by the model's `idleTimeoutMs`, `totalTimeoutMs` and `maxOutputChars`. */
  stream(request: ModelRequest, options: ModelCallOptions = {}): AsyncGenerator<ModelStreamEvent> {
    return boundedStream({ provider: 'anthropic', model: this.#options.model, bounds: this.#options, options, stream: (call) => this.#stream(request, call) })
  }

  async *#stream(request: ModelRequest, call: BoundedCall): AsyncGenerator<ModelStreamEvent> {
    const o = this.#options
    const params: MessageCreateParamsStreaming = {
      model: o.model,
      max_tokens: o.maxTokens ?? 4096,
      messages: anthropicMessages(request.messages),
      stream: true,
      ...(request.systemPrompt === undefined ? {} : { system: anthropicSystem(request.systemPrompt, o.cache?.system === true) }),
      ...(o.thinking ? { thinking: o.thinking } : {}),
      ...(request.tools.length === 0
        ? {}
        : {
            tools: anthropicTools(request.tools, o.cache?.tools === true),
            tool_choice: request.toolChoice === undefined || request.toolChoice === 'auto' ? { type: 'auto' } : request.toolChoice === 'any' ? { type: 'any' } : { type: 'tool', name: request.toolChoice.tool },
          }),
    }
    let opened: { status: number; requestId: string | undefined } | undefined
    try {
      const { data, response, request_id } = await this.#client.messages.create(params, { signal: call.signal }).withResponse()
      opened = { status: response.status, requestId: request_id ?? undefined }
      call.startIdleTimer()
      const mapper = new AnthropicStreamMapper()
      for await (const event of data) {
        call.startIdleTimer()
        yield* mapper.map(event)
      }
      if (!mapper.stopped) throw new Error('the message stream ended before message_stop')
    } catch (err) {
      if (isAbort(err, call.signal)) throw call.signal.reason ?? err
      throw toModelError(err, {
        provider: 'anthropic',
        model: o.model,
        secrets: [o.apiKey, this.#client.apiKey ?? undefined, process.env.ANTHROPIC_API_KEY],
        ...(opened ? { status: opened.status } : {}),
        ...(opened?.requestId ? { requestId: opened.requestId } : {}),
      })
    }
  }
}

/** Maps Messages API stream events onto Cairn's. */
class AnthropicStreamMapper {
  stopped = false
  /** Content block index → tool use id. */
  readonly #tools = new Map<number, string>()
  readonly #usage = { input: 0, cacheRead: 0, cacheWrite: 0, output: 0 }
  #stopReason: ModelStopReason = STOP.endTurn;

  *map(event: RawMessageStreamEvent): Generator<ModelStreamEvent> {
    switch (event.type) {
      case 'message_start': {
        const u = event.message.usage
        Object.assign(this.#usage, { input: u.input_tokens, cacheRead: u.cache_read_input_tokens ?? 0, cacheWrite: u.cache_creation_input_tokens ?? 0, output: u.output_tokens })
        yield { type: 'messageStart' }
        break
      }
      case 'content_block_start': {
        const block = event.content_block
        if (block.type === 'text') yield { type: 'textStart' }
        else if (block.type === 'thinking') yield { type: 'reasoningStart' }
        else if (block.type === 'redacted_thinking') {
          yield { type: 'reasoningStart' }
          yield { type: 'reasoningDelta', redactedContent: block.data }
        } else if (block.type === 'tool_use') {
          this.#tools.set(event.index, block.id)
          yield { type: 'toolUseStart', toolUseId: block.id, name: block.name }
        }
        break
      }
      case 'content_block_delta': {
        const delta = event.delta
        if (delta.type === 'text_delta') yield { type: 'textDelta', text: delta.text }
        else if (delta.type === 'thinking_delta') yield { type: 'reasoningDelta', text: delta.thinking }
        else if (delta.type === 'signature_delta') yield { type: 'reasoningDelta', signature: delta.signature }
        else if (delta.type === 'input_json_delta') {
          const id = this.#tools.get(event.index)
          if (id !== undefined && delta.partial_json !== '') yield { type: 'toolUseInputDelta', toolUseId: id, delta: delta.partial_json }
        }
        break
      }
      case 'message_delta': {
        const u = event.usage
        this.#usage.output = u.output_tokens
        if (typeof u.input_tokens === 'number') this.#usage.input = u.input_tokens
        if (typeof u.cache_read_input_tokens === 'number') this.#usage.cacheRead = u.cache_read_input_tokens
        if (typeof u.cache_creation_input_tokens === 'number') this.#usage.cacheWrite = u.cache_creation_input_tokens
        if (event.delta.stop_reason) this.#stopReason = stopReasonOf(event.delta.stop_reason)
        break
      }
      case 'message_stop': {
        this.stopped = true
        const u = this.#usage
        // Anthropic counts cached input apart; Cairn's inputTokens includes it.
        const input = u.input + u.cacheRead + u.cacheWrite
        yield { type: 'messageStop', stopReason: this.#stopReason }
        yield { type: 'usage', usage: { inputTokens: input, outputTokens: u.output, totalTokens: input + u.output, cacheReadInputTokens: u.cacheRead, cacheWriteInputTokens: u.cacheWrite } }
        break
      }
      default:
        break
    }
  }
}

function stopReasonOf(reason: string): ModelStopReason {
  if (reason === 'model_context_window_exceeded') return STOP.maxTokens
  return reason
}
