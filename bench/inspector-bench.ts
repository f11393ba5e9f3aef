/**
 * The inspector on a long run, in headless Chromium: a run of n tool cycles (10,000 by default)
 * watched live while it runs, then opened cold in a fresh inspector.
 *
 *   npm run bench:inspector                              # 10,000 cycles
 *   npm run bench:inspector -- --cycles 2000 --trials 3
 *   npm run bench:inspector -- --cli /path/to/other/dist/cli/main.js   # another build's inspector
 *   npm run bench:inspector -- --db /tmp/long.db   # keep the run there; a later bench with the same --db opens it cold without running it again
 *
 * Figures: while the run is live, the timeline polls (how many, bytes each, how many at once);
 * once it has finished, in a fresh inspector each trial, clicks as a user feels them: from the
 * click to the frame that shows its answer (the run in the list of runs to its newest checkpoints
 * on screen, the first render; then a checkpoint's payload, older checkpoints, a diff). Under
 * each, its request's share (the server's work and the transfer) and the driver's round trip
 * (Playwright's click until it sees the answer, which adds its own work). A benchmark, not a
 * test: it prints what it measured.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium, type Browser, type Locator, type Page } from 'playwright-core'
import { Agent, Runner, tool, type Model, type ModelRequest, type ModelStreamEvent } from '../src/index.js'
import { SqliteStore } from '../src/sqlite.js'
import { median } from './stats.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const CHROMIUM = '/usr/bin/chromium'
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run']
/** Longest wait for anything on the page; a slower answer is reported as "> limit". */
const LIMIT_MS = 180_000
const RUN_ID = 'long-run'

interface Options {
  cycles: number
  trials: number
  cli: string
  /** Where the run is kept (and found again); a temporary file by default. */
  db: string | undefined
}

function options(): Options {
  const arg = (name: string, fallback: string) => {
    const at = process.argv.indexOf(`--${name}`)
    return at >= 0 && process.argv[at + 1] !== undefined ? process.argv[at + 1]! : fallback
  }
  const db = arg('db', '')
  return { cycles: Number(arg('cycles', '10000')), trials: Number(arg('trials', '5')), cli: arg('cli', join(ROOT, 'dist/cli/main.js')), db: db === '' ? undefined : db }
}

async function main(): Promise<void> {
  const opts = options()
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is not installed (apt-get install -y chromium)`)
  if (!existsSync(opts.cli)) throw new Error(`${opts.cli} does not exist: npm run build first`)
  const dir = await mkdtemp(join(tmpdir(), 'cairn-bench-inspector-'))
  const path = opts.db ?? join(dir, 'inspector.db')
  const kept = opts.db !== undefined && existsSync(opts.db)
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS })
  try {
    console.log(`inspector: ${opts.cli}`)
    if (kept) {
      console.log(`the run kept in ${path}: ${await describeKept(path)} (not run again, so no live figures)`)
    } else {
      console.log(`a run of ${opts.cycles} tool cycles, SQLite, async durability`)
      const live = await watchLive(browser, path, opts)
      console.log(`live: the run took ${(live.runMs / 1000).toFixed(1)} s and wrote ${live.checkpoints} checkpoints`)
      console.log(`live: ${live.polls} timeline polls, ${kb(live.medianBytes)} median and ${kb(live.maxBytes)} largest a poll, ${live.maxInFlight} at most at once`)
      console.log(`live: the finished run on screen ${live.settleMs === undefined ? `> ${LIMIT_MS} ms` : `${live.settleMs} ms`} after it finished`)
    }
    const cold = await openFinished(browser, path, opts)
    console.log(`finished run, fresh inspector each trial (median of ${opts.trials}), each click from the click to its answer painted (what a user waits),`)
    console.log(`with its requests' share (the server's work and the transfer) and the driver's round trip (Playwright's click to its seeing the answer):`)
    for (const { label, values } of cold) console.log(`  ${label.padEnd(34)} ${figure(values)}`)
  } finally {
    await browser.close()
    await rm(dir, { recursive: true, force: true })
  }
}

/** The kept run: its status and how many checkpoints it wrote. */
async function describeKept(path: string): Promise<string> {
  const store = new SqliteStore({ path })
  try {
    const run = await store.getRun(RUN_ID)
    if (!run) throw new Error(`${path} holds no run ${RUN_ID}: give another --db, or none`)
    return `${run.status}, ${run.lastSeq} checkpoints`
  } finally {
    await store.close()
  }
}

/** Open the run while a Runner writes it: count the polls, their bytes and how many overlap. */
async function watchLive(browser: Browser, path: string, opts: Options) {
  const store = new SqliteStore({ path })
  await store.createRun({ runId: RUN_ID, name: 'fetcher' })
  const inspector = await startInspector(opts.cli, path)
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } })
  const polls: number[] = []
  let inFlight = 0
  let maxInFlight = 0
  page.on('request', (request) => {
    if (isPoll(request.url())) maxInFlight = Math.max(maxInFlight, ++inFlight)
  })
  const done = (request: { url(): string }) => {
    if (isPoll(request.url())) inFlight--
  }
  page.on('requestfailed', done)
  page.on('requestfinished', (request) => {
    done(request)
    if (isPoll(request.url())) void request.response().then((response) => response?.body().then((body) => polls.push(body.length)).catch(() => {}))
  })
  try {
    await page.goto(`${inspector.url}#/run/${RUN_ID}`)
    const start = Date.now()
    const run = await new Runner({ store, durability: 'async' }).run(cycleAgent(opts.cycles), { input: 'Fetch every record.', runId: RUN_ID })
    const runMs = Date.now() - start
    if (run.state !== 'completed') throw new Error(`the run ended ${run.state}`)
    const finished = Date.now()
    const settled = await onScreen(page, '#timeline li.cp[data-phase="run_terminal"]')
    const checkpoints = (await store.getRun(RUN_ID))!.lastSeq
    return { runMs, checkpoints, polls: polls.length, medianBytes: median(polls), maxBytes: Math.max(0, ...polls), maxInFlight, settleMs: settled ? Date.now() - finished : undefined }
  } finally {
    await page.close()
    await inspector.stop()
    await store.close()
  }
}

