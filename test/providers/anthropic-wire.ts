/** Anthropic Messages API wire format: the server-sent events of a streamed message. */
import { pieces } from './openai-wire.js'
import type { Replay } from './replay-server.js'

/** One block of a recorded turn. */
export type AnthropicBlock =
  | { text: string }
  | { thinking: string; signature: string }
  | { redacted: string }
  | { toolUse: { id: string; name: string; json: string } }

/** A streamed Messages API answer. */
export function anthropicStream(turn: { id?: string; blocks: AnthropicBlock[]; stop?: string; usage?: { input: number; cacheRead?: number; cacheWrite?: number; output: number } }): Replay {
  const id = turn.id ?? 'msg_01'
  const u = turn.usage ?? { input: 25, output: 9 }
  const events: { event: string; data: Record<string, unknown> }[] = []
  const push = (data: Record<string, unknown>) => events.push({ event: data.type as string, data })
  push({
    type: 'message_start',
    message: { id, type: 'message', role: 'assistant', model: 'claude-haiku-4-5', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: u.input, cache_creation_input_tokens: u.cacheWrite ?? 0, cache_read_input_tokens: u.cacheRead ?? 0, output_tokens: 1 } },
  })
  push({ type: 'ping' })
  turn.blocks.forEach((block, index) => {
    if ('text' in block) {
      push({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } })
      for (const piece of pieces(block.text)) push({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } })
    } else if ('thinking' in block) {
      push({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } })
      for (const piece of pieces(block.thinking)) push({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: piece } })
      push({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: block.signature } })
    } else if ('redacted' in block) {
      push({ type: 'content_block_start', index, content_block: { type: 'redacted_thinking', data: block.redacted } })
    } else {
      push({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: block.toolUse.id, name: block.toolUse.name, input: {} } })
      push({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: '' } })
      for (const piece of pieces(block.toolUse.json)) push({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: piece } })
    }
    push({ type: 'content_block_stop', index })
  })
  const stop = turn.stop ?? (turn.blocks.some((b) => 'toolUse' in b) ? 'tool_use' : 'end_turn')
  push({ type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: u.output } })
  push({ type: 'message_stop' })
  return { headers: { 'request-id': `req_${id}` }, sse: events }
}

/** An API error body as Anthropic sends it. */
export function anthropicError(status: number, type: string, message: string, headers: Record<string, string> = {}): Replay {
  return { status, headers: { 'request-id': `req_err_${status}`, ...headers }, json: { type: 'error', error: { type, message } } }
}
