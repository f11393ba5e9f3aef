import type { ResponseInputContent, ResponseInputItem } from 'openai/resources/responses/responses'
import type { ContentBlock, Message } from '../../model/messages.js'
import { metadataOf, toolResultText, urlOf } from '../shared.js'

/** The Responses API input for `messages` (all of them, or only those after the last assistant turn). */
export function responsesInput(messages: readonly Message[], onlyNew: boolean): ResponseInputItem[] {
  const lastAssistant = messages.findLastIndex((message) => message.role === 'assistant')
  const from = onlyNew ? lastAssistant + 1 : 0
  return messages.slice(from).flatMap((message) => (message.role === 'assistant' ? assistantItems(message.content) : userItems(message.content)))
}

function userItems(blocks: readonly ContentBlock[]): ResponseInputItem[] {
  const items: ResponseInputItem[] = []
  const parts: ResponseInputContent[] = []
  for (const block of blocks) {
    if ('toolResult' in block) items.push({ type: 'function_call_output', call_id: block.toolResult.toolUseId, output: toolResultText(block.toolResult) })
    else if ('text' in block) parts.push({ type: 'input_text', text: block.text })
    else if ('image' in block) parts.push({ type: 'input_image', image_url: urlOf(block.image.mediaType, block.image.source), detail: 'auto' })
    else if ('document' in block) {
      const { source, mediaType, name } = block.document
      parts.push('url' in source ? { type: 'input_file', file_url: source.url } : { type: 'input_file', file_data: urlOf(mediaType, source), filename: name ?? 'document' })
    }
  }
  if (parts.length > 0) items.push({ role: 'user', content: parts })
  return items
}

function assistantItems(blocks: readonly ContentBlock[]): ResponseInputItem[] {
  const items: ResponseInputItem[] = []
  for (const block of blocks) {
    const meta = metadataOf(block, 'openai')
    const itemId = typeof meta?.itemId === 'string' ? meta.itemId : undefined
    if ('text' in block) {
      items.push(
        itemId
          ? { type: 'message', role: 'assistant', id: itemId, status: 'completed', content: [{ type: 'output_text', text: block.text, annotations: [] }] }
          : { role: 'assistant', content: block.text },
      )
    } else if ('toolUse' in block) {
      const { toolUseId, name, input } = block.toolUse
      items.push({ type: 'function_call', call_id: toolUseId, name, arguments: JSON.stringify(input), ...(itemId ? { id: itemId } : {}) })
    } else if ('reasoning' in block && itemId) {
      // Reasoning from another provider has no OpenAI item id and cannot be sent back; it is left out.
      const summary = Array.isArray(meta?.summary) ? meta.summary.map(String) : block.reasoning.text === '' ? [] : [block.reasoning.text]
      items.push({
        type: 'reasoning',
        id: itemId,
        summary: summary.map((text) => ({ type: 'summary_text', text })),
        ...(block.reasoning.redactedContent === undefined ? {} : { encrypted_content: block.reasoning.redactedContent }),
      })
    }
  }
  return items
}
