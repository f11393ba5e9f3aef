import type { JsonObject } from '../../core/codec.js'
import type { ModelPrices, ModelStopReason, ProviderMetadata, Usage } from '../../model/messages.js'
import { ModelError, type Model, type ModelCallOptions, type ModelRequest, type ModelStreamEvent } from '../../model/model.js'
import { boundedStream, checkCallBounds, type BoundedCall, type CallBoundsOptions } from '../call-bounds.js'
import { isAbort, redact, STOP } from '../shared.js'
import { aiSdkPrompt } from './ai-sdk-prompt.js'
import type { AnyLanguageModel, AnyStreamPart, CallOptionsWithoutPrompt } from './ai-sdk-types.js'
import { importPeer } from '../../core/peers.js'
import { InvalidArgumentError } from '../../core/errors.js'

// Only the provider's types are Cairn's concern, but a program without them would fail to
// type-check against this module's declarations: say so when it loads.
await importPeer({ name: '@ai-sdk/provider', neededBy: 'cairn-agents/ai-sdk' })

/** How to build an {@link AISDKModel}. */
export interface AISDKModelOptions extends CallBoundsOptions {
  /** Retries of a call the provider answered with a retryable error (429, 5xx, overloaded); 2 unless given. */
  maxRetries?: number
  maxOutputTokens?: number
  /** Passed to every call as `providerOptions`. */
  providerOptions?: Record<string, JsonObject>
  /** Your prices, to add each call's cost to a managed run's `total_cost_usd`. */
  prices?: ModelPrices
}

/**
 * Any Vercel AI SDK provider model (`@ai-sdk/openai`, `@ai-sdk/anthropic`, `@ai-sdk/google`,
 * Bedrock, …) as a Cairn model: `LanguageModelV2`, `V3` and `V4` are accepted, told apart by
 * their `specificationVersion`. Cairn loads no AI SDK code of its own: only the provider you pass.
 * Provider metadata (an Anthropic thinking signature, an OpenAI item id) is kept on each block
 * and sent back as the part's provider options. Provider models do not retry, so this adapter
 * retries what the provider marks retryable, with exponential backoff and jitter, honouring
 * `retry-after`.
 *
 * @example
 * ```ts
 * import { anthropic } from '@ai-sdk/anthropic'
 * import { AISDKModel } from 'cairn-agents/ai-sdk'
 * const model = new AISDKModel(anthropic('claude-sonnet-4-6'))
 * ```
 */
export class AISDKModel implements Model {
  readonly modelId: string
  readonly prices: ModelPrices | undefined
  readonly #model: AnyLanguageModel
  readonly #options: AISDKModelOptions

  constructor(model: AnyLanguageModel, options: AISDKModelOptions = {}) {
    const version = (model as { specificationVersion?: unknown } | undefined)?.specificationVersion
    if (version !== 'v2' && version !== 'v3' && version !== 'v4') {
      throw new InvalidArgumentError(`AISDKModel takes an AI SDK language model of specification v2, v3 or v4; got ${JSON.stringify(version)}`)
    }
    checkCallBounds(options, 'AISDKModel')
    this.#model = model
    this.#options = options
    this.modelId = `ai-sdk:${model.provider}:${model.modelId}`
    this.prices = options.prices
  }

