import type OpenAI from 'openai'
import type { ChatCompletionChunk, ChatCompletionContentPart, ChatCompletionCreateParamsStreaming, ChatCompletionMessageParam } from 'openai/resources/chat/completions/completions'
import type { ContentBlock, Message, ModelPrices, ModelStopReason } from '../../model/messages.js'
import { ModelError, type Model, type ModelCallOptions, type ModelRequest, type ModelStreamEvent } from '../../model/model.js'
import { boundedStream, checkCallBounds, type BoundedCall } from '../call-bounds.js'
import { isAbort, STOP, toModelError, toolResultText, urlOf } from '../shared.js'
import { openAIClient, secretsOf, type OpenAIModelOptions } from './client.js'
import { InvalidArgumentError } from '../../core/errors.js'

/**
 * A model on the OpenAI Chat Completions API (and the many servers that speak it), streaming,
 * on the official `openai` client and its retry loop. Chat Completions returns no reasoning to
 * send back, so none is kept.
 *
 * @example
 * ```ts
 * import { OpenAIChatModel } from 'cairn-agents/openai'
 * const model = new OpenAIChatModel({ model: 'gpt-4.1-mini' })
 * ```
 */
export class OpenAIChatModel implements Model {
  readonly modelId: string
  readonly prices: ModelPrices | undefined
  readonly #client: OpenAI
  readonly #options: OpenAIModelOptions

  constructor(options: OpenAIModelOptions) {
    if (!options?.model) throw new InvalidArgumentError("OpenAIChatModel needs a model name: new OpenAIChatModel({ model: 'gpt-4.1-mini' })")
    checkCallBounds(options, 'OpenAIChatModel')
    this.#options = options
    this.#client = openAIClient(options)
    this.modelId = `openai:${options.model}`
    this.prices = options.prices
  }

