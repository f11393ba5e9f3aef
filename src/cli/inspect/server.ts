import { randomBytes } from 'node:crypto'
import { serve, type ServerType } from '@hono/node-server'
import { Hono, type Context as HonoContext } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { CairnError, diffCheckpoints, forkRun, summarizeRun, type CheckpointStore, type JsonObject, type JsonValue, type RunRecord, type RunStatus } from '../../index.js'
import { encodeValue } from '../../engine.js'
import { runEventsResponse } from '../../http.js'
import { findRuns } from '../read-commands.js'
import { threadRunSummary } from '../thread-summary.js'
import { answersOf, osUser, questionsOf } from '../run-answers.js'
import type { AgentFactories } from '../write-commands.js'
import { Answering } from './answers.js'
import { MAX_PAYLOAD_ITEMS, PAYLOAD_ITEMS, readPayload } from './checkpoint-payloads.js'
import { EventTails } from './event-tails.js'
import { guard, refuse } from './guard.js'
import { INSPECTOR_PAGE, INSPECTOR_SCRIPT, INSPECTOR_STYLE } from './page.js'
import { TimelinePages } from './timeline-pages.js'
import { threadRoutes } from './thread-pages.js'
import { waitingFor } from '../time-commands.js'

/** A running inspector. */
export interface Inspector {
  /** The URL to open, with the access token (traded for a cookie on the first load). */
  url: string
  port: number
  close(): Promise<void>
}

/** What {@link startInspector} takes. */
export interface InspectorOptions {
  /** 0 (the default): any free port. */
  port?: number
  /** Agent factories by name: with them, a run a Runner paused is resumed from the page once answered. */
  agents?: AgentFactories
  /** Where the failure of a resume started from the page is reported. */
  onError?: (err: unknown, runId: string) => void
}

/** The largest request body the inspector reads: its requests are a few ids and an answer. */
export const MAX_BODY_BYTES = 64 * 1024
/** The most checkpoints, effects and messages one answer carries. */
const MAX_PAGE = 500
const JOURNAL_ROWS = 100
const CONVERSATION_MESSAGES = 40

/** No script or style but the inspector's own files; no frames, no forms, no other origin. */
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/**
 * Serve the inspector for `store` on 127.0.0.1 only. Every request must carry the random access
 * token: the printed URL's `token` is traded for an HttpOnly cookie on the first load (and
 * dropped from the address), and scripts may send it as the `x-cairn-token` header.
 */