/** A fresh inspector per trial: the first render, then clicks. */
async function openFinished(browser: Browser, path: string, opts: Options) {
  // Printed in this order: each click's user-felt figure, then its two shares.
  const figures = new Map<string, { label: string; values: (number | undefined | null)[] }>()
  const add = (key: string, label: string, value: number | undefined | null) => {
    if (!figures.has(key)) figures.set(key, { label, values: [] })
    figures.get(key)!.values.push(value)
  }
  const click = (name: string, felt: Felt | null) => {
    add(name, name === 'first render' ? name : `click: ${name}`, felt === null ? null : felt.felt)
    add(`${name}/request`, '  its requests', felt === null ? null : felt.request)
    add(`${name}/driver`, "  the driver's round trip", felt === null ? null : felt.driver)
  }
  for (let trial = 0; trial < opts.trials; trial++) {
    const inspector = await startInspector(opts.cli, path)
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } })
    try {
      await page.goto(inspector.url)
      await page.locator('#runs tr').first().waitFor({ timeout: LIMIT_MS })
      const terminal = '#timeline li.cp[data-phase="run_terminal"]'
      click('first render', await clickFelt(page, page.locator(`#runs tr[data-run="${RUN_ID}"] a`), `document.querySelector('${terminal}') !== null`, terminal))
      // Clicks on a page at rest: its effect journal and conversation have arrived.
      await onScreen(page, '#effects tbody tr')
      await onScreen(page, '#conversation .msg')
      const light = page.locator('#timeline li.cp[data-phase="pre_llm"]').last().locator('button', { hasText: 'payload' })
      click('payload of a checkpoint', await clickFelt(page, light, `document.getElementById('payload') !== null`, '#payload'))
      const before = await page.locator('#timeline li.cp').count()
      const older = page.locator('#older')
      click('older checkpoints', (await older.count()) === 0 ? null : await clickFelt(page, older, `document.querySelectorAll('#timeline li.cp').length > ${before}`, `#timeline li.cp >> nth=${before}`))
      await page.locator('#timeline li.cp[data-phase="pre_llm"] input[type=checkbox]').nth(1).check()
      await page.locator('#timeline li.cp[data-phase="pre_llm"] input[type=checkbox]').nth(2).check()
      click('diff of two checkpoints', await clickFelt(page, page.locator('#diff'), `document.getElementById('diff-panel') !== null`, '#diff-panel'))
    } finally {
      await page.close()
      await inspector.stop()
    }
  }
  return [...figures.values()]
}

/** One click, as a user feels it and as the driver sees it (milliseconds; undefined past the limit). */
interface Felt {
  /** From the click (the time the browser gave its input event) to the frame that shows the answer. */
  felt: number | undefined
  /** Of it, the click's requests to the inspector that answered before that frame: from the first fetch to the last answer's last byte (the server's work and the transfer). */
  request: number
  /** The driver's round trip: from asking Playwright to click to Playwright seeing the answer. */
  driver: number | undefined
}

/**
 * Click `target` the way a user does, and time it from the click to the painted answer. The
 * button is brought into view and the pointer moved onto it first, untimed (a user scrolls to a
 * row and points at it before clicking). In the page, the click's input time is its event's
 * `timeStamp` (when the browser took the input, so a page too busy to handle it at once is
 * charged for the wait); the answer is on screen once `shown` (a script expression) holds and the
 * next frame has been drawn. The driver's round trip is printed beside it: it adds Playwright's
 * own work (finding the button, checking it can be clicked, polling for `selector`), which a user
 * does not wait for and which, on a loaded machine, is a hundred milliseconds or more.
 */
