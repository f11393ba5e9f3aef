import type OpenAI from 'openai'
import type { Response, ResponseCreateParamsStreaming, ResponseStreamEvent } from 'openai/resources/responses/responses'
import type { ModelPrices, ModelStopReason, Usage } from '../../model/messages.js'
import { ModelError, type Model, type ModelCallOptions, type ModelRequest, type ModelStreamEvent } from '../../model/model.js'
import { boundedStream, checkCallBounds, type BoundedCall } from '../call-bounds.js'
import { isAbort, STOP, toModelError } from '../shared.js'
import { openAIClient, secretsOf, type OpenAIModelOptions } from './client.js'
import { responsesInput } from './responses-input.js'
import { InvalidArgumentError } from '../../core/errors.js'

/** How to build an {@link OpenAIResponsesModel}. */
export interface OpenAIResponsesModelOptions extends OpenAIModelOptions {
  /**
   * Chain calls with `previous_response_id`: each call sends only what is new since the last
   * response. The response id is the run's provider session token, kept in the runtime
   * snapshot, so a resume in a fresh process continues the chain. If the server has forgotten
   * the id, the call is made once more with the full conversation, and a `provider_session_reset`
   * notice says so in the run's `post_llm` checkpoint.
   */
  stateful?: boolean
  /** Reasoning settings (`{ effort: 'low', summary: 'auto' }`), passed through. */
  reasoning?: ResponseCreateParamsStreaming['reasoning']
}

/**
 * A model on the OpenAI Responses API, streaming, on the official `openai` client (its own
 * retry loop retries 408, 409, 429 and 5xx answers and dropped connections, honouring
 * `retry-after`). Reasoning items come back as reasoning blocks with their item id and
 * encrypted content, and are sent back verbatim.
 *
 * @example
 * ```ts
 * import { OpenAIResponsesModel } from 'cairn-agents/openai'
 * const model = new OpenAIResponsesModel({ model: 'gpt-5-mini', stateful: true })
 * const agent = new Agent({ model, tools: [getWeather] })
 * ```
 */
export class OpenAIResponsesModel implements Model {
  readonly modelId: string
  readonly prices: ModelPrices | undefined
  readonly #client: OpenAI
  readonly #options: OpenAIResponsesModelOptions

  constructor(options: OpenAIResponsesModelOptions) {
    if (!options?.model) throw new InvalidArgumentError("OpenAIResponsesModel needs a model name: new OpenAIResponsesModel({ model: 'gpt-5-mini' })")
    checkCallBounds(options, 'OpenAIResponsesModel')
    this.#options = options
    this.#client = openAIClient(options)
    this.modelId = `openai:${options.model}`
    this.prices = options.prices
  }

