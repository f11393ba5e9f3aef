import type { ContentBlock, ModelStopReason, Usage } from '../model/messages.js'
import type { Model, ModelCallOptions, ModelRequest, ModelStreamEvent } from '../model/model.js'

/** One scripted model turn: the assistant content, optionally with its stop reason and usage. */
export type ScriptedResponse = ContentBlock[] | { content: ContentBlock[]; stopReason?: ModelStopReason; usage?: Usage }

/** A turn, or a function of the request that returns it. */
export type ScriptedTurn = ScriptedResponse | ((request: ModelRequest) => ScriptedResponse | Promise<ScriptedResponse>)

/**
 * A model that plays back scripted turns, streaming them the way a provider would (text in
 * chunks, tool-use input as partial JSON). The stop reason follows from the content
 * (`tool_use` when it holds a tool use, else `end_turn`) unless given. Every request is
 * recorded in `calls`; a call past the last turn throws an error that says so.
 *
 * @example
 * ```ts
 * const model = new ScriptedModel([
 *   [{ toolUse: { toolUseId: 't1', name: 'get_weather', input: { city: 'Seattle' } } }],
 *   [{ text: 'Sunny.' }],
 * ])
 * ```
 */
export class ScriptedModel implements Model {
  readonly modelId: string
  /** Every request received, deep-copied, in order. */
  readonly calls: ModelRequest[] = []
  readonly #turns: readonly ScriptedTurn[]

  constructor(turns: readonly ScriptedTurn[], options: { modelId?: string } = {}) {
    this.#turns = turns
    this.modelId = options.modelId ?? 'scripted'
  }

  async *stream(request: ModelRequest, options: ModelCallOptions = {}): AsyncGenerator<ModelStreamEvent> {
    // The agent's messages are frozen: recording the list (not deep copies) is enough.
    this.calls.push({ ...request, messages: [...request.messages] })
    const index = this.calls.length - 1
    const turn = this.#turns[index]
    if (turn === undefined) {
      throw new Error(`ScriptedModel was called ${index + 1} times but has only ${this.#turns.length} scripted turns; add a turn for call ${index + 1}`)
    }
    const response = typeof turn === 'function' ? await turn({ ...request, messages: [...request.messages] }) : turn
    const { content, stopReason, usage } = Array.isArray(response) ? { content: response, stopReason: undefined, usage: undefined } : response
    options.signal?.throwIfAborted()
    yield { type: 'messageStart' }
    let outputChars = 0
    for (const block of structuredClone(content)) {
      if ('text' in block) {
        for (let i = 0; i < block.text.length; i += 16) yield { type: 'textDelta', text: block.text.slice(i, i + 16) }
        outputChars += block.text.length
      } else if ('toolUse' in block) {
        const json = JSON.stringify(block.toolUse.input)
        yield { type: 'toolUseStart', toolUseId: block.toolUse.toolUseId, name: block.toolUse.name }
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