async function clickFelt(page: Page, target: Locator, shown: string, selector: string): Promise<Felt> {
  await target.scrollIntoViewIfNeeded({ timeout: LIMIT_MS })
  await target.hover({ timeout: LIMIT_MS })
  await page.evaluate(`(() => {
    performance.clearResourceTimings();
    let drawn;
    window.__click = { at: undefined, drawn: undefined, done: new Promise((resolve) => { drawn = resolve; }) };
    document.addEventListener('click', (event) => {
      window.__click.at = event.timeStamp;
      const check = () => { if (${shown}) { observer.disconnect(); requestAnimationFrame(() => setTimeout(() => { window.__click.drawn = performance.now(); drawn(); })); } };
      const observer = new MutationObserver(check);
      observer.observe(document.body, { childList: true, subtree: true });
      check();
    }, { capture: true, once: true });
  })()`)
  const driver = await timed(page, () => target.click({ timeout: LIMIT_MS }), selector)
  // Awaited in the page: a polled predicate would need eval, which the inspector's CSP refuses.
  const drawn = await page.evaluate(`Promise.race([window.__click.done.then(() => true), new Promise((resolve) => setTimeout(() => resolve(false), ${LIMIT_MS}))])`)
  if (!drawn) return { felt: undefined, request: 0, driver }
  const { felt, request } = await page.evaluate<{ felt: number; request: number }>(`(() => {
    const click = window.__click;
    const api = performance.getEntriesByType('resource').filter((entry) => new URL(entry.name).pathname.startsWith('/api/') && entry.startTime >= click.at && entry.responseEnd <= click.drawn);
    return { felt: click.drawn - click.at, request: api.length === 0 ? 0 : Math.max(...api.map((entry) => entry.responseEnd)) - Math.min(...api.map((entry) => entry.startTime)) };
  })()`)
  return { felt, request, driver }
}

/** Milliseconds from `act` until `selector` is on screen (undefined past the limit). */
async function timed(page: Page, act: () => Promise<unknown>, selector: string): Promise<number | undefined> {
  const start = Date.now()
  await act()
  return (await onScreen(page, selector)) ? Date.now() - start : undefined
}

async function onScreen(page: Page, selector: string): Promise<boolean> {
  try {
    await page.locator(selector).first().waitFor({ timeout: LIMIT_MS })
    return true
  } catch {
    return false
  }
}

function isPoll(url: string): boolean {
  return /\/api\/runs\/[^/?]+(\/timeline)?(\?|$)/.test(new URL(url).pathname + new URL(url).search)
}

/** `cairn inspect` in a process of its own, as a person starts it. */
async function startInspector(cli: string, path: string): Promise<{ url: string; stop(): Promise<void> }> {
  const child: ChildProcess = spawn(process.execPath, [cli, '--store', `sqlite:${path}`, 'inspect'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
  const url = await new Promise<string>((resolve, reject) => {
    let out = ''
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk
      const found = /open (http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+)/.exec(out)
      if (found) resolve(found[1]!)
    })
    child.on('exit', (code) => reject(new Error(`cairn inspect exited ${code}: ${out}`)))
  })
  return {
    url,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve())
        child.kill('SIGKILL')
      }),
  }
}

/** An agent whose model asks for one record a turn for `cycles` turns, then answers. */
function cycleAgent(cycles: number): Agent {
  const fetchRecord = tool({
    name: 'fetch_record',
    description: 'Fetch a record by its number.',
    inputSchema: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] },
    idempotent: true,
    callback: (input) => `record ${(input as { n: number }).n}: ${'lorem ipsum '.repeat(8)}`,
  })
  return new Agent({ name: 'fetcher', model: new CycleModel(cycles), tools: [fetchRecord], systemPrompt: 'Fetch every record, then answer.' })
}

/** The turn follows from the conversation's length: one tool call a turn, then the answer. */
class CycleModel implements Model {
  readonly modelId = 'bench-cycle-model'
  readonly #cycles: number

  constructor(cycles: number) {
    this.#cycles = cycles
  }

  async *stream(request: ModelRequest): AsyncGenerator<ModelStreamEvent> {
    const cycle = (request.messages.length - 1) / 2
    yield { type: 'messageStart' }
    if (cycle >= this.#cycles) {
      yield { type: 'textDelta', text: 'All records fetched.' }
      yield { type: 'messageStop', stopReason: 'end_turn' }
    } else {
      yield { type: 'textDelta', text: `turn ${cycle}: the next record.` }
      yield { type: 'toolUseStart', toolUseId: `call-${cycle}`, name: 'fetch_record' }
      yield { type: 'toolUseInputDelta', toolUseId: `call-${cycle}`, delta: JSON.stringify({ n: cycle }) }
      yield { type: 'messageStop', stopReason: 'tool_use' }
    }
    yield { type: 'usage', usage: { inputTokens: 10, outputTokens: 10, totalTokens: 20 } }
  }
}

/** Median and trials; undefined is over the limit, null is not offered by this inspector. */
function figure(values: readonly (number | undefined | null)[]): string {
  if (values.every((value) => value === null)) return 'n/a (this inspector has no such button)'
  const known = values.filter((value): value is number => typeof value === 'number')
  const over = values.length - known.length
  if (known.length === 0) return `> ${LIMIT_MS} ms`
  return `${Math.round(median(known))} ms (${known.map((v) => Math.round(v)).join(', ')}${over ? `; ${over} over ${LIMIT_MS} ms` : ''})`
}

function kb(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MB` : `${(bytes / 1024).toFixed(1)} KB`
}

await main()
