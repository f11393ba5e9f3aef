import type { JsonObject, JsonValue } from '../core/codec.js'

/** Who wrote a message. Tool results travel in `user` messages, as the providers expect. */
export type Role = 'user' | 'assistant'

/**
 * Opaque data a provider attached to a block, keyed by provider (`openai`, `anthropic`, or the
 * AI SDK provider's own key): item ids, cache-control markers, anything it needs to see again.
 * Persisted with the block and given back to the same provider on the next turn.
 */
export type ProviderMetadata = Record<string, JsonObject>

/** What every block may carry besides its content. */
export interface BlockExtras {
  providerMetadata?: ProviderMetadata
}

/** Plain text. */
export interface TextBlock extends BlockExtras {
  text: string
}

/** The model asks for a tool call. */
export interface ToolUseBlock extends BlockExtras {
  toolUse: { toolUseId: string; name: string; input: JsonValue }
}

/**
 * The model's reasoning. `signature` (Anthropic's signed thinking) and `redactedContent`
 * (Anthropic's redacted thinking, OpenAI's encrypted reasoning) are opaque: Cairn stores them
 * unchanged and sends them back verbatim on the next turn, as the providers require.
 */
export interface ReasoningBlock extends BlockExtras {
  reasoning: { text: string; signature?: string; redactedContent?: string }
}

/** Where the bytes of an image or document are: inline (stored with the codec's bytes tag) or at a URL. */
export type MediaSource = { bytes: Uint8Array } | { url: string }

/** An image, inline or by URL. */
export interface ImageBlock extends BlockExtras {
  image: { mediaType: string; source: MediaSource }
}

/** A document (a PDF, say), inline or by URL. */
export interface DocumentBlock extends BlockExtras {
  document: { mediaType: string; source: MediaSource; name?: string }
}

/** What one piece of a tool result holds. */
export type ToolResultContent = { text: string } | { json: JsonValue }

/** The outcome of a tool call, answering the `toolUse` with the same id. */
export interface ToolResultBlock extends BlockExtras {
  toolResult: { toolUseId: string; status: 'success' | 'error'; content: ToolResultContent[] }
}

/** Resume an agent from a checkpoint; must be the only block of the prompt. */
export interface CheckpointResumeBlock {
  checkpointResume: { checkpoint: unknown }
}

/** Answer an interrupt raised by a tool. */
export interface InterruptResponseBlock {
  interruptResponse: { interruptId: string; response: JsonValue }
}

/** A block of a stored message. */
export type ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock | ReasoningBlock | ImageBlock | DocumentBlock

/** A block of a prompt: message content, or a resume/interrupt-response instruction. */
export type PromptBlock = ContentBlock | CheckpointResumeBlock | InterruptResponseBlock

/** One message of a conversation: plain JSON. */
export interface Message {
  role: Role
  content: ContentBlock[]
}

/** Why the model stopped. Providers may add their own reasons. */
export type ModelStopReason = 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'content_filtered' | 'guardrail_intervened' | (string & {})

/**
 * Token counts of one model call or a sum of them. `inputTokens` counts every input token,
 * cached ones included; `cacheReadInputTokens` and `cacheWriteInputTokens` say how many of them
 * were read from or written to the provider's prompt cache. `reasoningTokens` is the part of
 * `outputTokens` spent reasoning. The optional counts are present when a provider reports them.
 */
export interface Usage {
  inputTokens: number
  outputTokens: number
  totalTokens: number
  cacheReadInputTokens?: number
  cacheWriteInputTokens?: number
  reasoningTokens?: number
}

/** The optional counts of a {@link Usage}. */
export const DETAIL_USAGE_KEYS = ['cacheReadInputTokens', 'cacheWriteInputTokens', 'reasoningTokens'] as const

/** The tool-use blocks of a message, in order. */
export function toolUsesOf(message: Message): ToolUseBlock['toolUse'][] {
  return message.content.flatMap((block) => ('toolUse' in block ? [block.toolUse] : []))
}

/** The text of a message's text blocks, joined. */
export function textOf(message: Message | undefined): string {
  return message ? message.content.flatMap((block) => ('text' in block ? [block.text] : [])).join('') : ''
}

/** A zero usage. */
export function emptyUsage(): Usage {
  return { inputTokens: 0, outputTokens: 0, totalTokens: 0 }
}

/** Add `extra` into `total`; an optional count appears in `total` once any addend has it. */
export function addUsage(total: Usage, extra: Usage | undefined): void {
  if (!extra) return
  total.inputTokens += extra.inputTokens
  total.outputTokens += extra.outputTokens
  total.totalTokens += extra.totalTokens
  for (const key of DETAIL_USAGE_KEYS) {
    const more = extra[key]
    if (more !== undefined) total[key] = (total[key] ?? 0) + more
  }
}

/**
 * What a model call costs, in US dollars per million tokens. Prices change and differ by
 * contract, so Cairn ships none: the numbers are yours. A cache price that is not given is
 * charged at the input price.
 */
export interface ModelPrices {
  inputPerMillion: number
  outputPerMillion: number
  cacheReadPerMillion?: number
  cacheWritePerMillion?: number
}

/** The cost of `usage` at `prices`, in US dollars. */
export function costOf(usage: Usage, prices: ModelPrices): number {
  const cacheRead = usage.cacheReadInputTokens ?? 0
  const cacheWrite = usage.cacheWriteInputTokens ?? 0
  const plainInput = Math.max(0, usage.inputTokens - cacheRead - cacheWrite)
  const dollars =
    plainInput * prices.inputPerMillion +
    cacheRead * (prices.cacheReadPerMillion ?? prices.inputPerMillion) +
    cacheWrite * (prices.cacheWritePerMillion ?? prices.inputPerMillion) +
    usage.outputTokens * prices.outputPerMillion
  return dollars / 1_000_000
}
