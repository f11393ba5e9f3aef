import type { JsonValue } from '../core/codec.js'

/** Who wrote a message. Tool results travel in `user` messages, as the providers expect. */
export type Role = 'user' | 'assistant'

/** Plain text. */
export interface TextBlock {
  text: string
}

/** The model asks for a tool call. */
export interface ToolUseBlock {
  toolUse: { toolUseId: string; name: string; input: JsonValue }
}

/** What one piece of a tool result holds. */
export type ToolResultContent = { text: string } | { json: JsonValue }

/** The outcome of a tool call, answering the `toolUse` with the same id. */
export interface ToolResultBlock {
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
export type ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock

/** A block of a prompt: message content, or a resume/interrupt-response instruction. */
export type PromptBlock = ContentBlock | CheckpointResumeBlock | InterruptResponseBlock

/** One message of a conversation: plain JSON. */
export interface Message {
  role: Role
  content: ContentBlock[]
}

/** Why the model stopped. Providers may add their own reasons. */
export type ModelStopReason = 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'content_filtered' | 'guardrail_intervened' | (string & {})

/** Token counts of one model call or a sum of them. */
export interface Usage {
  inputTokens: number
  outputTokens: number
  totalTokens: number
}

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

/** Add `extra` into `total`. */
export function addUsage(total: Usage, extra: Usage | undefined): void {
  if (!extra) return
  total.inputTokens += extra.inputTokens
  total.outputTokens += extra.outputTokens
  total.totalTokens += extra.totalTokens
}
