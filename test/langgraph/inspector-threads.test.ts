import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { HumanMessage } from '@langchain/core/messages'
import { chromium, type BrowserContext } from 'playwright-core'
import { startInspector, type Inspector } from '../../src/cli/inspect/server.js'
import { CairnSaver } from '../../src/langgraph.js'
import { SqliteStore } from '../../src/sqlite.js'
import { buildAgentGraph } from './fixtures/agent-graph.js'

const CHROMIUM = '/usr/bin/chromium'
const noBrowser = existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is not installed (apt-get install -y chromium)`
if (noBrowser) console.info(`the inspector's thread page in a browser is skipped: ${noBrowser}`)

interface ListedRun {
  runId: string
  name: string
  status: string
  steps: number
  thread?: boolean
}

/** Two threads on one SQLite store: `chat-7` interrupted for approval, `chat-8` done; then an inspector over it. */
describe('LangGraph threads in the inspector', { timeout: 120_000 }, () => {
  let dir = ''
  let store: SqliteStore
  let inspector: Inspector
  let base = ''
  let headers: Record<string, string> = {}

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-inspect-threads-'))
    store = new SqliteStore({ path: join(dir, 'graph.db') })
    const asked = buildAgentGraph({ checkpointer: new CairnSaver({ store }), rounds: 1, log: join(dir, 'calls.log'), approval: true })
    await asked.invoke({ messages: [new HumanMessage('add things up')] }, { configurable: { thread_id: 'chat-7' } })
    const done = buildAgentGraph({ checkpointer: new CairnSaver({ store }), rounds: 1, log: join(dir, 'calls.log') })
    await done.invoke({ messages: [new HumanMessage('add things up')] }, { configurable: { thread_id: 'chat-8' } })
    inspector = await startInspector(store)
    base = inspector.url.replace(/\?token=.*/, '')
    headers = { 'x-cairn-token': new URL(inspector.url).searchParams.get('token')! }
  })

  afterAll(async () => {
    await inspector?.close()
    await store?.close()
    await rm(dir, { recursive: true, force: true })
  })

  const api = async <T>(path: string) => {
    const response = await fetch(`${base}${path.slice(1)}`, { headers })
    return { status: response.status, body: (await response.json()) as T }
  }

  it('lists each thread by its thread id with its state and steps, not as a running lg.… run of 0 steps', async () => {
    const { body: runs } = await api<ListedRun[]>('/api/runs')
    expect(runs.map((run) => [run.name, run.status, run.thread]).sort()).toEqual([
      ['thread chat-7', 'interrupted', true],
      ['thread chat-8', 'done', true],
    ])
    expect(runs.every((run) => run.steps > 0)).toBe(true)
  })

  it('answers a thread page: the state line with the interrupt value, and each checkpoint with its source, writers and next nodes', async () => {
    const { body: runs } = await api<ListedRun[]>('/api/runs')
    const asked = runs.find((run) => run.name === 'thread chat-7')!
    const { status, body } = await api<{ state: string; summary: { threadId: string; state: string; next: string[]; interrupts: unknown[] }; entries: { source: string; writers: string[]; next: string[]; step: number }[] }>(
      `/api/threads/${asked.runId}`,
    )
    expect(status).toBe(200)
    expect(body.summary).toMatchObject({ threadId: 'chat-7', state: 'interrupted', next: ['approve'], interrupts: [{ question: 'run the tools?' }] })
    expect(body.state).toBe('interrupted at step 1, waiting for an answer to {"question":"run the tools?"} (next: approve)')
    expect(body.entries.map((entry) => [entry.step, entry.source, entry.writers, entry.next])).toEqual([
      [-1, 'input', [], ['__start__']],
      [0, 'loop', ['__start__'], ['agent']],
      [1, 'loop', ['agent'], ['approve']],
    ])
    expect((await api<{ error: string }>('/api/threads/no-such-run')).status).toBe(404)
  })

  describe.skipIf(noBrowser !== undefined)('in a headless browser', () => {
    let context: BrowserContext

    afterAll(async () => {
      await context?.close()
    })

    it('a thread row opens the thread page, which shows the interrupt and every checkpoint readably', async () => {
      context = await chromium.launchPersistentContext(join(dir, 'chromium-profile'), {
        executablePath: CHROMIUM,
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
      })
      const page = await context.newPage()
      const violations: string[] = []
      page.on('console', (message) => {
        if (/Content Security Policy|error/i.test(message.text())) violations.push(message.text())
      })
      await page.goto(inspector.url)
      const row = page.locator('tr.run', { hasText: 'thread chat-7' })
      await row.waitFor()
      expect(await row.textContent()).toContain('interrupted')
      await row.click()
      await page.locator('#thread-state').waitFor()
      expect(page.url()).toMatch(/#\/thread\/lg\./)
      expect(await page.locator('#thread-title').textContent()).toBe('LangGraph thread "chat-7"')
      expect(await page.locator('#thread-state').textContent()).toBe('interrupted at step 1, waiting for an answer to {"question":"run the tools?"} (next: approve)')
      const rows = await page.locator('#thread-checkpoints tbody tr').allTextContents()
      expect(rows).toHaveLength(3)
      expect(rows[0]).toMatch(/#1.*-1input.*__start__/)
      expect(rows[2]).toMatch(/#3.*1loopagentapprove/)
      expect(await page.locator('body').textContent()).not.toContain('langgraph checkpoint')
      // A checkpoint's payload opens beside the table.
      await page.locator('#thread-checkpoints tbody tr').last().locator('button[data-action="payload"]').click()
      await page.locator('#side pre').waitFor()
      expect(await page.locator('#side pre').textContent()).toContain('"langgraph"')
      expect(violations).toEqual([])
    })
  })
})