  /** Stream one answer, bounded by the model's `idleTimeoutMs`, `totalTimeoutMs` and `maxOutputChars`. */
  stream(request: ModelRequest, options: ModelCallOptions = {}): AsyncGenerator<ModelStreamEvent> {
    return boundedStream({ provider: `ai-sdk:${this.#model.provider}`, model: this.#model.modelId, bounds: this.#options, options, stream: (call) => this.#stream(request, call) })
  }

  async *#stream(request: ModelRequest, bounded: BoundedCall): AsyncGenerator<ModelStreamEvent> {
    const options = { signal: bounded.signal }
    const m = this.#model
    const call: CallOptionsWithoutPrompt & { prompt: unknown[] } = {
      prompt: aiSdkPrompt({ messages: request.messages, systemPrompt: request.systemPrompt, version: m.specificationVersion }),
      ...(this.#options.maxOutputTokens === undefined ? {} : { maxOutputTokens: this.#options.maxOutputTokens }),
      ...(this.#options.providerOptions ? { providerOptions: this.#options.providerOptions } : {}),
      ...(options.signal ? { abortSignal: options.signal } : {}),
      ...(request.tools.length === 0
        ? {}
        : {
            tools: request.tools.map((t) => ({ type: 'function' as const, name: t.name, description: t.description, inputSchema: t.inputSchema })),
            toolChoice: request.toolChoice === undefined || request.toolChoice === 'auto' ? { type: 'auto' } : request.toolChoice === 'any' ? { type: 'required' } : { type: 'tool', toolName: request.toolChoice.tool },
          }),
    }
    const started = await this.#start(call, bounded)
    const mapper = new AISDKStreamMapper()
    const reader = started.stream.getReader()
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        // Raw provider chunks (when asked for) say nothing about the answer.
        if (value.type !== 'raw') bounded.startIdleTimer()
        yield* mapper.map(value)
      }
    } catch (err) {
      throw this.#error(err, options.signal, started.requestId)
    } finally {
      reader.releaseLock()
    }
    if (!mapper.finished) throw this.#error(new Error('the stream ended without a finish part'), options.signal, started.requestId)
  }

  /** `doStream`, retried while the provider says its error is retryable. */
  async #start(call: CallOptionsWithoutPrompt & { prompt: unknown[] }, bounded: BoundedCall): Promise<{ stream: ReadableStream<AnyStreamPart>; requestId: string | undefined }> {
    const maxRetries = this.#options.maxRetries ?? 2
    const signal = bounded.signal
    for (let attempt = 0; ; attempt++) {
      // A provider model may wait for the first event of the stream before it returns it: silence is timed from the request on.
      bounded.startIdleTimer()
      try {
        const result = await (this.#model.doStream as (o: unknown) => PromiseLike<{ stream: ReadableStream<AnyStreamPart>; response?: { headers?: Record<string, string> } }>)(call)
        return { stream: result.stream, requestId: requestIdOf(result.response?.headers) }
      } catch (err) {
        const retryable = (err as { isRetryable?: unknown }).isRetryable === true
        if (isAbort(err, signal) || !retryable || attempt >= maxRetries) throw this.#error(err, signal, undefined)
        bounded.stopIdleTimer()
        await sleep(retryDelayMs(err, attempt), signal)
      }
    }
  }

  #error(err: unknown, signal: AbortSignal | undefined, requestId: string | undefined): unknown {
    if (isAbort(err, signal)) return signal?.reason ?? err
    if (err instanceof ModelError) return err
    const e = (typeof err === 'object' && err !== null ? err : {}) as { statusCode?: unknown; responseHeaders?: unknown; message?: unknown; isRetryable?: unknown }
    const message = typeof e.message === 'string' ? e.message : String(err)
    return new ModelError(redact(message, []), {
      provider: `ai-sdk:${this.#model.provider}`,
      model: this.#model.modelId,
      status: typeof e.statusCode === 'number' ? e.statusCode : undefined,
      requestId: requestIdOf(e.responseHeaders as Record<string, string> | undefined) ?? requestId,
      retryable: e.isRetryable === true,
      cause: err,
    })
  }
}

/** Maps AI SDK stream parts onto Cairn's. A tool call streamed as input parts and then sent whole is taken once. */
class AISDKStreamMapper {
  finished = false
  readonly #streamedCalls = new Set<string>();

