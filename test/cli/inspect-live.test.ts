import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startInspector, type Inspector } from '../../src/cli/inspect/server.js'
import { SqliteStore } from '../../src/sqlite.js'
import { answer } from '../streams/fixtures/stream-agent.js'
import { ROOT } from '../support/child.js'
import { waitFor } from '../support/wait.js'

const CHROMIUM = '/usr/bin/chromium'
const missing = existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is not installed (apt-get install -y chromium; .ci/run installs it)`
if (missing) console.info(`live inspector browser test skipped: ${missing}`)
const TIMEOUT_MS = 120_000
const WRITER = join(ROOT, 'test/streams/fixtures/stream-child.ts')
const RUN_ID = 'streamed'

describe.skipIf(missing !== undefined)('the inspector on a running run, in a headless browser', () => {
  let dir = ''
  let store: SqliteStore
  let inspector: Inspector
  let browser: Browser
  let writer: ChildProcess | undefined

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-inspect-live-'))
    store = new SqliteStore({ path: join(dir, 'cairn.db') })
    inspector = await startInspector(store)
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] })
  }, TIMEOUT_MS)

  afterAll(async () => {
    writer?.kill('SIGKILL')
    await browser?.close()
    await inspector?.close()
    await store?.close()
    await rm(dir, { recursive: true, force: true })
  })

  it('follows the run through its event stream: new events arrive on the page, and the timeline is fetched only when a boundary is reported', async () => {
    // A run in another process: a tool call, then an answer streamed a word every 80 ms.
    writer = spawn(process.execPath, ['--import', 'tsx', WRITER, 'write', `sqlite:${join(dir, 'cairn.db')}`, RUN_ID, '80'], { cwd: ROOT, stdio: 'ignore' })
    const exited = new Promise<number | null>((resolve) => writer!.on('close', resolve))
    await waitFor(async () => (await store.getRun(RUN_ID))?.status === 'running', 'the run to start', 60_000)

    const page = await browser.newPage()
    const requests: string[] = []
    page.on('request', (request) => requests.push(new URL(request.url()).pathname))
    await page.goto(inspector.url)
    await page.evaluate(`location.hash = '#/run/${RUN_ID}'`)

    // The answer's words arrive as they stream, several of them while the run is still running.
    const shown = page.locator('#live-events li[data-type="text_delta"] .text')
    await shown.first().waitFor({ timeout: 60_000 })
    const early = (await shown.last().textContent()) ?? ''
    // Over a second of words: a timeline request the answer's start asked for (at most one a second) is behind us.
    await waitFor(async () => ((await shown.last().textContent()) ?? '').length > early.length + 100, 'more words on the page', 60_000)
    expect((await store.getRun(RUN_ID))?.status).toBe('running')
    const midway = (await shown.last().textContent()) ?? ''
    expect(answer().includes(midway)).toBe(true)
    // Words arrived with no new timeline request: those come with boundaries, not on a timer.
    const timelineBefore = requests.filter((path) => path.endsWith('/timeline')).length
    await waitFor(async () => ((await shown.last().textContent()) ?? '').length > midway.length + 100, 'still more words (over a second of them)', 60_000)
    expect(requests.filter((path) => path.endsWith('/timeline')).length).toBe(timelineBefore)
    expect(requests.filter((path) => path.endsWith('/events')).length).toBeGreaterThanOrEqual(1)

    // The run ends: its end arrives on the stream and the timeline shows its terminal checkpoint.
    expect(await exited).toBe(0)
    await page.locator('#live-events li[data-type="run_finished"]').waitFor({ timeout: 60_000 })
    await page.locator('#timeline li.cp[data-phase="run_terminal"]').waitFor({ timeout: 60_000 })
    expect(await page.locator('#run-status').textContent()).toContain('completed')
    expect(answer().endsWith((await shown.last().textContent()) ?? '')).toBe(true)
    await page.close()
  }, TIMEOUT_MS)
})
