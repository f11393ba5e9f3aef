import { randomBytes, timingSafeEqual } from 'node:crypto'
import { serve, type ServerType } from '@hono/node-server'
import { Hono, type Context as HonoContext } from 'hono'
import { buildTimeline, CairnError, diffCheckpoints, forkRun, summarizeRun, type CheckpointStore, type RunStatus } from '../../index.js'
import { encodeValue } from '../../engine.js'
import { findRuns } from '../read-commands.js'
import { INSPECTOR_PAGE } from './page.js'

/** A running inspector. */
export interface Inspector {
  /** The URL to open, with the access token. */
  url: string
  port: number
  close(): Promise<void>
}

/**
 * Serve the inspector for `store` on 127.0.0.1 only. Every request must carry the random access
 * token (in the page URL's `token` query, or the `x-cairn-token` header the page sends); a request
 * without it, or for another host name (DNS rebinding), is refused.
 */
export async function startInspector(store: CheckpointStore, options: { port?: number } = {}): Promise<Inspector> {
  const token = randomBytes(24).toString('hex')
  const app = inspectorApp(store, token)
  const server = await listen(app, options.port ?? 0)
  const address = server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  return {
    url: `http://127.0.0.1:${port}/?token=${token}`,
    port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/** The inspector's routes: one page and a small JSON API over the store. */
export function inspectorApp(store: CheckpointStore, token: string): Hono {
  const app = new Hono()
  app.use('*', async (c, next) => {
    const host = (c.req.header('host') ?? '').replace(/:\d+$/, '')
    if (host !== '127.0.0.1' && host !== 'localhost') return c.text('cairn inspect answers on 127.0.0.1 only', 403)
    const given = c.req.query('token') ?? c.req.header('x-cairn-token') ?? ''
    if (!sameToken(given, token)) return c.text('cairn inspect: this URL needs the access token printed by `cairn inspect`', 403)
    await next()
    c.header('cache-control', 'no-store')
  })
  app.get('/', (c) => c.html(INSPECTOR_PAGE))
  app.get('/api/runs', async (c) => {
    const status = c.req.query('status') || undefined
    const runs = await findRuns(store, { limit: Number(c.req.query('limit') ?? 200), ...(status ? { status: status as RunStatus } : {}), ...(c.req.query('q') ? { search: c.req.query('q')! } : {}) })
    return c.json(await Promise.all(runs.map((run) => summarizeRun(store, run))))
  })
  app.get('/api/runs/:runId', async (c) => {
    const timeline = await buildTimeline(store, c.req.param('runId'))
    return c.json(encodeValue({ run: timeline.run, entries: timeline.entries, effects: timeline.effects, messages: timeline.runtime?.messages ?? [] }))
  })
  app.get('/api/checkpoints/:id', async (c) => {
    const record = await store.load(c.req.param('id'))
    return c.json(encodeValue(record))
  })
  app.get('/api/diff', async (c) => c.json(encodeValue(await diffCheckpoints(store, c.req.query('a') ?? '', c.req.query('b') ?? ''))))
  app.post('/api/fork', async (c) => {
    const body = await c.req.json<{ checkpointId?: unknown; runId?: unknown }>()
    if (typeof body.checkpointId !== 'string') return c.json({ error: 'give { checkpointId }' }, 400)
    const fork = await forkRun(store, { checkpointId: body.checkpointId, ...(typeof body.runId === 'string' && body.runId ? { runId: body.runId } : {}) })
    return c.json({ runId: fork.runId, checkpointId: fork.checkpoint.id, effectsCopied: fork.effectsCopied })
  })
  app.onError((err, c) => errorResponse(err, c))
  return app
}

function errorResponse(err: Error, c: HonoContext): Response {
  const notFound = err instanceof CairnError && (err.code === 'checkpoint_not_found' || err.code === 'run_not_found')
  const status = notFound ? 404 : err instanceof CairnError && (err.code === 'invalid_argument' || err.code === 'run_exists') ? 400 : 500
  return c.json({ error: err.message }, status)
}

function sameToken(given: string, token: string): boolean {
  const a = Buffer.from(given)
  const b = Buffer.from(token)
  return a.length === b.length && timingSafeEqual(a, b)
}

function listen(app: Hono, port: number): Promise<ServerType> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port }, () => resolve(server))
    server.on('error', reject)
  })
}