  /** Stream one answer, bounded by the model's `idleTimeoutMs`, `totalTimeoutMs` and `maxOutputChars`. */
  stream(request: ModelRequest, options: ModelCallOptions = {}): AsyncGenerator<ModelStreamEvent> {
    return boundedStream({ provider: 'openai', model: this.#options.model, bounds: this.#options, options, stream: (call) => this.#stream(request, call) })
  }

  async *#stream(request: ModelRequest, call: BoundedCall): AsyncGenerator<ModelStreamEvent> {
    const options = { signal: call.signal }
    const previous = this.#options.stateful ? request.providerTokens?.sessionToken : undefined
    let opened: Awaited<ReturnType<OpenAIResponsesModel['open']>>
    try {
      opened = await this.open(request, previous, options.signal)
    } catch (err) {
      if (previous === undefined || !isForgottenResponse(err)) throw this.#error(err, options.signal)
      yield { type: 'notice', notice: { code: 'provider_session_reset', message: `OpenAI no longer knows response ${previous}; the full conversation was sent instead` } }
      try {
        opened = await this.open(request, undefined, options.signal)
      } catch (again) {
        throw this.#error(again, options.signal)
      }
    }
    call.startIdleTimer()
    const mapper = new ResponsesStreamMapper(this.#options.stateful === true)
    try {
      for await (const event of opened.stream) {
        call.startIdleTimer()
        yield* mapper.map(event)
      }
    } catch (err) {
      throw this.#error(err, options.signal, opened)
    }
    if (!mapper.finished) throw this.#error(new Error('the response stream ended before the response completed'), options.signal, opened)
  }

  /** Start one streaming request. */
  private async open(request: ModelRequest, previousResponseId: string | undefined, signal: AbortSignal | undefined) {
    const params: ResponseCreateParamsStreaming = {
      model: this.#options.model,
      input: responsesInput(request.messages, previousResponseId !== undefined),
      stream: true,
      store: this.#options.stateful === true,
      ...(previousResponseId === undefined ? {} : { previous_response_id: previousResponseId }),
      ...(request.systemPrompt === undefined ? {} : { instructions: request.systemPrompt }),
      ...(this.#options.maxOutputTokens === undefined ? {} : { max_output_tokens: this.#options.maxOutputTokens }),
      ...(this.#options.reasoning ? { reasoning: this.#options.reasoning } : {}),
      // Without server-side state, reasoning travels encrypted in the conversation.
      ...(this.#options.reasoning && !this.#options.stateful ? { include: ['reasoning.encrypted_content'] } : {}),
      ...(request.tools.length === 0
        ? {}
        : {
            tools: request.tools.map((t) => ({ type: 'function' as const, name: t.name, description: t.description, parameters: t.inputSchema, strict: false })),
            tool_choice: request.toolChoice === undefined || request.toolChoice === 'auto' ? 'auto' : request.toolChoice === 'any' ? 'required' : { type: 'function', name: request.toolChoice.tool },
          }),
    }
    const { data, response, request_id } = await this.#client.responses.create(params, signal ? { signal } : {}).withResponse()
    return { stream: data, status: response.status, requestId: request_id ?? undefined }
  }

  #error(err: unknown, signal: AbortSignal | undefined, opened?: { status: number; requestId: string | undefined }): unknown {
    if (isAbort(err, signal)) return signal?.reason ?? err
    return toModelError(err, { provider: 'openai', model: this.#options.model, secrets: secretsOf(this.#client, this.#options), ...(opened ? { status: opened.status, ...(opened.requestId ? { requestId: opened.requestId } : {}) } : {}) })
  }
}

/** Maps Responses stream events onto Cairn's, one event at a time. */
class ResponsesStreamMapper {
  finished = false
  readonly #stateful: boolean
  /** Function-call item id → call id. */
  readonly #calls = new Map<string, string>()
  #refused = false

  constructor(stateful: boolean) {
    this.#stateful = stateful
  }

  *map(event: ResponseStreamEvent): Generator<ModelStreamEvent> {
    switch (event.type) {
      case 'response.created':
        yield { type: 'messageStart' }
        break
      case 'response.output_item.added':
        yield* this.#itemAdded(event.item)
        break
      case 'response.output_text.delta':
        yield { type: 'textDelta', text: event.delta }
        break
      case 'response.refusal.delta':
        this.#refused = true
        yield { type: 'textDelta', text: event.delta }
        break
      case 'response.function_call_arguments.delta': {
        const callId = this.#calls.get(event.item_id)
        if (callId !== undefined) yield { type: 'toolUseInputDelta', toolUseId: callId, delta: event.delta }
        break
      }
      case 'response.reasoning_summary_part.added':
        if (event.summary_index > 0) yield { type: 'reasoningDelta', text: '\n\n' }
        break
      case 'response.reasoning_summary_text.delta':
        yield { type: 'reasoningDelta', text: event.delta }
        break
      case 'response.output_item.done':
        if (event.item.type === 'reasoning') {
          if (event.item.summary.length > 1) yield { type: 'blockMetadata', providerMetadata: { openai: { summary: event.item.summary.map((s) => s.text) } } }
          if (event.item.encrypted_content) yield { type: 'reasoningDelta', redactedContent: event.item.encrypted_content }
        }
        break
      case 'response.completed':
      case 'response.incomplete':
        yield* this.#finish(event.response)
        break
      case 'response.failed':
        throw new ModelError(`the response failed: ${event.response.error?.message ?? 'no reason given'}`, { provider: 'openai', model: event.response.model, retryable: event.response.error?.code === 'server_error' })
      case 'error':
        throw new ModelError(`the stream reported an error: ${event.message}`, { provider: 'openai', model: 'unknown', retryable: true })
      default:
        break
    }
  }

  *#itemAdded(item: Extract<ResponseStreamEvent, { type: 'response.output_item.added' }>['item']): Generator<ModelStreamEvent> {
    if (item.type === 'message') yield { type: 'textStart', providerMetadata: { openai: { itemId: item.id } } }
    else if (item.type === 'reasoning') yield { type: 'reasoningStart', providerMetadata: { openai: { itemId: item.id } } }
    else if (item.type === 'function_call') {
      this.#calls.set(item.id ?? item.call_id, item.call_id)
      yield { type: 'toolUseStart', toolUseId: item.call_id, name: item.name, ...(item.id ? { providerMetadata: { openai: { itemId: item.id } } } : {}) }
      if (item.arguments) yield { type: 'toolUseInputDelta', toolUseId: item.call_id, delta: item.arguments }
    }
  }

  *#finish(response: Response): Generator<ModelStreamEvent> {
    this.finished = true
    const hasCalls = response.output.some((item) => item.type === 'function_call')
    const incomplete = response.incomplete_details?.reason
    let stopReason: ModelStopReason = hasCalls ? STOP.toolUse : STOP.endTurn
    if (incomplete === 'max_output_tokens') stopReason = STOP.maxTokens
    else if (incomplete === 'content_filter') stopReason = STOP.contentFiltered
    else if (this.#refused) stopReason = STOP.refusal
    yield { type: 'messageStop', stopReason }
    if (response.usage) yield { type: 'usage', usage: usageOf(response.usage) }
    if (this.#stateful) yield { type: 'providerTokens', tokens: { sessionToken: response.id } }
  }
}

function usageOf(usage: NonNullable<Response['usage']>): Usage {
  return {
    inputTokens: usage.input_tokens,
    outputTokens: usage.output_tokens,
    totalTokens: usage.total_tokens,
    cacheReadInputTokens: usage.input_tokens_details?.cached_tokens ?? 0,
    reasoningTokens: usage.output_tokens_details?.reasoning_tokens ?? 0,
  }
}

/** The server no longer holds the previous response (it expired, or was never stored). */
function isForgottenResponse(err: unknown): boolean {
  const e = err as { status?: unknown; code?: unknown; message?: unknown; param?: unknown }
  if (e?.status !== 400 && e?.status !== 404) return false
  return e.code === 'previous_response_not_found' || e.param === 'previous_response_id' || (typeof e.message === 'string' && /previous[_ ]response/i.test(e.message))
}
