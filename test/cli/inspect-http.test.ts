import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Hono } from 'hono'
import { inspectorApp, MAX_BODY_BYTES } from '../../src/cli/inspect/server.js'
import { SqliteStore } from '../../src/sqlite.js'

const TOKEN = 'a'.repeat(48)
const ORIGIN = 'http://127.0.0.1:4321'
const HOST = '127.0.0.1:4321'
const COOKIE = `cairn_inspect_4321=${TOKEN}`

describe('the inspector over HTTP', () => {
  let dir = ''
  let store: SqliteStore
  let app: Hono
  let checkpointId = ''

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-inspect-http-'))
    store = new SqliteStore({ path: join(dir, 'http.db') })
    checkpointId = await store.save({ runId: 'notes', kind: 'notes', phase: 'first', payload: { n: 1 } })
    app = inspectorApp(store, TOKEN)
  })

  afterAll(async () => {
    await store.close()
    await rm(dir, { recursive: true, force: true })
  })

  const get = (path: string, headers: Record<string, string> = {}) => app.request(`${ORIGIN}${path}`, { headers: { host: HOST, ...headers } })
  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    app.request(`${ORIGIN}${path}`, { method: 'POST', body, headers: { host: HOST, cookie: COOKIE, origin: ORIGIN, 'content-type': 'application/json', ...headers } })

  it('trades the token of the printed URL for an HttpOnly SameSite=Strict cookie and sends the browser to the address without it', async () => {
    const first = await get(`/?token=${TOKEN}`)
    expect(first.status).toBe(302)
    expect(first.headers.get('location')).toBe('/')
    const cookie = first.headers.get('set-cookie') ?? ''
    expect(cookie).toContain(`cairn_inspect_4321=${TOKEN}`)
    expect(cookie).toMatch(/HttpOnly/i)
    expect(cookie).toMatch(/SameSite=Strict/i)
    const page = await get('/', { cookie: COOKIE })
    expect(page.status).toBe(200)
    expect(await page.text()).toContain('<script src="/inspector.js"')
    expect((await get('/api/runs', { cookie: COOKIE })).status).toBe(200)
  })

  it('refuses a request without the token, with a wrong one, with the token in an API query, or for another host name', async () => {
    expect((await get('/')).status).toBe(403)
    expect((await get('/?token=wrong')).status).toBe(403)
    expect((await get('/api/runs')).status).toBe(403)
    expect((await get(`/api/runs?token=${TOKEN}`)).status).toBe(403)
    expect((await get('/api/runs', { cookie: 'cairn_inspect_4321=wrong' })).status).toBe(403)
    expect((await get('/api/runs', { 'x-cairn-token': TOKEN })).status).toBe(200)
    const rebound = await app.request(`http://evil.example:4321/api/runs`, { headers: { host: 'evil.example:4321', cookie: COOKIE } })
    expect(rebound.status).toBe(403)
    expect(((await rebound.json()) as { error: string }).error).toContain('127.0.0.1 only')
  })

  it('sends a Content-Security-Policy without inline script or style, no framing and no referrer, on pages, files, data and errors', async () => {
    for (const response of [await get('/', { cookie: COOKIE }), await get('/inspector.js', { cookie: COOKIE }), await get('/api/runs', { cookie: COOKIE }), await get('/api/runs'), await post('/api/fork', 'null')]) {
      const csp = response.headers.get('content-security-policy') ?? ''
      expect(csp).toContain("default-src 'none'")
      expect(csp).toContain("frame-ancestors 'none'")
      expect(csp).not.toContain('unsafe-inline')
      expect(csp).not.toContain('unsafe-eval')
      expect(response.headers.get('x-frame-options')).toBe('DENY')
      expect(response.headers.get('referrer-policy')).toBe('no-referrer')
      expect(response.headers.get('x-content-type-options')).toBe('nosniff')
    }
    const csp = (await get('/', { cookie: COOKIE })).headers.get('content-security-policy') ?? ''
    expect(csp).toMatch(/script-src 'self'(;|$)/)
    expect(csp).toMatch(/style-src 'self'(;|$)/)
    const html = await (await get('/', { cookie: COOKIE })).text()
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/)
    expect(html).not.toMatch(/<style|\sstyle=|\son[a-z]+=/)
  })

  it('answers a body that is not a JSON object with a 400 and a JSON error naming the problem', async () => {
    for (const [body, problem] of [
      ['null', 'must be a JSON object'],
      ['[1]', 'must be a JSON object'],
      ['{"checkpointId": ', 'is not JSON'],
      ['', 'is not JSON'],
      ['{}', 'checkpointId'],
      ['{"checkpointId": 7}', 'checkpointId'],
      [JSON.stringify({ checkpointId, runId: 5 }), 'runId'],
    ] as const) {
      const response = await post('/api/fork', body)
      expect(response.status, body).toBe(400)
      expect(response.headers.get('content-type')).toMatch(/application\/json/)
      expect(((await response.json()) as { error: string }).error).toContain(problem)
    }
  })

  it('refuses a body over the bound with a 413 before it parses it', async () => {
    const big = JSON.stringify({ checkpointId, pad: 'x'.repeat(MAX_BODY_BYTES) })
    const response = await post('/api/fork', big)
    expect(response.status).toBe(413)
    expect(((await response.json()) as { error: string }).error).toContain(`at most ${MAX_BODY_BYTES} bytes`)
    const streamed = await app.request(`${ORIGIN}/api/fork`, {
      method: 'POST',
      headers: { host: HOST, cookie: COOKIE, origin: ORIGIN, 'content-type': 'application/json' },
      body: new ReadableStream({ start: (controller) => { controller.enqueue(new TextEncoder().encode(big)); controller.close() } }),
      duplex: 'half',
    })
    expect(streamed.status).toBe(413)
  })

  it('refuses a write from another origin, a cross-site one, or one that is not JSON; forks from its own origin', async () => {
    const body = JSON.stringify({ checkpointId })
    expect((await post('/api/fork', body, { origin: 'http://evil.example' })).status).toBe(403)
    expect((await post('/api/fork', body, { origin: 'http://127.0.0.1:9999' })).status).toBe(403)
    expect((await post('/api/fork', body, { 'sec-fetch-site': 'cross-site' })).status).toBe(403)
    expect((await post('/api/fork', body, { 'sec-fetch-site': 'same-site' })).status).toBe(403)
    expect((await post('/api/fork', body, { 'content-type': 'text/plain' })).status).toBe(415)
    expect((await post('/api/fork', body, { cookie: '' })).status).toBe(403)
    expect(await store.listRuns()).toHaveLength(1)
    const fork = await post('/api/fork', body, { 'sec-fetch-site': 'same-origin' })
    expect(fork.status).toBe(200)
    const { runId } = (await fork.json()) as { runId: string }
    expect(await store.getRun(runId)).toMatchObject({ runId })
  })

  it('answers an unknown run, checkpoint or route with a 404 and a run with nothing to answer with a 409, as JSON', async () => {
    expect((await get('/api/runs/nope/timeline', { cookie: COOKIE })).status).toBe(404)
    expect((await get('/api/checkpoints/nope', { cookie: COOKIE })).status).toBe(404)
    expect((await get('/api/nothing', { cookie: COOKIE })).status).toBe(404)
    const answer = await post('/api/runs/notes/answer', JSON.stringify({ responses: { x: 'yes' } }))
    expect(answer.status).toBe(409)
    expect(((await answer.json()) as { error: string }).error).toContain('not paused')
    expect((await post('/api/runs/notes/answer', JSON.stringify({ responses: 'yes' }))).status).toBe(400)
  })
})
