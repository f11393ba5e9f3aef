/**
 * The compact stored form of a checkpoint's body, used by the SQL engines from their schema
 * version 8. A body is JSON text; the runner's phase records and runtime snapshots repeat the
 * same keys in every checkpoint (`"finish_reason":`, `"session_token":null,"checkpoint_token":
 * null`, the snapshot's agent and config objects...), often more bytes than the values they
 * carry. Each such run of text in {@link BODY_PHRASES} is stored as two characters: U+0001 and
 * the character whose code is 0x20 plus its position in the list.
 *
 * JSON text never holds a raw control character, so a stored body with U+0001 in it is compact.
 * A body that is not JSON and holds U+0001 itself, or starts with U+0002, is stored as U+0002
 * followed by the body, and read back as it is. Any other body is stored unchanged when it holds
 * none of the phrases, so rows written before read as they are.
 *
 * A stored form reads back as exactly the text it replaced, so the digest over the body text
 * verifies unchanged; a code that names no phrase is left in place for the digest check to reject.
 */

/** Phrases stored as a code. Append only: a stored position never changes meaning (at most 95). */
export const BODY_PHRASES: readonly string[] = [
  // The runner's phase records.
  '{"model":"',
  '","provider":"',
  '","finish_reason":"',
  '","tool_call_count":',
  ',"session_token":null,"checkpoint_token":null,"usage":{"inputTokens":',
  ',"outputTokens":',
  ',"totalTokens":',
  '},"cost_usd":',
  ',"total_cost_usd":',
  ',"runtime":null}',
  '{"state":"running","message_count":',
  ',"message_count":',
  '{"tool_call_count":',
  '{"tool_calls_total":',
  ',"tool_failures":',
  // The runtime snapshot.
  ',"runtime":{"messages":{"~":"list","i":0},"step":',
  ',"next":"',
  '","state":"running","context":{},"llm_calls":',
  ',"tool_calls":',
  ',"started_at_s":',
  ',"usage":{"inputTokens":',
  ',"cacheReadInputTokens":',
  ',"cacheWriteInputTokens":',
  ',"reasoningTokens":',
  ',"session_token":null,"checkpoint_token":null,"pending_llm_response":',
  ',"tool_executions":',
  ',"subagent_executions":[],"requested_model":"',
  '","normalized_model":"',
  '","provider_adapter":"',
  ',"final_text":',
  ',"final_structured":null,"replayed_effect_count":',
  ',"agent":{"state":{},"conversation_manager":{},"interrupts":{"pending":[],"completed":[],"responses":{},"cycleIndex":',
  '},"config":{"hash":"',
  '","modelId":"',
  '","systemPrompt":"',
  '","tools":{',
  '{"~":"item","i":0,"n":',
  ',"p":["content",0,"text"]}',
  '{"tool_call_id":"',
  '","tool_name":"',
  '","status":"success","replayed":false}',
  // The terminal record.
  '{"state":"completed","final_text":',
  '","terminal_result":{"stopReason":"',
  '","message":{"role":"assistant","content":[{"text":"',
  ',"metrics":{"cycleCount":',
  ',"modelCalls":',
  ',"toolCalls":{"',
  ',"errors":0}}',
  ',"durationMs":',
  '},"error":null',
  ',"checkpoint":null,"interrupts":[],"structuredOutput":null',
]

const CODE = '\u0001'
const VERBATIM = 0x02
/** Bodies longer than this are stored as they are: a phrase search would cost a save more than it saves. */
const MAX_COMPACTED_CHARS = 64 * 1024

const CODE_OF = new Map(BODY_PHRASES.map((phrase, k) => [phrase, CODE + String.fromCharCode(0x20 + k)]))
// Longest first: where two phrases start at the same place, the longer one is taken.
const PHRASES = new RegExp(
  [...BODY_PHRASES]
    .sort((a, b) => b.length - a.length)
    .map((phrase) => phrase.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('|'),
  'g',
)
const phraseCode = (phrase: string): string => CODE_OF.get(phrase)!

/** The stored form of a checkpoint's body text. */
export function storedBody(body: string): string {
  if (body.charCodeAt(0) === VERBATIM || body.includes(CODE)) return String.fromCharCode(VERBATIM) + body
  return body.length > MAX_COMPACTED_CHARS ? body : body.replace(PHRASES, phraseCode)
}

/** A checkpoint's body text as read back from its stored form; any other value is passed on unchanged. */
export function bodyOf(stored: unknown): unknown {
  if (typeof stored !== 'string') return stored
  if (stored.charCodeAt(0) === VERBATIM) return stored.slice(1)
  let at = stored.indexOf(CODE)
  if (at < 0) return stored
  // A loop over the codes rather than a replace with a callback: a history decodes thousands of bodies.
  let text = ''
  let from = 0
  do {
    const phrase = BODY_PHRASES[stored.charCodeAt(at + 1) - 0x20]
    if (phrase === undefined) {
      // No phrase of its own: kept as it is, for the digest check to reject.
      text += stored.slice(from, at + 1)
      from = at + 1
    } else {
      text += stored.slice(from, at) + phrase
      from = at + 2
    }
    at = stored.indexOf(CODE, from)
  } while (at >= 0)
  return text + stored.slice(from)
}
