/**
 * `cairn-agents/http`: a run's durable event stream over HTTP, on the Web-standard `Request`
 * and `Response`: Server-Sent Events with cursors as ids ({@link runEventsResponse}), and the
 * AI SDK's UI message stream for `useChat` clients that resume after a refresh
 * ({@link runUIMessageStreamResponse}). Authentication is the caller's.
 */
export { resumeCursor, runEventsResponse, type RunStreamResponseOptions, type StreamSource } from './http/sse-response.js'
export { runUIMessageStreamResponse, uiMessageStreamResponse } from './http/ui-message-stream.js'