export async function startInspector(store: CheckpointStore, options: InspectorOptions = {}): Promise<Inspector> {
  const token = randomBytes(24).toString('hex')
  const answering = new Answering({ store, agents: options.agents, onError: options.onError ?? ((err, runId) => console.error(`cairn inspect: resuming run ${runId} failed: ${(err as Error).message}`)) })
  const app = inspectorApp(store, token, answering)
  const server = await listen(app, options.port ?? 0)
  const address = server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  return {
    url: `http://127.0.0.1:${port}/?token=${token}`,
    port,
    close: async () => {
      await answering.close()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** The inspector's routes: one page and a small JSON API over the store. */
export function inspectorApp(store: CheckpointStore, token: string, answering = new Answering({ store, onError: () => {} })): Hono {
  const app = new Hono()
  const pages = new TimelinePages(store)
  const summaries = new RunSummaries(store)
  app.use('*', guard(token, CSP))
  app.get('/', (c) => c.html(INSPECTOR_PAGE))
  app.get('/inspector.js', (c) => c.body(INSPECTOR_SCRIPT, 200, { 'content-type': 'text/javascript; charset=utf-8' }))
  app.get('/inspector.css', (c) => c.body(INSPECTOR_STYLE, 200, { 'content-type': 'text/css; charset=utf-8' }))
  threadRoutes(app, store)
  app.get('/api/runs', async (c) => {
    const status = c.req.query('status') || undefined
    const runs = await findRuns(store, { limit: count(c.req.query('limit'), 200), ...(status ? { status: status as RunStatus } : {}), ...(c.req.query('q') ? { search: c.req.query('q')! } : {}) })
    return c.json(await Promise.all(runs.map(async (run) => ({ ...(await summaries.of(run)), waitingFor: await waitingFor(store, run) }))))
  })
  app.get('/api/runs/:runId', async (c) => {
    const run = await store.getRun(c.req.param('runId'))
    if (!run) return refuse(c, 404, `run ${c.req.param('runId')} is not in this store`)
    return c.json(encodeValue({ run, questions: await questionsOf(store, run), answers: answersOf(run), answerer: osUser() }))
  })
  app.get('/api/runs/:runId/timeline', async (c) => {
    const after = c.req.query('after')
    const page = await pages.page(c.req.param('runId'), {
      limit: count(c.req.query('limit'), 100),
      ...(c.req.query('before') ? { before: c.req.query('before')! } : {}),
      ...(after === undefined ? {} : { after: seqOf(after) }),
    })
    return c.json(encodeValue({ status: page.run.status, lastSeq: page.run.lastSeq, entries: page.entries, fromStart: page.fromStart, gap: page.gap, streams: store.events !== undefined }))
  })
  // The run's durable event stream (SSE), which a live view follows; with ?tail, from its newest event on.
  const tails = store.events && new EventTails(store.events)
  app.get('/api/runs/:runId/events', async (c) => {
    const runId = c.req.param('runId')
    if (!tails) return refuse(c, 404, 'this store keeps no event log; the page reads the timeline instead')
    const req = c.req.raw
    if (c.req.query('tail') === undefined || req.headers.get('last-event-id')) return runEventsResponse(req, { store, runId })
    const url = new URL(req.url)
    const newest = await tails.newest(runId)
    if (newest !== undefined) url.searchParams.set('after', newest)
    return runEventsResponse(new Request(url, { headers: req.headers, signal: req.signal }), { store, runId })
  })
  app.get('/api/runs/:runId/journal', async (c) => {
    const runId = c.req.param('runId')
    const [effects, conversation] = await Promise.all([store.listEffects(runId), pages.conversation(runId, CONVERSATION_MESSAGES)])
    return c.json(encodeValue({ effects: effects.slice(-JOURNAL_ROWS), effectCount: effects.length, messages: conversation.messages, messageCount: conversation.count }))
  })
  app.get('/api/checkpoints/:id', async (c) => {
    const items = c.req.query('items')
    const payload = await readPayload(store, c.req.param('id'), items === undefined ? PAYLOAD_ITEMS : itemsOf(items))
    return c.json({ ...payload, record: encodeValue(payload.record) })
  })
  app.get('/api/diff', async (c) => c.json(encodeValue(await diffCheckpoints(store, c.req.query('a') ?? '', c.req.query('b') ?? ''))))
  const limit = bodyLimit({ maxSize: MAX_BODY_BYTES, onError: (c) => refuse(c, 413, `a request body holds at most ${MAX_BODY_BYTES} bytes`) })
  app.post('/api/fork', limit, async (c) => {
    const body = await jsonBody(c)
    if (typeof body.checkpointId !== 'string' || body.checkpointId === '') return refuse(c, 400, 'give { "checkpointId": "…" } (and optionally "runId")')
    if (body.runId !== undefined && typeof body.runId !== 'string') return refuse(c, 400, '"runId" must be a string')
    const fork = await forkRun(store, { checkpointId: body.checkpointId, ...(body.runId ? { runId: body.runId } : {}) })
    return c.json({ runId: fork.runId, checkpointId: fork.checkpoint.id, effectsCopied: fork.effectsCopied })
  })
  app.post('/api/runs/:runId/answer', limit, async (c) => {
    const body = await jsonBody(c)
    const responses = body.responses
    if (typeof responses !== 'object' || responses === null || Array.isArray(responses)) return refuse(c, 400, 'give { "responses": { "INTERRUPT_ID": answer }, "by": "your name" }')
    if (body.by !== undefined && typeof body.by !== 'string') return refuse(c, 400, '"by" must be a name')
    const by = (body.by ?? '').trim().slice(0, 100) || osUser()
    const done = await answering.answer(c.req.param('runId'), { responses, by })
    return c.json({ accepted: true, by, via: done.via }, 202)
  })
  app.notFound((c) => refuse(c, 404, `no such page or API: ${c.req.path}`))
  app.onError((err, c) => errorResponse(err, c))
  return app
}

/** Most run summaries kept between polls of the run list; the oldest is dropped first. */
const KEPT_SUMMARIES = 1000

/**
 * The run list's rows, kept between polls: a run whose row has not moved (same last seq, status
 * and update time) is not read again, so the list polled every few seconds costs the runs that
 * changed, not every run's checkpoints each time.
 */
class RunSummaries {
  readonly #store: CheckpointStore
  readonly #kept = new Map<string, { key: string; summary: Promise<object> }>()

  constructor(store: CheckpointStore) {
    this.#store = store
  }

  of(run: RunRecord): Promise<object> {
    const key = `${run.lastSeq}/${run.status}/${run.updatedAt}`
    const kept = this.#kept.get(run.runId)
    if (kept?.key === key) return kept.summary
    const summary = (async () => (await threadRunSummary(this.#store, run)) ?? (await summarizeRun(this.#store, run)))()
    this.#kept.delete(run.runId)
    this.#kept.set(run.runId, { key, summary })
    // A failed read is not kept: the next poll reads again.
    void summary.catch(() => {
      if (this.#kept.get(run.runId)?.summary === summary) this.#kept.delete(run.runId)
    })
    if (this.#kept.size > KEPT_SUMMARIES) this.#kept.delete(this.#kept.keys().next().value!)
    return summary
  }
}

/** The request body: a JSON object, else a 400 naming the problem. */
async function jsonBody(c: HonoContext): Promise<JsonObject> {
  let body: unknown
  try {
    body = JSON.parse(await c.req.text())
  } catch (err) {
    throw new CairnError('invalid_argument', `the request body is not JSON (${(err as Error).message})`)
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new CairnError('invalid_argument', 'the request body must be a JSON object')
  return body as Record<string, JsonValue>
}

function errorResponse(err: Error, c: HonoContext): Response {
  if (!(err instanceof CairnError)) return refuse(c, 500, `internal error: ${err.message}`)
  if (err.code === 'checkpoint_not_found' || err.code === 'run_not_found') return refuse(c, 404, err.message)
  if (err.code === 'invalid_argument' || err.code === 'run_exists') return refuse(c, 400, err.message)
  if (err.code === 'run_not_paused' || err.code === 'run_busy') return refuse(c, 409, err.message)
  return refuse(c, 500, err.message)
}

/** A non-negative whole number of a query, at most {@link MAX_PAGE}. */
function count(value: string | undefined, fallback: number): number {
  const n = Number(value ?? fallback)
  return Number.isInteger(n) && n >= 0 ? Math.min(n, MAX_PAGE) : fallback
}

/** How many newest items of each list a payload shows: a whole number from 1 to {@link MAX_PAYLOAD_ITEMS}. */
function itemsOf(value: string): number {
  const n = Number(value)
  if (!Number.isSafeInteger(n) || n < 1) throw new CairnError('invalid_argument', `items must be a whole number of at least 1, got ${JSON.stringify(value)}`)
  return Math.min(n, MAX_PAYLOAD_ITEMS)
}

/** A checkpoint seq of a query. */
function seqOf(value: string): number {
  const n = Number(value)
  if (!Number.isSafeInteger(n) || n < 0) throw new CairnError('invalid_argument', `after must be a checkpoint seq (a whole number), got ${JSON.stringify(value)}`)
  return n
}

function listen(app: Hono, port: number): Promise<ServerType> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port }, () => resolve(server))
    server.on('error', reject)
  })
}
