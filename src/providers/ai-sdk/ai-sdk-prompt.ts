import type { JsonValue } from '../../core/codec.js'
import type { ContentBlock, MediaSource, Message, ProviderMetadata } from '../../model/messages.js'

/** The AI SDK prompt for a conversation, in the shape of specification `version`. */
export function aiSdkPrompt(params: { messages: readonly Message[]; systemPrompt: string | undefined; version: 'v2' | 'v3' | 'v4' }): unknown[] {
  const names = new Map<string, string>()
  for (const message of params.messages) for (const block of message.content) if ('toolUse' in block) names.set(block.toolUse.toolUseId, block.toolUse.name)
  const prompt: unknown[] = params.systemPrompt === undefined ? [] : [{ role: 'system', content: params.systemPrompt }]
  for (const message of params.messages) {
    if (message.role === 'assistant') {
      prompt.push({ role: 'assistant', content: message.content.flatMap((block) => assistantPart(block)) })
      continue
    }
    const results = message.content.flatMap((block) => ('toolResult' in block ? [block] : []))
    if (results.length > 0) {
      prompt.push({
        role: 'tool',
        content: results.map(({ toolResult: r }) => ({
          type: 'tool-result',
          toolCallId: r.toolUseId,
          // The AI SDK needs the tool's name: it is the one of the matching tool use.
          toolName: names.get(r.toolUseId) ?? 'unknown',
          output: outputOf(r.status, r.content),
        })),
      })
    }
    const parts = message.content.flatMap((block) => userPart(block, params.version))
    if (parts.length > 0) prompt.push({ role: 'user', content: parts })
  }
  return prompt
}

function assistantPart(block: ContentBlock): unknown[] {
  const options = optionsOf(block.providerMetadata)
  if ('text' in block) return [{ type: 'text', text: block.text, ...options }]
  if ('reasoning' in block) return [{ type: 'reasoning', text: block.reasoning.text, ...options }]
  if ('toolUse' in block) return [{ type: 'tool-call', toolCallId: block.toolUse.toolUseId, toolName: block.toolUse.name, input: block.toolUse.input, ...options }]
  return []
}

function userPart(block: ContentBlock, version: 'v2' | 'v3' | 'v4'): unknown[] {
  const options = optionsOf(block.providerMetadata)
  if ('text' in block) return [{ type: 'text', text: block.text, ...options }]
  if ('image' in block) return [{ type: 'file', mediaType: block.image.mediaType, data: fileData(block.image.source, version), ...options }]
  if ('document' in block) {
    const { mediaType, source, name } = block.document
    return [{ type: 'file', mediaType, data: fileData(source, version), ...(name === undefined ? {} : { filename: name }), ...options }]
  }
  return []
}

function fileData(source: MediaSource, version: 'v2' | 'v3' | 'v4'): unknown {
  if (version === 'v4') return 'url' in source ? { type: 'url', url: new URL(source.url) } : { type: 'data', data: source.bytes }
  return 'url' in source ? new URL(source.url) : source.bytes
}

function outputOf(status: 'success' | 'error', content: ({ text: string } | { json: JsonValue })[]): unknown {
  const only = content.length === 1 ? content[0] : undefined
  if (only && 'json' in only) return { type: status === 'error' ? 'error-json' : 'json', value: only.json }
  const text = content.map((part) => ('text' in part ? part.text : JSON.stringify(part.json))).join('\n')
  return { type: status === 'error' ? 'error-text' : 'text', value: text }
}

/** Block metadata goes back as the part's provider options (the AI SDK keys both by provider). */
function optionsOf(metadata: ProviderMetadata | undefined): { providerOptions?: ProviderMetadata } {
  return metadata && Object.keys(metadata).length > 0 ? { providerOptions: metadata } : {}
}
