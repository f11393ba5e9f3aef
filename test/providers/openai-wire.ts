/**
 * OpenAI wire formats as the API sends them: Responses API server-sent events and Chat
 * Completions chunks, built from small descriptions of a turn.
 */
import type { Replay } from './replay-server.js'

/** What one recorded Responses turn holds. */
export interface ResponsesTurn {
  id?: string
  reasoning?: { id: string; summary: string[]; encrypted?: string }
  text?: string
  calls?: { id: string; callId: string; name: string; args: string }[]
  incomplete?: 'max_output_tokens' | 'content_filter'
  refusal?: string
  usage?: { input: number; cached?: number; output: number; reasoning?: number }
}

/** A Responses API streaming answer for `turn`, with the event framing the API uses. */
export function responsesStream(turn: ResponsesTurn, headers: Record<string, string> = {}): Replay {
  const id = turn.id ?? 'resp_1'
  const events: Record<string, unknown>[] = []
  const base = { id, object: 'response', created_at: 1, model: 'gpt-5-mini', status: 'in_progress', output: [], usage: null, incomplete_details: null, error: null }
  events.push({ type: 'response.created', response: base })
  events.push({ type: 'response.in_progress', response: base })
  const output: Record<string, unknown>[] = []
  let index = 0
  if (turn.reasoning) {
    const r = turn.reasoning
    const item = { id: r.id, type: 'reasoning', summary: [] as unknown[] }
    events.push({ type: 'response.output_item.added', output_index: index, item })
    r.summary.forEach((text, s) => {
      events.push({ type: 'response.reasoning_summary_part.added', item_id: r.id, output_index: index, summary_index: s, part: { type: 'summary_text', text: '' } })
      for (const piece of pieces(text)) events.push({ type: 'response.reasoning_summary_text.delta', item_id: r.id, output_index: index, summary_index: s, delta: piece })
      events.push({ type: 'response.reasoning_summary_text.done', item_id: r.id, output_index: index, summary_index: s, text })
    })
    const done = { id: r.id, type: 'reasoning', summary: r.summary.map((text) => ({ type: 'summary_text', text })), ...(r.encrypted ? { encrypted_content: r.encrypted } : {}) }
    events.push({ type: 'response.output_item.done', output_index: index, item: done })
    output.push(done)
    index++
  }
  if (turn.text !== undefined || turn.refusal !== undefined) {
    const msgId = `msg_${index}`
    events.push({ type: 'response.output_item.added', output_index: index, item: { id: msgId, type: 'message', role: 'assistant', status: 'in_progress', content: [] } })
    if (turn.text !== undefined) {
      events.push({ type: 'response.content_part.added', item_id: msgId, output_index: index, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } })
      for (const piece of pieces(turn.text)) events.push({ type: 'response.output_text.delta', item_id: msgId, output_index: index, content_index: 0, delta: piece, logprobs: [] })
      events.push({ type: 'response.output_text.done', item_id: msgId, output_index: index, content_index: 0, text: turn.text, logprobs: [] })
    }
    if (turn.refusal !== undefined) events.push({ type: 'response.refusal.delta', item_id: msgId, output_index: index, content_index: 0, delta: turn.refusal })
    const done = { id: msgId, type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: turn.text ?? '', annotations: [] }] }
    events.push({ type: 'response.output_item.done', output_index: index, item: done })
    output.push(done)
    index++
  }
  for (const call of turn.calls ?? []) {
    events.push({ type: 'response.output_item.added', output_index: index, item: { id: call.id, type: 'function_call', call_id: call.callId, name: call.name, arguments: '', status: 'in_progress' } })
    for (const piece of pieces(call.args)) events.push({ type: 'response.function_call_arguments.delta', item_id: call.id, output_index: index, delta: piece })
    events.push({ type: 'response.function_call_arguments.done', item_id: call.id, output_index: index, arguments: call.args })
    const done = { id: call.id, type: 'function_call', call_id: call.callId, name: call.name, arguments: call.args, status: 'completed' }
    events.push({ type: 'response.output_item.done', output_index: index, item: done })
    output.push(done)
    index++
  }
  const u = turn.usage ?? { input: 12, output: 7 }
  const usage = {
    input_tokens: u.input,
    input_tokens_details: { cached_tokens: u.cached ?? 0 },
    output_tokens: u.output,
    output_tokens_details: { reasoning_tokens: u.reasoning ?? 0 },
    total_tokens: u.input + u.output,
  }
  const final = { ...base, status: turn.incomplete ? 'incomplete' : 'completed', output, usage, incomplete_details: turn.incomplete ? { reason: turn.incomplete } : null }
  events.push({ type: turn.incomplete ? 'response.incomplete' : 'response.completed', response: final })
  return { headers: { 'x-request-id': `req_${id}`, ...headers }, sse: events.map((data, n) => ({ event: data.type as string, data: { ...data, sequence_number: n } })) }
}

/** A Chat Completions streaming answer. */
export function chatStream(turn: { text?: string; calls?: { id: string; name: string; args: string }[]; finish?: string; usage?: { prompt: number; cached?: number; completion: number } }): Replay {
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4.1-mini', choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] })
  const data: unknown[] = [chunk({ role: 'assistant', content: '' })]
  for (const piece of pieces(turn.text ?? '')) data.push(chunk({ content: piece }))
  ;(turn.calls ?? []).forEach((call, index) => {
    data.push(chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] }))
    for (const piece of pieces(call.args)) data.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }))
  })
  data.push(chunk({}, turn.finish ?? (turn.calls?.length ? 'tool_calls' : 'stop')))
  const u = turn.usage ?? { prompt: 20, completion: 5 }
  data.push({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4.1-mini', choices: [], usage: { prompt_tokens: u.prompt, completion_tokens: u.completion, total_tokens: u.prompt + u.completion, prompt_tokens_details: { cached_tokens: u.cached ?? 0 }, completion_tokens_details: { reasoning_tokens: 0 } } })
  return { headers: { 'x-request-id': 'req_chat' }, sse: [...data.map((d) => ({ data: d })), { data: '[DONE]' }] }
}

/** An API error body as OpenAI sends it. */
export function openAIError(status: number, message: string, extra: { code?: string; param?: string; headers?: Record<string, string> } = {}): Replay {
  return { status, headers: { 'x-request-id': `req_err_${status}`, ...extra.headers }, json: { error: { message, type: 'invalid_request_error', param: extra.param ?? null, code: extra.code ?? null } } }
}

/** A text cut into uneven pieces, as deltas arrive. */
export function pieces(text: string): string[] {
  const out: string[] = []
  for (let at = 0, n = 0; at < text.length; n++) {
    const size = [3, 1, 5, 2, 8][n % 5]!
    out.push(text.slice(at, at + size))
    at += size
  }
  return out
}