  *map(part: AnyStreamPart): Generator<ModelStreamEvent> {
    const meta = 'providerMetadata' in part ? (part.providerMetadata as ProviderMetadata | undefined) : undefined
    const withMeta = meta && Object.keys(meta).length > 0 ? { providerMetadata: meta } : {}
    switch (part.type) {
      case 'stream-start':
        yield { type: 'messageStart' }
        break
      case 'text-start':
        yield { type: 'textStart', ...withMeta }
        break
      case 'text-delta':
        yield { type: 'textDelta', text: part.delta }
        if (meta) yield { type: 'blockMetadata', providerMetadata: meta }
        break
      case 'reasoning-start':
        yield { type: 'reasoningStart', ...withMeta }
        break
      case 'reasoning-delta':
        yield { type: 'reasoningDelta', text: part.delta }
        if (meta) yield { type: 'blockMetadata', providerMetadata: meta }
        break
      case 'text-end':
      case 'reasoning-end':
        if (meta) yield { type: 'blockMetadata', providerMetadata: meta }
        break
      case 'tool-input-start':
        if (part.providerExecuted) break
        this.#streamedCalls.add(part.id)
        yield { type: 'toolUseStart', toolUseId: part.id, name: part.toolName, ...withMeta }
        break
      case 'tool-input-delta':
        if (this.#streamedCalls.has(part.id)) yield { type: 'toolUseInputDelta', toolUseId: part.id, delta: part.delta }
        break
      case 'tool-call':
        if (part.providerExecuted || this.#streamedCalls.has(part.toolCallId)) break
        this.#streamedCalls.add(part.toolCallId)
        yield { type: 'toolUseStart', toolUseId: part.toolCallId, name: part.toolName, ...withMeta }
        yield { type: 'toolUseInputDelta', toolUseId: part.toolCallId, delta: part.input }
        break
      case 'finish':
        this.finished = true
        yield { type: 'messageStop', stopReason: stopReasonOf(part.finishReason, this.#streamedCalls.size > 0) }
        yield { type: 'usage', usage: usageOf(part.usage) }
        break
      case 'error':
        throw part.error instanceof Error ? part.error : new Error(`the provider streamed an error: ${JSON.stringify(part.error)}`)
      default:
        break
    }
  }
}

function stopReasonOf(reason: string | { unified: string; raw: string | undefined }, hasToolCalls: boolean): ModelStopReason {
  const unified = typeof reason === 'string' ? reason : reason.unified
  switch (unified) {
    case 'stop':
    case 'tool-calls':
      return hasToolCalls ? STOP.toolUse : STOP.endTurn
    case 'length':
      return STOP.maxTokens
    case 'content-filter':
      return STOP.contentFiltered
    default:
      return unified
  }
}

type V2Usage = { inputTokens: number | undefined; outputTokens: number | undefined; totalTokens: number | undefined; reasoningTokens?: number | undefined; cachedInputTokens?: number | undefined }
type V3Usage = { inputTokens: { total: number | undefined; cacheRead: number | undefined; cacheWrite: number | undefined }; outputTokens: { total: number | undefined; reasoning: number | undefined } }

function usageOf(usage: V2Usage | V3Usage): Usage {
  if (typeof usage.inputTokens === 'object') {
    const u = usage as V3Usage
    const input = u.inputTokens.total ?? 0
    const output = u.outputTokens.total ?? 0
    return { inputTokens: input, outputTokens: output, totalTokens: input + output, cacheReadInputTokens: u.inputTokens.cacheRead ?? 0, cacheWriteInputTokens: u.inputTokens.cacheWrite ?? 0, reasoningTokens: u.outputTokens.reasoning ?? 0 }
  }
  const u = usage as V2Usage
  const input = u.inputTokens ?? 0
  const output = u.outputTokens ?? 0
  return { inputTokens: input, outputTokens: output, totalTokens: u.totalTokens ?? input + output, cacheReadInputTokens: u.cachedInputTokens ?? 0, reasoningTokens: u.reasoningTokens ?? 0 }
}

function requestIdOf(headers: Record<string, string> | undefined): string | undefined {
  return headers?.['request-id'] ?? headers?.['x-request-id']
}

/** Exponential backoff from half a second, capped at 8 s, with up to 25% jitter; `retry-after(-ms)` wins when under a minute. */
function retryDelayMs(err: unknown, attempt: number): number {
  const headers = (err as { responseHeaders?: Record<string, string> }).responseHeaders ?? {}
  const ms = Number.parseFloat(headers['retry-after-ms'] ?? '')
  if (Number.isFinite(ms) && ms >= 0 && ms < 60_000) return ms
  const seconds = Number.parseFloat(headers['retry-after'] ?? '')
  if (Number.isFinite(seconds) && seconds >= 0 && seconds < 60) return seconds * 1000
  return Math.min(500 * 2 ** attempt, 8000) * (1 - Math.random() * 0.25)
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error)
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal?.reason as Error)
    }
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
