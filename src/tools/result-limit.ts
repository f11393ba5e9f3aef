import { encodeValue, isPassThrough } from '../core/codec.js'
import { CheckpointError } from '../core/errors.js'
import { limits } from '../core/limits.js'
import type { ToolResultBlock } from '../model/messages.js'
import { errorResult, unstorableResultText } from './tool.js'

type ToolResult = ToolResultBlock['toolResult']

/**
 * Apply the tool-result limit (`maxToolResultChars`, `toolResultPolicy` in {@link CairnLimits})
 * to a tool's result before the model, the journal or a checkpoint sees it. A result within the
 * limit is returned as it is. A larger one is, under `'truncate'`, one text block holding its
 * first `maxToolResultChars` characters (text as is, JSON as its text) and a note saying how
 * much was cut; under `'refuse'`, an error result saying it was too large.
 *
 * @example
 * ```ts
 * boundToolResult({ toolUseId: 't1', status: 'success', content: [{ text: hugeText }] }, 'fetch_page')
 * ```
 */
export function boundToolResult(result: ToolResult, toolName: string): ToolResult {
  const { maxToolResultChars: limit, toolResultPolicy } = limits()
  const parts = textsOf(result)
  if (parts === undefined) return result
  const size = parts.reduce((sum, part) => sum + part.length, 0)
  if (size <= limit) return result
  if (toolResultPolicy === 'refuse') {
    return errorResult(
      result.toolUseId,
      `Tool ${toolName} returned a result of ${size} characters, more than the limit maxToolResultChars (${limit}); the result was not kept. Ask for less (a page, a summary, a filter).`,
    )
  }
  const kept = parts.join('\n').slice(0, limit)
  const note = `\n[Cairn truncated this result of tool ${toolName}: ${size} characters, of which the first ${limit} are kept (limit maxToolResultChars)]`
  return { toolUseId: result.toolUseId, status: result.status, content: [{ text: kept + note }] }
}

/**
 * A tool result the checkpoint codec would refuse (a cycle, a function, nesting deeper than
 * `maxDepth`, a BigInt longer than `maxBigIntDigits`) becomes an error result saying so, which
 * the model sees and the journal records; any other result is returned as it is. A tool made
 * with `tool()` already answers this way; this covers a `Tool` written by hand.
 */
export function storableToolResult(result: ToolResult, toolName: string): ToolResult {
  if (isPassThrough(result.content)) return result
  try {
    encodeValue(result.content, `result of tool ${toolName}`)
    return result
  } catch (err) {
    if (!(err instanceof CheckpointError)) throw err
    return errorResult(result.toolUseId, unstorableResultText(toolName, err))
  }
}

/** The result's blocks as text (JSON as its text), or undefined when one cannot be measured. */
function textsOf(result: ToolResult): string[] | undefined {
  if (!Array.isArray(result?.content)) return undefined
  const parts: string[] = []
  for (const block of result.content as unknown[]) {
    if (typeof block !== 'object' || block === null) return undefined
    if (typeof (block as { text?: unknown }).text === 'string') {
      parts.push((block as { text: string }).text)
      continue
    }
    try {
      const json = JSON.stringify((block as { json?: unknown }).json)
      if (typeof json !== 'string') return undefined
      parts.push(json)
    } catch {
      // Not JSON (a BigInt, a cycle): left for the codec to refuse with a path.
      return undefined
    }
  }
  return parts
}
