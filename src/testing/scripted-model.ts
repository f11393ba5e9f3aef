import type { ContentBlock, ModelStopReason, Usage } from '../model/messages.js'
import type { Model, ModelCallOptions, ModelRequest, ModelStreamEvent } from '../model/model.js'
import { InvalidArgumentError } from '../core/errors.js'

/** One scripted model turn: the assistant content, optionally with its stop reason and usage. */
export type ScriptedResponse = ContentBlock[] | { content: ContentBlock[]; stopReason?: ModelStopReason; usage?: Usage }

/** A turn, or a function of the request that returns it. */
export type ScriptedTurn = ScriptedResponse | ((request: ModelRequest) => ScriptedResponse | Promise<ScriptedResponse>)

/**
 * Which scripted turn answers a request: the next one in call order (`call`, the default), or
 * the one after as many turns as the conversation already holds assistant messages
 * (`conversation`). The second needs no turn functions to be resumed in a fresh process: a new
 * model given the same script continues where the conversation stands.
 */
export type ScriptedSelection = 'call' | 'conversation'

/** How to build a {@link ScriptedModel}. */
export interface ScriptedModelOptions {
  modelId?: string
  select?: ScriptedSelection
}

/**
 * A model that plays back scripted turns, streaming them the way a provider would (text in
 * chunks, tool-use input as partial JSON). The stop reason follows from the content
 * (`tool_use` when it holds a tool use, else `end_turn`) unless given. Every request is
 * recorded in `calls`; a request past the last turn throws an error that says so.
 *
 * @example
 * ```ts
 * const model = new ScriptedModel([
 *   [{ toolUse: { toolUseId: 't1', name: 'get_weather', input: { city: 'Seattle' } } }],
 *   [{ text: 'Sunny.' }],
 * ], { select: 'conversation' }) // resumable in a fresh process with a new ScriptedModel
 * ```
 */
export class ScriptedModel implements Model {
  readonly modelId: string
  /** Every request received, deep-copied, in order. */
  readonly calls: ModelRequest[] = []
  readonly #turns: readonly ScriptedTurn[]
  readonly #select: ScriptedSelection

  constructor(turns: readonly ScriptedTurn[], options: ScriptedModelOptions = {}) {
    this.#turns = turns
    this.modelId = options.modelId ?? 'scripted'
    this.#select = options.select ?? 'call'
    if (this.#select !== 'call' && this.#select !== 'conversation') throw new InvalidArgumentError(`select must be 'call' or 'conversation', got ${JSON.stringify(options.select)}`)
  }

  async *stream(request: ModelRequest, options: ModelCallOptions = {}): AsyncGenerator<ModelStreamEvent> {
    // The agent's messages are frozen: recording the list (not deep copies) is enough.
    this.calls.push({ ...request, messages: [...request.messages] })
    const index = this.#select === 'call' ? this.calls.length - 1 : request.messages.filter((message) => message.role === 'assistant').length
    const turn = this.#turns[index]
    if (turn === undefined) {
      throw new Error(
        this.#select === 'call'
          ? `ScriptedModel was called ${index + 1} times but has only ${this.#turns.length} scripted turns; add a turn for call ${index + 1}`
          : `ScriptedModel was asked for turn ${index + 1} (the conversation holds ${index} assistant messages) but has only ${this.#turns.length} scripted turns`,
      )
    }
    const response = typeof turn === 'function' ? await turn({ ...request, messages: [...request.messages] }) : turn
    const { content, stopReason, usage } = Array.isArray(response) ? { content: response, stopReason: undefined, usage: undefined } : response
    options.signal?.throwIfAborted()
    yield { type: 'messageStart' }
    let outputChars = 0
    for (const block of structuredClone(content)) {
      const metadata = block.providerMetadata ? { providerMetadata: block.providerMetadata } : {}
      if ('text' in block) {
        yield { type: 'textStart', ...metadata }
        for (let i = 0; i < block.text.length; i += 16) yield { type: 'textDelta', text: block.text.slice(i, i + 16) }
        outputChars += block.text.length
      } else if ('reasoning' in block) {
        yield { type: 'reasoningStart', ...metadata }
        yield { type: 'reasoningDelta', text: block.reasoning.text }
        if (block.reasoning.signature !== undefined) yield { type: 'reasoningDelta', signature: block.reasoning.signature }
        if (block.reasoning.redactedContent !== undefined) yield { type: 'reasoningDelta', redactedContent: block.reasoning.redactedContent }
      } else if ('toolUse' in block) {
        const json = JSON.stringify(block.toolUse.input)
        yield { type: 'toolUseStart', toolUseId: block.toolUse.toolUseId, name: block.toolUse.name, ...metadata }
        const half = Math.ceil(json.length / 2)
        yield { type: 'toolUseInputDelta', toolUseId: block.toolUse.toolUseId, delta: json.slice(0, half) }
        yield { type: 'toolUseInputDelta', toolUseId: block.toolUse.toolUseId, delta: json.slice(half) }
        outputChars += json.length
      }
    }
    const hasToolUse = content.some((block) => 'toolUse' in block)
    yield { type: 'messageStop', stopReason: stopReason ?? (hasToolUse ? 'tool_use' : 'end_turn') }
    const inputTokens = Math.ceil(textLength(request.messages) / 4)
    const outputTokens = Math.ceil(outputChars / 4)
    yield { type: 'usage', usage: usage ?? { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens } }
  }
}

function textLength(messages: readonly { content: readonly object[] }[]): number {
  let chars = 0
  for (const message of messages) for (const block of message.content) chars += 'text' in block ? String(block.text).length : 64
  return chars
}
