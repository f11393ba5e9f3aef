import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TimelinePages } from '../../src/cli/inspect/timeline-pages.js'
import { Agent, buildTimeline, Runner, tool, type TimelineEntry } from '../../src/index.js'
import Database from 'better-sqlite3'
import { EngineStore } from '../../src/engine.js'
import { SqliteEngine, SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel } from '../../src/testing.js'
import { countingEngine } from './counting-engine.js'

const CYCLES = 12

/** A model that asks for one lookup a turn for CYCLES turns, then answers. */
function cycleTurns() {
  return Array.from({ length: CYCLES + 1 }, (_, cycle) =>
    cycle < CYCLES ? [{ text: `turn ${cycle}` }, { toolUse: { toolUseId: `call-${cycle}`, name: 'lookup', input: { n: cycle } } }] : [{ text: 'all looked up' }],
  )
}

/** An idempotent lookup tool. */
function lookupTool() {
  return tool({ name: 'lookup', description: 'Look a number up.', idempotent: true, inputSchema: { type: 'object', properties: { n: { type: 'number' } } }, callback: (input) => `value ${JSON.stringify(input)}` })
}

/** What a page must show of a checkpoint exactly as the whole timeline does (its row number included). */
function shown(entry: TimelineEntry) {
  return { index: entry.index, checkpointId: entry.checkpointId, seq: entry.seq, phase: entry.phase, step: entry.step, summary: entry.summary, toolCalls: entry.toolCalls, replayed: entry.replayed, text: entry.text, snapshot: entry.snapshot }
}

/** The stored checkpoint a timeline entry is (or whose phase log holds it). */
function storedOf(entry: TimelineEntry): string {
  return entry.checkpointId.split('~')[0]!
}

/** The entries of each stored checkpoint (with the phases of its phase log), oldest first. */
function byStored(entries: readonly TimelineEntry[]): TimelineEntry[][] {
  const groups = new Map<string, TimelineEntry[]>()
  for (const entry of entries) groups.set(storedOf(entry), [...(groups.get(storedOf(entry)) ?? []), entry])
  return [...groups.values()]
}

/**
 * The entries of a page of `limit`: the newest stored checkpoints, each shown with the phases of
 * its phase log, taken newest first until they hold `limit` phases (one checkpoint at least, at
 * most `limit` of them).
 */
function newestPage(entries: readonly TimelineEntry[], limit: number): TimelineEntry[] {
  const groups = byStored(entries)
  const page: TimelineEntry[][] = []
  while (groups.length > 0 && page.length < limit && (page.length === 0 || page.flat().length < limit)) page.unshift(groups.pop()!)
  return page.flat()
}

/** The entries of the last `k` stored checkpoints: a poll's `limit` counts stored checkpoints. */
function lastStored(entries: readonly TimelineEntry[], k: number): TimelineEntry[] {
  return byStored(entries).slice(-k).flat()
}

/** How many pages of `limit` hold the whole run. */
function pagesOf(entries: readonly TimelineEntry[], limit: number): number {
  let rest = [...entries]
  let pages = 0
  while (rest.length > 0) {
    const page = newestPage(rest, limit)
    rest = rest.slice(0, rest.length - page.length)
    pages++
  }
  return pages
}

