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
 * once it has finished, the first render (navigation to the newest checkpoints on screen, a fresh
 * inspector each trial) and clicks (a checkpoint's payload, older checkpoints, a diff) until their
 * answer is on screen, and for each click the page's own share (from the click event to the
 * frame that shows the answer). A benchmark, not a test: it prints what it measured.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium, type Browser, type Page } from 'playwright-core'
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
    console.log(`finished run, fresh inspector each trial (median of ${opts.trials}):`)
    for (const [name, values] of Object.entries(cold)) console.log(`  ${name.padEnd(34)} ${figure(values)}`)
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
  const figures: Record<string, (number | undefined | null)[]> = {
    'first render': [],
    'click: payload of a checkpoint': [],
    '  in the page': [],
    'click: older checkpoints': [],
    '  in the page ': [],
    'click: diff of two checkpoints': [],
    '  in the page  ': [],
  }
  for (let trial = 0; trial < opts.trials; trial++) {
    const inspector = await startInspector(opts.cli, path)
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } })
    try {
      await page.goto(inspector.url)
      await page.locator('#runs tr').first().waitFor({ timeout: LIMIT_MS })
      figures['first render']!.push(await timed(page, () => page.evaluate(`location.hash = '#/run/${RUN_ID}'`), '#timeline li.cp[data-phase="run_terminal"]'))
      // Clicks on a page at rest: its effect journal and conversation have arrived.
      await onScreen(page, '#effects tbody tr')
      await onScreen(page, '#conversation .msg')
      const light = page.locator('#timeline li.cp[data-phase="pre_llm"]').last()
      await watchClick(page, `document.getElementById('payload') !== null`)
      figures['click: payload of a checkpoint']!.push(await timed(page, () => light.locator('button', { hasText: 'payload' }).click(), '#payload'))
      figures['  in the page']!.push(await clickToScreen(page))
      const before = await page.locator('#timeline li.cp').count()
      const older = page.locator('#older')
      await watchClick(page, `document.querySelectorAll('#timeline li.cp').length > ${before}`)
      figures['click: older checkpoints']!.push((await older.count()) === 0 ? null : await timed(page, () => older.click(), `#timeline li.cp >> nth=${before}`))
      figures['  in the page ']!.push((await older.count()) === 0 ? null : await clickToScreen(page))
      await page.locator('#timeline li.cp[data-phase="pre_llm"] input[type=checkbox]').nth(1).check()
      await page.locator('#timeline li.cp[data-phase="pre_llm"] input[type=checkbox]').nth(2).check()
      await watchClick(page, `document.getElementById('diff-panel') !== null`)
      figures['click: diff of two checkpoints']!.push(await timed(page, () => page.click('#diff'), '#diff-panel'))
      figures['  in the page  ']!.push(await clickToScreen(page))
    } finally {
      await page.close()
      await inspector.stop()
    }
  }
  return figures
}

/**
 * Note, in the page, when the next click is dispatched and when `shown` (a script expression)
 * first holds after it, then when the next frame is drawn: the click's cost to the page itself,
 * without the driver's share (finding, scrolling to and pressing the button; seeing the answer),
 * which on a loaded machine is a hundred milliseconds or more.
 */
async function watchClick(page: Page, shown: string): Promise<void> {
  await page.evaluate(`(() => {
    window.__click = { at: undefined, drawn: undefined };
    document.addEventListener('click', () => {
      window.__click.at = performance.now();
      const check = () => { if (${shown}) { observer.disconnect(); requestAnimationFrame(() => setTimeout(() => { window.__click.drawn = performance.now(); })); } };
      const observer = new MutationObserver(check);
      observer.observe(document.body, { childList: true, subtree: true });
      check();
    }, { capture: true, once: true });
  })()`)
}

/** Milliseconds from the click {@link watchClick} saw to the frame that showed its answer. */
async function clickToScreen(page: Page): Promise<number | undefined> {
  try {
    await page.waitForFunction('window.__click && window.__click.drawn !== undefined', undefined, { timeout: LIMIT_MS })
  } catch {
    return undefined
  }
  return page.evaluate<number>('window.__click.drawn - window.__click.at')
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