  /**
   * Stream one answer. A document block given by URL is refused with a {@link ModelError}
   * before any request is made: Chat Completions takes files only as inline data or by the id
   * of an uploaded file. The call is bounded by the model's `idleTimeoutMs`, `totalTimeoutMs` and
   * `maxOutputChars`.
   */
  stream(request: ModelRequest, options: ModelCallOptions = {}): AsyncGenerator<ModelStreamEvent> {
    return boundedStream({ provider: 'openai', model: this.#options.model, bounds: this.#options, options, stream: (call) => this.#stream(request, call) })
  }

  async *#stream(request: ModelRequest, call: BoundedCall): AsyncGenerator<ModelStreamEvent> {
    const params: ChatCompletionCreateParamsStreaming = {
      model: this.#options.model,
      messages: chatMessages(request, this.#options.model),
      stream: true,
      stream_options: { include_usage: true },
      ...(this.#options.maxOutputTokens === undefined ? {} : { max_completion_tokens: this.#options.maxOutputTokens }),
      ...(request.tools.length === 0
        ? {}
        : {
            tools: request.tools.map((t) => ({ type: 'function' as const, function: { name: t.name, description: t.description, parameters: t.inputSchema } })),
            tool_choice: request.toolChoice === undefined || request.toolChoice === 'auto' ? 'auto' : request.toolChoice === 'any' ? 'required' : { type: 'function', function: { name: request.toolChoice.tool } },
          }),
    }
    let opened: { status: number; requestId: string | undefined } | undefined
    try {
      const { data, response, request_id } = await this.#client.chat.completions.create(params, { signal: call.signal }).withResponse()
      opened = { status: response.status, requestId: request_id ?? undefined }
      call.startIdleTimer()
      const mapper = new ChatStreamMapper()
      for await (const chunk of data) {
        call.startIdleTimer()
        yield* mapper.map(chunk)
      }
      yield* mapper.finish()
    } catch (err) {
      if (isAbort(err, call.signal)) throw call.signal.reason ?? err
      throw toModelError(err, { provider: 'openai', model: this.#options.model, secrets: secretsOf(this.#client, this.#options), ...(opened?.requestId ? { requestId: opened.requestId } : {}), ...(opened ? { status: opened.status } : {}) })
    }
  }
}

class ChatStreamMapper {
  /** Tool-call index in the choice → call id. */
  readonly #calls = new Map<number, string>()
  #finishReason: string | undefined
  #refused = false
  #started = false;

  *map(chunk: ChatCompletionChunk): Generator<ModelStreamEvent> {
    if (!this.#started) {
      this.#started = true
      yield { type: 'messageStart' }
    }
    const choice = chunk.choices[0]
    if (choice) {
      const delta = choice.delta
      if (delta.content) yield { type: 'textDelta', text: delta.content }
      if (delta.refusal) {
        this.#refused = true
        yield { type: 'textDelta', text: delta.refusal }
      }
      for (const call of delta.tool_calls ?? []) {
        if (call.id && !this.#calls.has(call.index)) {
          this.#calls.set(call.index, call.id)
          yield { type: 'toolUseStart', toolUseId: call.id, name: call.function?.name ?? '' }
        }
        const id = this.#calls.get(call.index)
        if (id !== undefined && call.function?.arguments) yield { type: 'toolUseInputDelta', toolUseId: id, delta: call.function.arguments }
      }
      if (choice.finish_reason) this.#finishReason = choice.finish_reason
    }
    if (chunk.usage) {
      yield {
        type: 'usage',
        usage: {
          inputTokens: chunk.usage.prompt_tokens,
          outputTokens: chunk.usage.completion_tokens,
          totalTokens: chunk.usage.total_tokens,
          cacheReadInputTokens: chunk.usage.prompt_tokens_details?.cached_tokens ?? 0,
          reasoningTokens: chunk.usage.completion_tokens_details?.reasoning_tokens ?? 0,
        },
      }
    }
  }

  *finish(): Generator<ModelStreamEvent> {
    if (this.#finishReason === undefined) throw new Error('the completion stream ended without a finish reason')
    const reasons: Record<string, ModelStopReason> = { stop: STOP.endTurn, length: STOP.maxTokens, tool_calls: STOP.toolUse, function_call: STOP.toolUse, content_filter: STOP.contentFiltered }
    let stopReason = reasons[this.#finishReason] ?? this.#finishReason
    if (stopReason === STOP.endTurn && this.#calls.size > 0) stopReason = STOP.toolUse
    if (stopReason === STOP.endTurn && this.#refused) stopReason = STOP.refusal
    yield { type: 'messageStop', stopReason }
  }
}

function chatMessages(request: ModelRequest, model: string): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = request.systemPrompt === undefined ? [] : [{ role: 'system', content: request.systemPrompt }]
  request.messages.forEach((message, index) => out.push(...(message.role === 'assistant' ? [assistantMessage(message)] : userMessages(message.content, { model, index }))))
  return out
}

/**
 * The error for a document block given by URL, which Chat Completions cannot take: it accepts a
 * file only as inline base64 data or as the id of an uploaded file.
 */
function documentUrlError(document: { mediaType: string; name?: string | undefined }, where: { model: string; index: number }): ModelError {
  const named = document.name === undefined ? 'a document block' : `the document block "${document.name}"`
  return new ModelError(
    `${named} (${document.mediaType}) in message ${where.index} is given by URL, which the Chat Completions API does not accept; ` +
      'it takes files only as inline base64 data. Give the document as bytes ({ source: { bytes } }), or use OpenAIResponsesModel, which sends a document URL as it is.',
    { provider: 'openai', model: where.model, retryable: false },
  )
}

function assistantMessage(message: Message): ChatCompletionMessageParam {
  const text = message.content.flatMap((b) => ('text' in b ? [b.text] : [])).join('')
  const calls = message.content.flatMap((b) => ('toolUse' in b ? [b.toolUse] : []))
  return {
    role: 'assistant',
    content: text === '' ? null : text,
    ...(calls.length === 0 ? {} : { tool_calls: calls.map((c) => ({ id: c.toolUseId, type: 'function' as const, function: { name: c.name, arguments: JSON.stringify(c.input) } })) }),
  }
}

function userMessages(blocks: readonly ContentBlock[], where: { model: string; index: number }): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = []
  const parts: ChatCompletionContentPart[] = []
  for (const block of blocks) {
    if ('toolResult' in block) out.push({ role: 'tool', tool_call_id: block.toolResult.toolUseId, content: toolResultText(block.toolResult) })
    else if ('text' in block) parts.push({ type: 'text', text: block.text })
    else if ('image' in block) parts.push({ type: 'image_url', image_url: { url: urlOf(block.image.mediaType, block.image.source) } })
    else if ('document' in block) {
      if ('url' in block.document.source) throw documentUrlError(block.document, where)
      parts.push({ type: 'file', file: { file_data: urlOf(block.document.mediaType, block.document.source), filename: block.document.name ?? 'document' } })
    }
  }
  if (parts.length > 0) out.push({ role: 'user', content: parts })
  return out
}
