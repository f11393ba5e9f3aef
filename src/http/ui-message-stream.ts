import type { JsonObject } from '../core/codec.js'
import type { RunEvent } from '../observe/run-events.js'
import { followRun } from '../runner/run-stream.js'
import { FINISHED_STATUSES, WAITING_STATUSES } from '../store/checkpoint-store.js'
import { followOptions, sseStream, type RunStreamResponseOptions } from './sse-response.js'

/**
 * A run's durable stream as an AI SDK UI message stream (protocol v1: `start`, `text-*`,
 * `reasoning-*`, `tool-input-available`, `tool-output-available`, `finish`, then `[DONE]`), the
 * response a `useChat` client reads. Every response starts from the run's first event, so a
 * client that reloads the page mid-run and asks again (`useChat({ resume: true })` sends
 * `GET <api>/<chatId>/stream`) rebuilds the whole message and then follows the live run.
 *
 * A model call that a crash cut off is left out when the response starts after the crash; when
 * the crash happens while the client is connected, its text part ends and a
 * `data-cairn-voided` part (`{ step, partIds }`) tells the page which parts to hide before the
 * resumed run's answer streams: each text and reasoning part carries its id as
 * `part.providerMetadata.cairn.partId`. Interrupts arrive as `data-cairn-interrupt` parts. A run that is
 * not running (finished, paused, or unknown) is answered `204 No Content`: nothing to resume.
 *
 * Authentication and authorization are the caller's, as for {@link runEventsResponse}.
 *
 * @example
 * ```ts
 * // app/api/chat/[id]/stream/route.ts
 * export async function GET(req: Request, ctx: { params: Promise<{ id: string }> }) {
 *   const { id } = await ctx.params
 *   return runUIMessageStreamResponse(req, { store, runId: id })
 * }
 * ```
 */
export async function runUIMessageStreamResponse(req: Request, options: RunStreamResponseOptions): Promise<Response> {
  const run = await options.store.getRun(options.runId)
  if (!run || FINISHED_STATUSES.includes(run.status) || WAITING_STATUSES.includes(run.status)) return new Response(null, { status: 204 })
  return uiMessageStreamResponse(req, options)
}

/** {@link runUIMessageStreamResponse} for any run, finished or not: its whole message, replayed. */
export function uiMessageStreamResponse(req: Request, options: RunStreamResponseOptions): Response {
  const stream = sseStream(req, options, async function* (signal) {
    const log = options.store.events
    const ui = new UIMessageTranslator(options.runId)
    yield frame({ type: 'start', messageId: options.runId })
    // What the log holds already is read first, so cut-off model calls in it can be left out.
    const backlog: RunEvent[] = []
    let after: string | undefined
    for (;;) {
      const page = (await log?.read(options.runId, { after, limit: 1000 })) ?? []
      for (const stored of page) backlog.push(stored.event as unknown as RunEvent)
      after = page[page.length - 1]?.cursor ?? after
      if (page.length < 1000) break
    }
    const voided = voidedDeltas(backlog)
    let ended = false
    for (const [i, event] of backlog.entries()) {
      if (voided.has(i) || event.type === 'model_call_voided') continue
      for (const chunk of ui.translate(event)) yield frame(chunk)
      if (event.type === 'run_finished' && event.state !== 'error') ended = true
    }
    if (!ended) {
      for await (const { event } of followRun(options.store, options.runId, followOptions(options, after, signal))) {
        for (const chunk of ui.translate(event)) yield frame(chunk)
        if (event.type === 'run_finished' && event.state !== 'error') ended = true
      }
    }
    if (ended) yield 'data: [DONE]\n\n'
  })
  return new Response(stream, {
    headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-vercel-ai-ui-message-stream': 'v1', 'x-accel-buffering': 'no' },
  })
}

