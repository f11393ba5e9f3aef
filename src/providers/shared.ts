import type { JsonObject } from '../core/codec.js'
import type { ContentBlock, MediaSource, ModelStopReason, ToolResultBlock } from '../model/messages.js'
import { ModelError } from '../model/model.js'
import type { CallBoundsOptions } from './call-bounds.js'

/** Options every adapter takes: the client's retries and timeout, and the bounds of each call. */
export interface AdapterOptions extends CallBoundsOptions {
  /** How often the client retries a transient failure (429, 5xx, overloaded, a reset connection). */
  maxRetries?: number
  /** The client's timeout of one HTTP request until its response begins, in milliseconds (see also `idleTimeoutMs` and `totalTimeoutMs`). */
  timeoutMs?: number
}

/** `bytes` as base64. */
export function base64Of(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64')
}

/** A `data:` URL for inline bytes, or the URL itself. */
export function urlOf(mediaType: string, source: MediaSource): string {
  return 'url' in source ? source.url : `data:${mediaType};base64,${base64Of(source.bytes)}`
}

/** A tool result's content as one text (JSON parts as JSON text). */
export function toolResultText(result: ToolResultBlock['toolResult']): string {
  return result.content.map((part) => ('text' in part ? part.text : JSON.stringify(part.json))).join('\n')
}

/** The metadata `provider` attached to a block, if any. */
export function metadataOf(block: ContentBlock, provider: string): JsonObject | undefined {
  return block.providerMetadata?.[provider]
}

/** Replace every occurrence of each secret in `text`. */
export function redact(text: string, secrets: readonly (string | undefined)[]): string {
  let out = text
  for (const secret of secrets) if (secret && secret.length >= 8) out = out.split(secret).join('[redacted]')
  // Key-shaped tokens the server may echo back, whole or shortened.
  return out.replace(/\b(sk-[A-Za-z0-9_-]{2})[A-Za-z0-9_*-]{6,}/g, '$1…[redacted]')
}

/** True for the errors an aborted request ends with, in any of the client libraries. */
export function isAbort(err: unknown, signal: AbortSignal | undefined): boolean {
  if (signal?.aborted) return true
  const name = (err as { name?: unknown } | null)?.name
  return name === 'AbortError' || name === 'APIUserAbortError'
}

/** What the client libraries' API errors carry, read structurally. */
interface ApiErrorShape {
  status?: unknown
  statusCode?: unknown
  requestID?: unknown
  headers?: unknown
  isRetryable?: unknown
  message?: unknown
}

/**
 * Turn whatever a client threw into a {@link ModelError} with the provider, model, status and
 * request id, its message cleaned of API keys. An abort is given back unchanged.
 */
export function toModelError(err: unknown, ctx: { provider: string; model: string; secrets: readonly (string | undefined)[]; status?: number; requestId?: string }): unknown {
  if (err instanceof ModelError) return err
  const shape = (typeof err === 'object' && err !== null ? err : {}) as ApiErrorShape
  const status = typeof shape.status === 'number' ? shape.status : typeof shape.statusCode === 'number' ? shape.statusCode : ctx.status
  const requestId = typeof shape.requestID === 'string' ? shape.requestID : requestIdFromHeaders(shape.headers) ?? ctx.requestId
  const message = typeof shape.message === 'string' ? shape.message : String(err)
  const retryable = shape.isRetryable === true || status === 429 || status === 408 || (status !== undefined && status >= 500) || status === undefined
  return new ModelError(redact(message, ctx.secrets), { provider: ctx.provider, model: ctx.model, status, requestId, retryable })
}

function requestIdFromHeaders(headers: unknown): string | undefined {
  if (!headers || typeof headers !== 'object') return undefined
  const get = (name: string): unknown => (typeof (headers as Headers).get === 'function' ? (headers as Headers).get(name) : (headers as Record<string, unknown>)[name])
  const id = get('x-request-id') ?? get('request-id')
  return typeof id === 'string' ? id : undefined
}

/** The stop reasons adapters map onto, beyond the common ones. */
export const STOP = {
  refusal: 'refusal',
  contentFiltered: 'content_filtered',
  maxTokens: 'max_tokens',
  toolUse: 'tool_use',
  endTurn: 'end_turn',
} as const satisfies Record<string, ModelStopReason>
