import type { ContentBlockParam, MessageParam, TextBlockParam, ToolUnion } from '@anthropic-ai/sdk/resources/messages/messages'
import type { JsonObject } from '../../core/codec.js'
import type { ContentBlock, MediaSource, Message } from '../../model/messages.js'
import type { ToolSpec } from '../../model/model.js'
import { base64Of, metadataOf, toolResultText } from '../shared.js'

type CacheControl = { type: 'ephemeral'; ttl?: '5m' | '1h' }

/** Cairn messages as Messages API messages; reasoning goes back with its signature, unchanged. */
export function anthropicMessages(messages: readonly Message[]): MessageParam[] {
  return messages.map((message) => ({ role: message.role, content: message.content.flatMap(blockParam) }))
}

/** The system prompt, with a cache marker when asked. */
export function anthropicSystem(systemPrompt: string, cache: boolean): string | TextBlockParam[] {
  return cache ? [{ type: 'text', text: systemPrompt, cache_control: { type: 'ephemeral' } }] : systemPrompt
}

/** Tool definitions; with `cache`, the last one carries a cache marker (caching every tool before it). */
export function anthropicTools(tools: readonly ToolSpec[], cache: boolean): ToolUnion[] {
  return tools.map((t, i) => ({
    name: t.name,
    description: t.description,
    input_schema: t.inputSchema as { type: 'object' } & JsonObject,
    ...(cache && i === tools.length - 1 ? { cache_control: { type: 'ephemeral' as const } } : {}),
  }))
}

function blockParam(block: ContentBlock): ContentBlockParam[] {
  const cache = cacheControlOf(block)
  const marker = cache ? { cache_control: cache } : {}
  if ('text' in block) return block.text === '' ? [] : [{ type: 'text', text: block.text, ...marker }]
  if ('toolUse' in block) return [{ type: 'tool_use', id: block.toolUse.toolUseId, name: block.toolUse.name, input: block.toolUse.input, ...marker }]
  if ('toolResult' in block) {
    const r = block.toolResult
    return [{ type: 'tool_result', tool_use_id: r.toolUseId, content: toolResultText(r), ...(r.status === 'error' ? { is_error: true } : {}), ...marker }]
  }
  if ('reasoning' in block) {
    const { text, signature, redactedContent } = block.reasoning
    if (redactedContent !== undefined && signature === undefined) return [{ type: 'redacted_thinking', data: redactedContent }]
    // Reasoning without a signature came from another provider: Anthropic would reject it.
    return signature === undefined ? [] : [{ type: 'thinking', thinking: text, signature }]
  }
  if ('image' in block) return [{ type: 'image', source: imageSource(block.image.mediaType, block.image.source), ...marker }]
  if ('document' in block) {
    const { mediaType, source, name } = block.document
    return [{ type: 'document', source: documentSource(mediaType, source), ...(name === undefined ? {} : { title: name }), ...marker }]
  }
  return []
}

function imageSource(mediaType: string, source: MediaSource) {
  if ('url' in source) return { type: 'url' as const, url: source.url }
  return { type: 'base64' as const, media_type: mediaType as 'image/png', data: base64Of(source.bytes) }
}

function documentSource(mediaType: string, source: MediaSource) {
  if ('url' in source) return { type: 'url' as const, url: source.url }
  if (mediaType === 'text/plain') return { type: 'text' as const, media_type: 'text/plain' as const, data: Buffer.from(source.bytes).toString('utf8') }
  return { type: 'base64' as const, media_type: 'application/pdf' as const, data: base64Of(source.bytes) }
}

/** A block's `anthropic.cacheControl` metadata (`{ type: 'ephemeral' }`), passed through as `cache_control`. */
function cacheControlOf(block: ContentBlock): CacheControl | undefined {
  const value = metadataOf(block, 'anthropic')?.cacheControl
  return typeof value === 'object' && value !== null && !Array.isArray(value) && value.type === 'ephemeral' ? (value as CacheControl) : undefined
}
