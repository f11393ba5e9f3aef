import { FINISHED_STATUSES, type RunStore, type StoreReader } from '../store/checkpoint-store.js'
import { followRun, type RunEventsOptions } from '../runner/run-stream.js'
import { InvalidArgumentError } from '../core/errors.js'

/** A store whose run streams can be served: a reader with an event log (every Cairn store). */
export type StreamSource = StoreReader & Pick<RunStore, 'events'>

/** What {@link runEventsResponse} takes. */
export interface RunStreamResponseOptions {
  store: StreamSource
  runId: string
  /** A comment line this often keeps proxies from closing a quiet stream. Default 15 s. */
  heartbeatMs?: number
  /**
   * The longest one response streams; then it ends, and the client reconnects with the last
   * id it saw (an `EventSource` does by itself, sending `Last-Event-ID`). Default 5 minutes.
   */
  maxDurationMs?: number
  /** Passed to `runner.events` (see `RunEventsOptions.idleTimeoutMs`). */
  idleTimeoutMs?: number
}

const encoder = new TextEncoder()

/**
 * A run's durable event stream as Server-Sent Events, on the Web-standard `Request` and
 * `Response` (Next.js route handlers, Hono, Bun, Deno, Node with a fetch adapter). Each event is
 * one message whose `id:` is its cursor and whose `data:` is the event's JSON; the stream starts
 * after the request's `Last-Event-ID` header (or `?after=`), so a reconnecting client gets every
 * later event exactly once. A comment line goes out every `heartbeatMs`; the response ends after
 * the run's `run_finished` (with an `event: end` message, so a client knows not to reconnect),
 * when the client goes away, or after `maxDurationMs`. A reconnect after the end is answered
 * `204 No Content`, which stops an `EventSource`.
 *
 * Authentication and authorization are the caller's: check who asks for `runId` before you call
 * this (every run in the store is readable through it).
 *
 * @example
 * ```ts
 * export async function GET(req: Request) {
 *   const runId = new URL(req.url).searchParams.get('runId') ?? ''
 *   // ... check that the caller may read runId ...
 *   return runEventsResponse(req, { store, runId })
 * }
 * ```
 */
export async function runEventsResponse(req: Request, options: RunStreamResponseOptions): Promise<Response> {
  const after = resumeCursor(req)
  if (after !== undefined && (await finishedBefore(options.store, options.runId, after))) return new Response(null, { status: 204 })
  const stream = sseStream(req, options, async function* (signal) {
    for await (const item of followRun(options.store, options.runId, followOptions(options, after, signal))) {
      yield `id: ${item.cursor}\ndata: ${JSON.stringify(item.event)}\n\n`
      if (item.event.type === 'run_finished' && item.event.state !== 'error') yield 'event: end\ndata: {}\n\n'
    }
  })
  return new Response(stream, { headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache, no-transform', connection: 'keep-alive', 'x-accel-buffering': 'no' } })
}

/** The cursor a request resumes after: its `Last-Event-ID` header, else its `?after=`. */
export function resumeCursor(req: Request): string | undefined {
  const header = req.headers.get('last-event-id')
  if (header !== null && header !== '') return header
  const query = new URL(req.url).searchParams.get('after')
  return query === null || query === '' ? undefined : query
}

/** The run is finished and the log holds nothing after `after`. */
async function finishedBefore(store: StreamSource, runId: string, after: string): Promise<boolean> {
  const run = await store.getRun(runId)
  if (run && !FINISHED_STATUSES.includes(run.status)) return false
  return (await store.events?.read(runId, { after, limit: 1 }))?.length === 0
}

/** `runner.events` options of a response. @internal */
export function followOptions(options: RunStreamResponseOptions, after: string | undefined, signal: AbortSignal): RunEventsOptions {
  return { after, signal, ...(options.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: options.idleTimeoutMs }) }
}

/**
 * The body of an SSE response: what `produce` yields, with heartbeat comments between; bounded
 * by `maxDurationMs` and the request's signal (both abort the signal `produce` is given).
 * @internal
 */
export function sseStream(req: Request, options: RunStreamResponseOptions, produce: (signal: AbortSignal) => AsyncIterable<string>): ReadableStream<Uint8Array> {
  const heartbeatMs = options.heartbeatMs ?? 15_000
  const maxDurationMs = options.maxDurationMs ?? 300_000
  for (const [name, value] of [['heartbeatMs', heartbeatMs], ['maxDurationMs', maxDurationMs]] as const) {
    if (!(Number.isFinite(value) && value > 0)) throw new InvalidArgumentError(`${name} must be a positive number of ms, got ${String(value)}`)
  }
  const controller = new AbortController()
  const signal = AbortSignal.any([controller.signal, req.signal])
  let heartbeat: NodeJS.Timeout | undefined
  let lifetime: NodeJS.Timeout | undefined
  const stop = () => {
    clearInterval(heartbeat)
    clearTimeout(lifetime)
    controller.abort()
  }
  return new ReadableStream<Uint8Array>({
    start(out) {
      const send = (text: string) => {
        try {
          out.enqueue(encoder.encode(text))
        } catch {
          stop()
        }
      }
      send('retry: 1000\n\n')
      heartbeat = setInterval(() => send(': keep-alive\n\n'), heartbeatMs)
      lifetime = setTimeout(stop, maxDurationMs)
      void (async () => {
        try {
          for await (const text of produce(signal)) send(text)
        } catch (err) {
          send(`event: error\ndata: ${JSON.stringify({ message: err instanceof Error ? err.message : String(err) })}\n\n`)
        } finally {
          stop()
          try {
            out.close()
          } catch {
            // The client went away first.
          }
        }
      })()
    },
    cancel() {
      stop()
    },
  })
}