describe('the inspector reads a run a page at a time', () => {
  let dir = ''
  let store: SqliteStore
  let whole: TimelineEntry[] = []

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-inspect-pages-'))
    store = new SqliteStore({ path: join(dir, 'pages.db') })
    const run = await new Runner({ store, durability: 'sync' }).run(new Agent({ name: 'looker', model: new ScriptedModel(cycleTurns()), tools: [lookupTool()] }), { input: 'Look them up.', runId: 'long' })
    expect(run.state).toBe('completed')
    whole = (await buildTimeline(store, 'long')).entries
    expect(whole.length).toBeGreaterThan(40)
    // Every phase is shown; about two in five are stored checkpoints.
    expect(new Set(whole.map(storedOf)).size).toBe(2 * CYCLES + 3)
  })

  afterAll(async () => {
    await store.close()
    await rm(dir, { recursive: true, force: true })
  })

  it('the newest page holds the newest checkpoints, described as the whole timeline describes them', async () => {
    const page = await new TimelinePages(store).page('long', { limit: 10 })
    expect(page.fromStart).toBe(false)
    expect(page.entries.map(shown)).toEqual(newestPage(whole, 10).map(shown))
    expect(page.entries.some((entry) => entry.toolCalls.length > 0)).toBe(true)
  })

  it('paging back with the oldest checkpoint as the cursor reads the whole run once, in order, down to its first checkpoint', async () => {
    const pages = new TimelinePages(store)
    let page = await pages.page('long', { limit: 7 })
    const read = [...page.entries]
    let requests = 1
    while (!page.fromStart) {
      page = await pages.page('long', { limit: 7, before: read[0]!.checkpointId })
      read.unshift(...page.entries)
      requests++
    }
    expect(requests).toBe(pagesOf(whole, 7))
    expect(read.map(shown)).toEqual(whole.map(shown))
    // The first page counts positions, times and processes from the run's start.
    expect(page.entries.map((entry) => [entry.index, entry.sinceStartMs, entry.execution, entry.writer])).toEqual(whole.slice(0, page.entries.length).map((entry) => [entry.index, entry.sinceStartMs, entry.execution, entry.writer]))
  })

  it('a poll after a seq reads only the checkpoints after it, and says when more came than it holds', async () => {
    const pages = new TimelinePages(store)
    const after = lastStored(whole, 6)[0]!.seq
    const fresh = await pages.page('long', { limit: 100, after })
    expect(fresh.gap).toBe(false)
    expect(fresh.entries.map(shown)).toEqual(lastStored(whole, 5).map(shown))
    const none = await pages.page('long', { limit: 100, after: whole.at(-1)!.seq })
    expect(none.entries).toEqual([])
    const crowded = await pages.page('long', { limit: 3, after })
    expect(crowded.gap).toBe(true)
    expect(crowded.entries.map(shown)).toEqual(lastStored(whole, 3).map(shown))
    const everything = await pages.page('long', { limit: 500, after: 0 })
    expect(everything.fromStart).toBe(true)
    expect(everything.entries.map(shown)).toEqual(whole.map(shown))
  })

  it('a live run: a page read while it ran, and a poll after it, show what the whole timeline shows at the end', async () => {
    const pages = new TimelinePages(store)
    const first = await pages.page('live', { limit: 100 }).catch((err: Error) => err)
    expect(first).toBeInstanceOf(Error)
    const runner = new Runner({ store, durability: 'sync' })
    let seen: TimelineEntry[] = []
    const agent = new Agent({
      name: 'looker',
      model: new ScriptedModel(cycleTurns()),
      tools: [lookupTool()],
      hooks: [{ afterToolCall: async ({ toolUse }) => { if (toolUse.toolUseId === 'call-5') seen = (await pages.page('live', { limit: 500 })).entries } }],
    })
    await runner.run(agent, { input: 'Look them up.', runId: 'live' })
    expect(seen.length).toBeGreaterThan(10)
    const rest = await pages.page('live', { limit: 500, after: seen.at(-1)!.seq })
    const final = (await buildTimeline(store, 'live')).entries
    expect([...seen, ...rest.entries].map((entry) => [entry.checkpointId, entry.phase, entry.toolCalls])).toEqual(final.map((entry) => [entry.checkpointId, entry.phase, entry.toolCalls]))
  })
})

