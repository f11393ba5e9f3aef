import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { serve, type ServerType } from '@hono/node-server'
import { build } from 'esbuild'
import { chromium, type Browser, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runEventsResponse, runUIMessageStreamResponse } from '../../src/http.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ROOT } from '../support/child.js'
import { waitFor } from '../support/wait.js'
import { answer } from './fixtures/stream-agent.js'

const CHROMIUM = '/usr/bin/chromium'
const missing = existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is not installed (apt-get install -y chromium; .ci/run installs it)`
if (missing) console.info(`durable-stream browser test skipped: ${missing}`)
const TIMEOUT_MS = 120_000
const CHILD = join(ROOT, 'test/streams/fixtures/stream-child.ts')
const RUN_ID = 'chat-1'
const PAGE = '<!doctype html><meta charset="utf-8"><title>chat</title><pre id="chat"></pre><pre id="events"></pre><script src="/page.js"></script>'

/** A child process of stream-child.ts, with what it printed. */
function start(args: string[]): { child: ChildProcess; exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> } {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }))
  })
  return { child, exited }
}

describe.skipIf(missing !== undefined)('a durable run stream in a real browser', () => {
  let dir = ''
  let store: SqliteStore
  let server: ServerType
  let origin = ''
  let browser: Browser

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-stream-browser-'))
    const target = join(dir, 'cairn.db')
    store = new SqliteStore({ path: target })
    const bundle = await build({ entryPoints: [join(ROOT, 'test/streams/fixtures/page/chat-page.mjs')], bundle: true, format: 'esm', platform: 'browser', target: 'chrome120', write: false, logLevel: 'silent' })
    const script = bundle.outputFiles[0]!.text
    // The app: the page, its script, and the two stream routes over the store, as a server would mount them.
    const app = async (req: Request): Promise<Response> => {
      const path = new URL(req.url).pathname
      const chat = /^\/api\/chat\/([^/]+)\/stream$/.exec(path)
      if (chat) return runUIMessageStreamResponse(req, { store, runId: decodeURIComponent(chat[1]!) })
      const events = /^\/api\/events\/([^/]+)$/.exec(path)
      if (events) return runEventsResponse(req, { store, runId: decodeURIComponent(events[1]!) })
      if (path === '/page.js') return new Response(script, { headers: { 'content-type': 'text/javascript; charset=utf-8' } })
      if (path === '/') return new Response(PAGE, { headers: { 'content-type': 'text/html; charset=utf-8' } })
      return new Response('not found', { status: 404 })
    }
    server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: app, hostname: '127.0.0.1', port: 0 }, () => resolve(s))
    })
    const address = server.address()
    origin = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] })
  }, TIMEOUT_MS)

  afterAll(async () => {
    await browser?.close()
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()))
    await store?.close()
    await rm(dir, { recursive: true, force: true })
  })

  const text = (page: Page, panel: string) => page.locator(panel).textContent().then((t) => t ?? '')
  const words = (shown: string) => shown.split(' ').filter(Boolean).length

  it('a page reloaded in the middle of a run, whose writer is then killed and resumed elsewhere, shows the whole answer exactly once', async () => {
    const target = `sqlite:${join(dir, 'cairn.db')}`
    const writer = start(['write', target, RUN_ID, '60'])
    await waitFor(async () => (await store.getRun(RUN_ID))?.status === 'running', 'the run to start', 60_000)
    const page = await browser.newPage()
    await page.goto(`${origin}/?run=${RUN_ID}`)
    // Both panels follow the live run: part of the answer is on screen, not all of it.
    await waitFor(async () => words(await text(page, '#chat')) >= 8 && words(await text(page, '#events')) >= 8, 'part of the answer on the page', 60_000)
    expect(answer().startsWith(await text(page, '#events'))).toBe(true)
    expect((await store.getRun(RUN_ID))?.status).toBe('running')

    // A reload in the middle of the run: the chat client asks for the stream again, the events
    // panel resumes after its cursor.
    const beforeReload = Number(await page.locator('#events').getAttribute('data-received'))
    await page.reload()
    // What the events panel had is back from its storage at once, before any new event.
    expect(Number(await page.locator('#events').getAttribute('data-received'))).toBeGreaterThanOrEqual(beforeReload)
    await waitFor(async () => words(await text(page, '#chat')) >= 16 && words(await text(page, '#events')) >= 16, 'more of the answer after the reload', 60_000)
    expect(await page.locator('#chat').getAttribute('data-done')).toBeNull()

    // The writer dies in the middle of the answer; another process resumes the run.
    writer.child.kill('SIGKILL')
    expect((await writer.exited).signal).toBe('SIGKILL')
    const resumed = await start(['resume', target, RUN_ID]).exited
    expect(resumed.stderr).toBe('')
    expect(resumed.stdout).toContain('result completed')
    await page.locator('#chat[data-done="finished"]').waitFor({ state: 'attached', timeout: 60_000 })
    await page.locator('#events[data-done="finished"]').waitFor({ state: 'attached', timeout: 60_000 })
    expect(await page.locator('#chat').getAttribute('data-error')).toBeNull()

    // The whole answer, once: the cut-off turn hidden, nothing repeated, nothing missing.
    expect(await text(page, '#chat')).toBe(answer())
    expect(await text(page, '#events')).toBe(answer())
    expect(await page.locator('#events').getAttribute('data-repeats')).toBe('0')
    const logged = await store.events!.read(RUN_ID, { limit: 10_000 })
    expect(logged.some((stored) => (stored.event as { type: string }).type === 'model_call_voided')).toBe(true)
    // Every event of the log reached the events panel once, across the reload.
    expect(Number(await page.locator('#events').getAttribute('data-received'))).toBe(logged.length)

    // A reload after the end: the chat client has nothing to resume, the events panel keeps the answer.
    await page.reload()
    await page.locator('#chat[data-done="nothing to resume"]').waitFor({ state: 'attached', timeout: 30_000 })
    expect(await text(page, '#events')).toBe(answer())
    await page.close()
  }, TIMEOUT_MS)
})