/** Indexes of the text and reasoning deltas of model calls a later `model_call_voided` voids. */
function voidedDeltas(events: readonly RunEvent[]): Set<number> {
  const voided = new Set<number>()
  const open = new Map<number, number[]>()
  for (const [i, event] of events.entries()) {
    if (event.type === 'model_call_started') open.set(event.step, [])
    else if (event.type === 'text_delta' || event.type === 'reasoning_delta') open.get(event.step)?.push(i)
    else if (event.type === 'model_call_finished') open.delete(event.step)
    else if (event.type === 'model_call_voided') {
      for (const index of open.get(event.step) ?? []) voided.add(index)
      open.delete(event.step)
    }
  }
  return voided
}

function frame(chunk: JsonObject): string {
  return `data: ${JSON.stringify(chunk)}\n\n`
}

/** Run events to UI message chunks, keeping which text and reasoning parts are open. */
class UIMessageTranslator {
  readonly #runId: string
  #open: { kind: 'text' | 'reasoning'; id: string; step: number } | undefined
  readonly #stepParts = new Map<number, string[]>()
  readonly #inputs = new Set<string>()
  #parts = 0

  constructor(runId: string) {
    this.#runId = runId
  }

  translate(event: RunEvent): JsonObject[] {
    switch (event.type) {
      case 'text_delta':
      case 'reasoning_delta': {
        const kind = event.type === 'text_delta' ? 'text' : 'reasoning'
        const out: JsonObject[] = []
        if (!this.#open || this.#open.kind !== kind || this.#open.step !== event.step) {
          out.push(...this.#close())
          const id = `${this.#runId}-${kind}-${++this.#parts}`
          this.#open = { kind, id, step: event.step }
          this.#stepParts.set(event.step, [...(this.#stepParts.get(event.step) ?? []), id])
          // The part's id travels in its provider metadata: the UI message keeps that, not the id.
          out.push({ type: `${kind}-start`, id, providerMetadata: { cairn: { partId: id, step: event.step } } })
        }
        out.push({ type: `${kind}-delta`, id: this.#open.id, delta: event.text })
        return out
      }
      case 'model_call_started':
        this.#stepParts.delete(event.step)
        return this.#close()
      case 'model_call_finished':
        return this.#close()
      case 'model_call_voided':
        return [...this.#close(), { type: 'data-cairn-voided', data: { step: event.step, partIds: this.#stepParts.get(event.step) ?? [] } }]
      case 'tool_call_started':
        this.#inputs.add(event.toolUseId)
        return [...this.#close(), { type: 'tool-input-available', toolCallId: event.toolUseId, toolName: event.name, input: event.input ?? {} }]
      case 'tool_call_finished':
      case 'tool_call_replayed': {
        const out = this.#close()
        if (!this.#inputs.has(event.toolUseId)) {
          this.#inputs.add(event.toolUseId)
          out.push({ type: 'tool-input-available', toolCallId: event.toolUseId, toolName: event.name, input: {} })
        }
        const output = event.output ?? null
        out.push(
          event.status === 'success'
            ? { type: 'tool-output-available', toolCallId: event.toolUseId, output }
            : { type: 'tool-output-error', toolCallId: event.toolUseId, errorText: typeof output === 'string' ? output : JSON.stringify(output) },
        )
        return out
      }
      case 'interrupt':
        return [...this.#close(), { type: 'data-cairn-interrupt', data: { interrupts: event.interrupts.map((i) => ({ id: i.id, name: i.name, reason: (i.reason ?? null) as JsonObject })) } }]
      case 'run_finished': {
        if (event.state === 'error') return []
        const out = this.#close()
        if (event.state === 'failed') out.push({ type: 'error', errorText: event.error ?? 'the run failed' })
        out.push({ type: 'finish', finishReason: event.state === 'completed' ? 'stop' : event.state === 'failed' ? 'error' : 'other' })
        return out
      }
      default:
        return []
    }
  }

  #close(): JsonObject[] {
    const open = this.#open
    this.#open = undefined
    return open ? [{ type: `${open.kind}-end`, id: open.id }] : []
  }
}