describe('a page of a long run reads a bounded number of list items', () => {
  it('the newest page, an older page and the conversation read the items of their own steps, not the run', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-inspect-bounded-'))
    const path = join(dir, 'bounded.db')
    try {
      const writer = new SqliteStore({ path })
      const turns = Array.from({ length: 601 }, (_, cycle) => (cycle < 600 ? [{ text: `turn ${cycle}` }, { toolUse: { toolUseId: `call-${cycle}`, name: 'lookup', input: { n: cycle } } }] : [{ text: 'all looked up' }]))
      const run = await new Runner({ store: writer, durability: 'sync' }).run(new Agent({ name: 'looker', model: new ScriptedModel(turns), tools: [lookupTool()] }), { input: 'Look them up.', runId: 'long' })
      expect(run.state).toBe('completed')
      const timeline = await buildTimeline(writer, 'long')
      const whole = timeline.entries
      await writer.close()
      const counting = countingEngine(new SqliteEngine({ database: new Database(path) }))
      const store = new EngineStore(counting.engine)
      try {
        const pages = new TimelinePages(store)
        const newest = await pages.page('long', { limit: 20 })
        expect(newest.entries.map(shown)).toEqual(newestPage(whole, 20).map(shown))
        const older = await pages.page('long', { limit: 20, before: newest.entries[0]!.checkpointId })
        expect(older.entries.some((entry) => entry.toolCalls.length > 0)).toBe(true)
        const conversation = await pages.conversation('long', 40)
        expect(conversation.count).toBe(timeline.runtime!.messages.length)
        expect(conversation.messages).toEqual(timeline.runtime!.messages.slice(-40))
        // 1,202 messages and 600 tool executions are stored: reading the lists whole for a page
        // would hand out 1,800 items at least.
        expect(counting.items()).toBeLessThan(600)
      } finally {
        await store.close()
      }
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

describe('paging back through a run whose stored checkpoints each carry many phases', () => {
  it('each older page finds the snapshot before it among the headers read for the page after it, and shows what the whole timeline shows', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-inspect-sparse-'))
    const store = new SqliteStore({ path: join(dir, 'sparse.db') })
    try {
      // Async durability keeps one runtime snapshot in 32 of those queued; the others ride in the
      // phase log of the stored checkpoint after them, with the light phases.
      const turns = Array.from({ length: 301 }, (_, cycle) => (cycle < 300 ? [{ text: `turn ${cycle}` }, { toolUse: { toolUseId: `call-${cycle}`, name: 'lookup', input: { n: cycle } } }] : [{ text: 'all looked up' }]))
      const run = await new Runner({ store, durability: 'async' }).run(new Agent({ name: 'looker', model: new ScriptedModel(turns), tools: [lookupTool()] }), { input: 'Look them up.', runId: 'sparse' })
      expect(run.state).toBe('completed')
      const whole = (await buildTimeline(store, 'sparse')).entries
      const headers = await store.listCheckpoints({ runId: 'sparse', limit: 1000 })
      let listings = 0
      const counted = new Proxy(store, {
        get(target, property) {
          const value = Reflect.get(target, property, target) as unknown
          if (property === 'listCheckpoints') return (...args: Parameters<SqliteStore['listCheckpoints']>) => (listings++, target.listCheckpoints(...args))
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
        },
      })
      const pages = new TimelinePages(counted)
      let page = await pages.page('sparse', { limit: 20 })
      const read = [...page.entries]
      let requests = 1
      listings = 0
      while (!page.fromStart) {
        page = await pages.page('sparse', { limit: 20, before: read[0]!.checkpointId })
        read.unshift(...page.entries)
        requests++
      }
      expect(read.map(shown)).toEqual(whole.map(shown))
      // Far fewer stored checkpoints than phases: a page of 20 phases spans one or two of them.
      expect(headers.length).toBeLessThan(whole.length / 10)
      // Each older page lists its own headers; a search for its snapshot reads headers again only
      // when those read before do not reach the snapshot, about once per 200 headers, not once a page.
      expect(listings - (requests - 1)).toBeLessThanOrEqual(Math.ceil(headers.length / 200) + 1)
    } finally {
      await store.close()
      await rm(dir, { recursive: true, force: true })
    }
  })
})
