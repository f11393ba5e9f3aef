import type { JsonValue } from '../../core/codec.js'
import { encodeValue } from '../../core/codec.js'
import { hashValue } from '../../core/hash.js'
import type { ToolResultBlock, ToolResultContent } from '../../model/messages.js'

/** The result of an MCP `tools/call`, as far as Cairn reads it. */
export interface McpCallResult {
  content?: readonly McpContent[]
  structuredContent?: Record<string, unknown>
  isError?: boolean
}

/** One block of an MCP tool result. */
type McpContent = { type: string; [field: string]: unknown }

/**
 * A Cairn tool result from an MCP one: text blocks stay text, structured content becomes one
 * JSON block (a text block that only repeats it, as servers send for older clients, is dropped),
 * and images, audio and binary resources are described in a line of text, not inlined. `isError`
 * makes it an error result the model sees.
 */
export function toToolResult(toolUseId: string, result: McpCallResult, toolName: string): ToolResultBlock['toolResult'] {
  const structured = result.structuredContent === undefined ? undefined : (encodeValue(result.structuredContent, `structured content of MCP tool ${toolName}`))
  const structuredHash = structured === undefined ? undefined : hashValue(structured)
  const content: ToolResultContent[] = []
  for (const block of result.content ?? []) {
    if (block.type === 'text' && typeof block.text === 'string' && structuredHash !== undefined && repeats(block.text, structuredHash)) continue
    content.push(describe(block))
  }
  if (structured !== undefined) content.push({ json: structured })
  if (content.length === 0) content.push({ text: '' })
  return { toolUseId, status: result.isError === true ? 'error' : 'success', content }
}

function describe(block: McpContent): ToolResultContent {
  switch (block.type) {
    case 'text':
      return { text: str(block.text) }
    case 'image':
    case 'audio':
      return { text: `[${block.type} ${str(block.mimeType)}, ${base64Bytes(block.data)} bytes, not shown]` }
    case 'resource_link':
      return { text: `[resource ${str(block.name)} at ${str(block.uri)}]` }
    case 'resource': {
      const resource = (block.resource ?? {}) as { uri?: unknown; text?: unknown; blob?: unknown; mimeType?: unknown }
      if (typeof resource.text === 'string') return { text: resource.text }
      return { text: `[resource ${str(resource.uri)} (${str(resource.mimeType) || 'binary'}), ${base64Bytes(resource.blob)} bytes, not shown]` }
    }
    default:
      return { text: `[${block.type} content, not shown]` }
  }
}

function repeats(text: string, structuredHash: string): boolean {
  try {
    return hashValue(JSON.parse(text) as JsonValue) === structuredHash
  } catch {
    return false
  }
}

function base64Bytes(data: unknown): number {
  return typeof data === 'string' ? Math.floor((data.replace(/=+$/, '').length * 3) / 4) : 0
}

function str(value: unknown): string {
  return typeof value === 'string' ? value : ''
}
