import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/** One recorded server answer, replayed for one request. */
export interface Replay {
  status?: number
  headers?: Record<string, string>
  /** A JSON body. */
  json?: unknown
  /** Server-sent events: `data` objects are JSON-encoded, strings are sent as they are. */
  sse?: { event?: string; data: unknown }[]
  /** A body sent as it is (bad JSON, a broken event stream). */
  raw?: string
  /** Destroy the connection after this many bytes of the body (a cut stream). */
  cutAfterBytes?: number
  /** Send the headers and this many bytes, then wait until the client goes away (for abort tests). */
  holdAfterBytes?: number
  /** While holding (see `holdAfterBytes`), write this text again and again (keep-alive bytes, or a stream that never ends). */
  trickle?: { text: string; everyMs: number }
}

/** A request as the server saw it. */
export interface RecordedRequest {
  method: string
  path: string
  headers: Record<string, string | string[] | undefined>
  body: unknown
}

/**
 * A local HTTP server that replays recorded provider answers in order, one per request, and
 * records every request. Bodies go out in many small TCP writes of uneven sizes, so an event, a
 * JSON token or a multi-byte character is split across reads the way a real network splits it.
 */
export class ReplayServer {
  readonly requests: RecordedRequest[] = []
  readonly #queue: Replay[] = []
  readonly #server: Server
  #url = ''
  /** Called when a held answer's client goes away. */
  onClientGone: (() => void) | undefined

  constructor() {
    this.#server = createServer((req, res) => void this.#handle(req, res))
  }

  /** Start listening on a free port of 127.0.0.1; returns the base URL. */
  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve))
    this.#url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`
    return this.#url
  }

  get url(): string {
    return this.#url
  }

  /** Queue answers for the next requests. */
  enqueue(...replays: Replay[]): this {
    this.#queue.push(...replays)
    return this
  }

  /** Answers not used yet. */
  get pending(): number {
    return this.#queue.length
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections()
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const text = Buffer.concat(chunks).toString('utf8')
    let body: unknown = text
    try {
      body = text === '' ? undefined : JSON.parse(text)
    } catch {
      // Kept as text.
    }
    this.requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body })
    const replay = this.#queue.shift()
    if (!replay) {
      res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'the replay server has no answer queued for this request' } }))
      return
    }
    await this.#reply(res, replay)
  }

  async #reply(res: ServerResponse, replay: Replay): Promise<void> {
    const isSse = replay.sse !== undefined
    const payload = isSse ? encodeSse(replay.sse!) : replay.raw ?? JSON.stringify(replay.json ?? {})
    res.socket?.setNoDelay(true)
    res.writeHead(replay.status ?? 200, {
      'content-type': isSse ? 'text/event-stream' : 'application/json',
      ...(isSse ? { 'cache-control': 'no-cache' } : {}),
      ...replay.headers,
    })
    // A held answer's headers go out at once, even when no byte of its body follows (a stalled stream).
    if (replay.holdAfterBytes !== undefined) res.flushHeaders()
    if (replay.holdAfterBytes !== undefined) res.on('close', () => this.onClientGone?.())
    const bytes = Buffer.from(payload, 'utf8')
    const stop = replay.cutAfterBytes ?? replay.holdAfterBytes ?? bytes.length
    await writeAwkwardly(res, bytes.subarray(0, stop))
    if (replay.cutAfterBytes !== undefined) {
      res.socket?.destroy()
      return
    }
    if (replay.holdAfterBytes !== undefined) {
      if (replay.trickle) trickle(res, replay.trickle)
      return
    }
    res.end()
  }
}

/** Write `text` every `everyMs` until the connection closes. */
function trickle(res: ServerResponse, { text, everyMs }: { text: string; everyMs: number }): void {
  const timer = setInterval(() => {
    if (res.destroyed) clearInterval(timer)
    else res.write(text)
  }, everyMs)
  res.on('close', () => clearInterval(timer))
}

function encodeSse(events: { event?: string; data: unknown }[]): string {
  return events.map((e) => `${e.event === undefined ? '' : `event: ${e.event}\n`}data: ${typeof e.data === 'string' ? e.data : JSON.stringify(e.data)}\n\n`).join('')
}

/** Uneven pieces (1 to 29 bytes, a fixed sequence), each its own write after a turn of the event loop. */
async function writeAwkwardly(res: ServerResponse, bytes: Buffer): Promise<void> {
  const sizes = [1, 7, 3, 29, 2, 13, 5, 17, 11, 4, 23, 6]
  let at = 0
  for (let i = 0; at < bytes.length && !res.destroyed; i++) {
    const size = sizes[i % sizes.length]!
    res.write(bytes.subarray(at, at + size))
    at += size
    await new Promise((resolve) => setImmediate(resolve))
  }
}
