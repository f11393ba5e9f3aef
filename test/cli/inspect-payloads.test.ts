import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { chromium } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readPayload } from '../../src/cli/inspect/checkpoint-payloads.js'
import { startInspector } from '../../src/cli/inspect/server.js'
import { TimelinePages } from '../../src/cli/inspect/timeline-pages.js'
import { diffWholeCheckpoints } from '../../src/runner/checkpoint-diff.js'
import { phasesOf } from '../../src/runner/phase-log.js'
import { EngineStore, loadPhase } from '../../src/engine.js'
import { Agent, buildTimeline, diffCheckpoints, Runner, tool, type CheckpointDiff, type TimelineEntry } from '../../src/index.js'
import { SqliteEngine, SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel } from '../../src/testing.js'
import { countingEngine } from './counting-engine.js'

const CYCLES = 600
const CHROMIUM = '/usr/bin/chromium'
const missing = existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is not installed (apt-get install -y chromium; .ci/run installs it)`
if (missing) console.info(`payload panel browser test skipped: ${missing}`)

/** A model that asks for one lookup a turn for `cycles` turns, then answers. */
function lookups(cycles: number) {
  return Array.from({ length: cycles + 1 }, (_, cycle) =>
    cycle < cycles ? [{ text: `turn ${cycle}` }, { toolUse: { toolUseId: `call-${cycle}`, name: 'lookup', input: { n: cycle } } }] : [{ text: 'all looked up' }],
  )
}

function lookupAgent(cycles: number): Agent {
  const lookup = tool({ name: 'lookup', description: 'Look a number up.', idempotent: true, inputSchema: { type: 'object', properties: { n: { type: 'number' } } }, callback: (input) => `value ${JSON.stringify(input)}` })
  return new Agent({ name: 'looker', model: new ScriptedModel(lookups(cycles)), tools: [lookup] })
}


/** A diff with its effect changes in call order (a diff does not promise their order). */
function sorted(diff: CheckpointDiff): CheckpointDiff {
  return { ...diff, effects: [...diff.effects].sort((a, b) => a.callId.localeCompare(b.callId)) }
}

describe('the inspector reads one checkpoint, and a diff of two, at the cost of what it shows', () => {
  let dir = ''
  let path = ''
  let entries: TimelineEntry[] = []
  let plain: SqliteStore
  let counting: ReturnType<typeof countingEngine>
  let store: EngineStore

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-inspect-payloads-'))
    path = join(dir, 'long.db')
    const writer = new SqliteStore({ path })
    const run = await new Runner({ store: writer, durability: 'sync' }).run(lookupAgent(CYCLES), { input: 'Look them up.', runId: 'long' })
    expect(run.state).toBe('completed')
    entries = (await buildTimeline(writer, 'long')).entries
    await writer.close()
    plain = new SqliteStore({ path })
    counting = countingEngine(new SqliteEngine({ database: new Database(path) }))
    store = new EngineStore(counting.engine)
  })

  afterAll(async () => {
    await store?.close()
    await plain?.close()
    await rm(dir, { recursive: true, force: true })
  })

  it('a light phase is read from its stored checkpoint without one list item', async () => {
    const light = entries.filter((entry) => entry.phase === 'pre_llm').at(-3)!
    expect(light.checkpointId).toContain('~')
    counting.reset()
    const { record, cut } = await readPayload(store, light.checkpointId)
    expect(counting.items()).toBe(0)
    expect(cut).toEqual([])
    expect(record).toEqual(await loadPhase(plain, light.checkpointId))
  })

  it('a stored checkpoint comes with its long lists cut to their newest items, read from a snapshot near them; more are read on request', async () => {
    const snapshot = entries.filter((entry) => entry.phase === 'post_llm' && entry.snapshot).at(-5)!
    const full = await plain.load<{ runtime: { messages: unknown[]; tool_executions: unknown[] } }>(snapshot.checkpointId)
    const { messages, tool_executions: executions } = full.payload.runtime
    expect(messages.length).toBeGreaterThan(1000)
    counting.reset()
    const newest = await readPayload(store, snapshot.checkpointId)
    // 1,190 messages and 595 tool executions at this checkpoint: the newest 50 of each are read
    // from a snapshot 50 steps back, about 100 messages and 50 executions.
    expect(counting.items()).toBeLessThan(300)
    expect(newest.cut).toEqual([
      { path: ['runtime', 'messages'], shown: 50, length: messages.length },
      { path: ['runtime', 'tool_executions'], shown: 50, length: executions.length },
    ])
    const runtime = newest.record.payload.runtime as { messages: unknown[]; tool_executions: unknown[] }
    expect(runtime.messages).toEqual(messages.slice(-50))
    expect(runtime.tool_executions).toEqual(executions.slice(-50))
    // Everything but the lists is the record's.
    expect({ ...newest.record, payload: { ...newest.record.payload, runtime: { ...runtime, messages: [], tool_executions: [] } } }).toEqual({
      ...full,
      payload: { ...full.payload, runtime: { ...full.payload.runtime, messages: [], tool_executions: [] } },
    })
    counting.reset()
    const more = await readPayload(store, snapshot.checkpointId, 200)
    expect(counting.items()).toBeLessThan(900)
    expect((more.record.payload.runtime as { messages: unknown[] }).messages).toEqual(messages.slice(-200))
    expect(more.cut.map((list) => list.shown)).toEqual([200, 200])
    const all = await readPayload(store, snapshot.checkpointId, 100_000)
    expect(all.cut).toEqual([])
    expect(all.record).toEqual(full)
  })

  it('a diff reads the lists past the older snapshot only, and says what a diff of the whole records says', async () => {
    const pre = entries.filter((entry) => entry.phase === 'pre_llm')
    const postLlm = entries.filter((entry) => entry.phase === 'post_llm')
    const batches = entries.filter((entry) => entry.phase === 'post_tool_batch')
    const pairs: [string, string][] = [
      [pre.at(-3)!.checkpointId, pre.at(-2)!.checkpointId],
      [postLlm.at(-4)!.checkpointId, batches.at(-2)!.checkpointId],
      [batches.at(-2)!.checkpointId, postLlm.at(-4)!.checkpointId],
      [postLlm[10]!.checkpointId, postLlm.at(-1)!.checkpointId],
      [pre.at(-1)!.checkpointId, pre.at(-1)!.checkpointId],
      [entries[0]!.checkpointId, entries.at(-1)!.checkpointId],
    ]
    for (const [a, b] of pairs) {
      counting.reset()
      const read = await diffCheckpoints(store, a, b)
      const items = counting.items()
      expect(sorted(read), `${a} -> ${b}`).toEqual(sorted(await diffWholeCheckpoints(plain, a, b)))
      if (a === pairs[0]![0]) {
        // Two steps apart: a few messages and executions, where whole records hold 1,800 items.
        expect(read.messagesAppended.length).toBeGreaterThan(0)
        expect(items).toBeLessThan(20)
      }
    }
    // Far apart: the tool executions the later checkpoint adds, one change each, numbered in the run.
    const far = await diffCheckpoints(store, postLlm[10]!.checkpointId, postLlm.at(-1)!.checkpointId)
    expect(far.changes.filter((change) => change.path.startsWith('runtime.tool_executions[')).length).toBe(CYCLES - 10)
    expect(far.changes.find((change) => change.path === 'runtime.tool_executions[10]')?.after).toMatchObject({ tool_call_id: 'call-10' })
  })
})

describe('a run written with async durability is read at about the cost of a sync one', () => {
  it('a page, the conversation, a payload and a diff read a bounded number of list items though a write held hundreds of steps', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-inspect-async-'))
    const path = join(dir, 'async.db')
    try {
      // Writes that hold the thread 20 ms each, as a slow disk's: the async writer packs many steps in one.
      const writer = new SqliteStore({ path })
      const sizes: number[] = []
      const write = writer.write.bind(writer)
      writer.write = (batch) => {
        // The phases a write makes durable: its stored checkpoints and those riding in their phase logs.
        sizes.push((batch.checkpoints ?? []).reduce((n, record) => n + phasesOf(record, '').length, 0))
        const until = performance.now() + 20
        while (performance.now() < until);
        return write(batch)
      }
      const run = await new Runner({ store: writer, durability: 'async' }).run(lookupAgent(CYCLES), { input: 'Look them up.', runId: 'long' })
      expect(run.state).toBe('completed')
      expect(Math.max(...sizes)).toBeGreaterThan(100)
      const entries = (await buildTimeline(writer, 'long')).entries
      await writer.close()
      const counting = countingEngine(new SqliteEngine({ database: new Database(path) }))
      const store = new EngineStore(counting.engine)
      try {
        const pages = new TimelinePages(store)
        const newest = await pages.page('long', { limit: 20 })
        await pages.page('long', { limit: 20, before: newest.entries[0]!.checkpointId })
        await pages.conversation('long', 40)
        const stored = entries.filter((entry) => entry.phase === 'post_tool_batch').at(-40)!
        await readPayload(store, stored.checkpointId)
        const pre = entries.filter((entry) => entry.phase === 'pre_llm')
        await diffCheckpoints(store, pre.at(-30)!.checkpointId, pre.at(-29)!.checkpointId)
        // 1,202 messages and 600 tool executions are stored; each read above covers a few steps
        // (20 checkpoints a page, 50 items of a payload's lists) and the 16 steps at most
        // between two snapshots on each side of them.
        expect(counting.items()).toBeLessThan(800)
      } finally {
        await store.close()
      }
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

describe.skipIf(missing !== undefined)('a long run in the inspector, in a headless browser', () => {
  let dir = ''
  let store: SqliteStore
  let inspector: Awaited<ReturnType<typeof startInspector>>
  let browser: Awaited<ReturnType<typeof chromium.launch>>

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-inspect-payload-page-'))
    store = new SqliteStore({ path: join(dir, 'cairn.db') })
    inspector = await startInspector(store)
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] })
    // 120 cycles: 243 stored checkpoints, 605 phases: six or seven pages of the timeline.
    const run = await new Runner({ store, durability: 'sync' }).run(lookupAgent(120), { input: 'Look them up.', runId: 'long' })
    expect(run.state).toBe('completed')
  }, 120_000)

  afterAll(async () => {
    await browser?.close()
    await inspector?.close()
    await store?.close()
    await rm(dir, { recursive: true, force: true })
  })

  it('shows a long conversation cut to its newest messages, and the rest on show more', async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } })
    await page.goto(inspector.url)
    await page.evaluate(`location.hash = '#/run/long'`)
    const snapshot = page.locator('#timeline li.cp.snapshot[data-phase="post_llm"]').last()
    await snapshot.locator('button', { hasText: 'payload' }).click()
    const messages = page.locator('#payload .cut[data-path="runtime.messages"]')
    await messages.waitFor()
    expect(await messages.textContent()).toMatch(/^runtime\.messages: the newest 50 of 2\d\d items/)
    const pre = page.locator('#payload pre')
    expect(await pre.textContent()).toContain('"text": "turn 119"')
    expect(await pre.textContent()).not.toContain('"text": "turn 0"')
    // Four times as many, then the rest: the list is no longer cut.
    await messages.locator('button', { hasText: 'show more' }).click()
    await page.locator('#payload .cut[data-path="runtime.messages"]', { hasText: 'the newest 200 of' }).waitFor()
    await page.locator('#payload .cut[data-path="runtime.messages"] button').click()
    await page.locator('#payload .cut').first().waitFor({ state: 'detached' })
    expect(await pre.textContent()).toContain('"text": "turn 0"')
    expect(await pre.textContent()).toContain('"text": "turn 119"')
    await page.close()
  }, 120_000)

  it('pages back to the run\'s start: each older page goes in before the rows shown, in the order of the whole timeline', async () => {
    const whole = (await buildTimeline(store, 'long')).entries
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } })
    await page.goto(inspector.url)
    await page.evaluate(`location.hash = '#/run/long'`)
    await page.locator('#timeline li.cp[data-phase="run_terminal"]').waitFor()
    const rows = page.locator('#timeline li.cp')
    const shown = () => page.evaluate<string[]>(`[...document.querySelectorAll('#timeline li.cp')].map((row) => row.getAttribute('data-checkpoint'))`)
    const newest = (await shown()).length
    await page.evaluate(`document.querySelector('#timeline li.cp').setAttribute('data-kept', 'yes')`)
    // The second page holds no run start: it goes in before the rows shown, which stay as they were.
    await page.click('#older')
    await rows.nth(newest).waitFor()
    const twoPages = await shown()
    expect(twoPages).toEqual(whole.slice(-twoPages.length).map((entry) => entry.checkpointId))
    expect(await page.locator('#timeline li.cp[data-kept="yes"]').count()).toBe(1)
    // Each older page goes in before the rows shown; the one that reaches the start draws every
    // row again, with process numbers. A page holds about 100 phases: 605 take 6 or 7 of them.
    let pages = 2
    while ((await page.locator('#timeline li.cp[data-phase="run_started"]').count()) === 0) {
      const before = (await shown()).length
      await page.click('#older')
      await rows.nth(before).waitFor()
      pages++
      expect(pages).toBeLessThanOrEqual(7)
    }
    expect(pages).toBeGreaterThanOrEqual(6)
    expect(await shown()).toEqual(whole.map((entry) => entry.checkpointId))
    expect(await page.locator('#older').count()).toBe(0)
    expect(await rows.last().locator('.meta').textContent()).toContain('process 1')
    await page.close()
  }, 120_000)
})
