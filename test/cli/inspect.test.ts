import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { SqliteStore } from '../../src/sqlite.js'
import { cairn, CAIRN_BIN, ROOT, runNode } from './cli-helpers.js'

const CHROMIUM = '/usr/bin/chromium'
const missing = existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is not installed (apt-get install -y chromium; .ci/run installs it)`
if (missing) console.info(`inspector browser test skipped: ${missing}`)
const TIMEOUT_MS = 120_000
const APPROVALS = join(ROOT, 'test/cli/fixtures/approval-agents.mjs')

describe.skipIf(missing !== undefined)('cairn inspect in a headless browser', () => {
  let dir = ''
  let server: ChildProcess | undefined
  let fileServer: ChildProcess | undefined
  let answerServer: ChildProcess | undefined
  let url = ''
  let context: BrowserContext
  let page: Page

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-inspect-'))
    const demo = spawn(process.execPath, ['--import', 'tsx', 'examples/research-demo.ts', '--dir', dir], { cwd: ROOT, stdio: 'ignore' })
    expect(await new Promise((resolve) => demo.on('close', resolve))).toBe(0)
    server = spawn(process.execPath, [CAIRN_BIN, '--store', `sqlite:${join(dir, 'demo.db')}`, 'inspect'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
    url = await inspectorUrl(server)
    context = await chromium.launchPersistentContext(join(dir, 'chromium-profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
      viewport: { width: 1400, height: 1000 },
    })
    page = await context.newPage()
  }, TIMEOUT_MS)

  afterAll(async () => {
    await context?.close()
    server?.kill('SIGTERM')
    fileServer?.kill('SIGTERM')
    answerServer?.kill('SIGTERM')
    await rm(dir, { recursive: true, force: true })
  })

  it('refuses requests without the access token', async () => {
    const bare = url.replace(/\?token=.*/, '')
    expect((await fetch(bare)).status).toBe(403)
    expect((await fetch(`${bare}api/runs`)).status).toBe(403)
    expect((await fetch(`${bare}api/runs?token=wrong`)).status).toBe(403)
    const first = await fetch(url, { redirect: 'manual' })
    expect(first.status).toBe(302)
    expect(first.headers.get('location')).toBe('/')
    expect(first.headers.get('set-cookie')).toMatch(/HttpOnly; SameSite=Strict/)
  })

  it('keeps the token out of the address bar and out of the page\'s reach: the first load sets a cookie and drops it', async () => {
    const violations: string[] = []
    page.on('console', (message) => { if (/Content Security Policy/i.test(message.text())) violations.push(message.text()) })
    await page.goto(url)
    await page.locator('#runs tr').first().waitFor()
    expect(page.url()).toBe(url.replace(/\?token=.*/, ''))
    expect(await page.evaluate('document.cookie')).toBe('')
    // A reload, with the cookie only, still works; the CSP blocked nothing the page needs.
    await page.reload()
    await page.locator('tr[data-run="research-demo"]').waitFor()
    expect(violations).toEqual([])
  })

  it('lists the runs, opens the demo run, shows its timeline, a diff, the journal and a fork; keeps a screenshot', async () => {
    await page.goto(url)
    await page.locator('tr[data-run="research-demo"]').waitFor()
    await page.fill('#search', 'no-such-thing')
    await page.locator('#runs', { hasText: 'no runs' }).waitFor()
    await page.fill('#search', 'research')
    await page.locator('tr[data-run="research-demo"]').click()
    await page.locator('#timeline li.cp').nth(26).waitFor()
    expect(await page.locator('#timeline li.cp').count()).toBe(27)
    // The header counts checkpoints as the runs list and the timeline's numbers do.
    expect(await page.locator('#run-status').innerText()).toMatch(/ · 27 checkpoints$/)
    expect(await page.locator('#timeline li.resume').innerText()).toMatch(/process 1 stopped here · process 2 \(pid \d+ on .+\) took over/)
    expect(await page.locator('#timeline .badge.replayed').first().innerText()).toBe('replayed: save_note')
    expect(await page.locator('#timeline li.cp[data-phase="post_llm"]').first().innerText()).toContain('search_web {"query":"durable execution for AI agents"}')
    await page.locator('#effects tbody tr').nth(7).waitFor()
    expect(await page.locator('#effects tbody tr').count()).toBe(8)
    await page.locator('#conversation .msg').nth(9).waitFor()
    expect(await page.locator('#conversation .msg').count()).toBe(10)
    // A diff of two checkpoints, titled with the rows' numbers as the timeline shows them.
    const picked = page.locator('#timeline li.cp[data-phase="post_llm"]')
    await picked.nth(2).locator('input[type=checkbox]').check()
    await picked.nth(4).locator('input[type=checkbox]').check()
    const [first, second] = [await picked.nth(2).locator('.phase').innerText(), await picked.nth(4).locator('.phase').innerText()]
    await page.click('#diff')
    const diff = page.locator('#diff-panel')
    await diff.waitFor()
    expect(await diff.locator('h3').innerText()).toBe(`Diff ${first} → ${second}`)
    expect(await diff.innerText()).toContain('messages: 4 appended')
    expect(await diff.innerText()).toMatch(/save_note note-2: \(none\) → succeeded/)
    const artifacts = await mkdtemp(join(tmpdir(), 'cairn-inspect-artifacts-'))
    await page.screenshot({ path: join(artifacts, 'inspector.png'), fullPage: false })
    console.info(`inspector screenshot: ${join(artifacts, 'inspector.png')}`)
    if (process.env.CAIRN_UPDATE_SCREENSHOT === '1') {
      await mkdir(join(ROOT, 'docs'), { recursive: true })
      await copyFile(join(artifacts, 'inspector.png'), join(ROOT, 'docs', 'inspector.png'))
    }
    // One checkpoint's payload.
    await page.locator('#timeline li.cp[data-phase="run_terminal"] button', { hasText: 'payload' }).click()
    expect(await page.locator('#payload').innerText()).toContain('"state": "completed"')
    // Fork here: the page moves to the new run.
    await page.locator('#timeline li.cp[data-phase="pre_llm"] button.fork').nth(3).click()
    await page.waitForURL(/#\/run\/(?!research-demo)/)
    await page.locator('#timeline li.cp').first().waitFor()
    expect(await page.locator('#timeline li.cp').first().innerText()).toContain('forked from checkpoint')
  }, TIMEOUT_MS)

  it('shows a running run live: a new checkpoint appears without a reload', async () => {
    const store = new SqliteStore({ path: join(dir, 'demo.db') })
    try {
      await store.save({ runId: 'live-run', kind: 'notes', phase: 'first', payload: { n: 1 } })
      await page.goto(`${url}#/run/live-run`)
      await page.locator('#timeline li.cp').first().waitFor()
      expect(await page.locator('#live').innerText()).toContain('live')
      await store.save({ runId: 'live-run', kind: 'notes', phase: 'second', payload: { n: 2 } })
      await page.locator('#timeline li.cp[data-phase="second"]').waitFor()
      expect(await page.locator('#timeline li.cp').count()).toBe(2)
    } finally {
      await store.close()
    }
  }, TIMEOUT_MS)

  it('reads a file store: the run list and the timeline of a run imported there', async () => {
    const exported = await cairn(`sqlite:${join(dir, 'demo.db')}`, ['export', 'research-demo'])
    expect(exported.code, exported.stderr).toBe(0)
    const fileUrl = `file:${join(dir, 'file-store')}`
    const imported = await cairn(fileUrl, ['import'], { input: exported.stdout })
    expect(imported.code, imported.stderr).toBe(0)
    fileServer = spawn(process.execPath, [CAIRN_BIN, '--store', fileUrl, 'inspect'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
    await page.goto(await inspectorUrl(fileServer))
    const row = page.locator('tr[data-run="research-demo"]')
    await row.waitFor()
    expect(await page.locator('#runs tr[data-run]').count()).toBe(1)
    expect(await row.innerText()).toMatch(/research-demo\s+researcher\s+completed/)
    await row.click()
    await page.locator('#timeline li.cp').nth(26).waitFor()
    expect(await page.locator('#timeline li.cp').count()).toBe(27)
    expect(await page.locator('#timeline li.cp[data-phase="post_llm"]').first().innerText()).toContain('search_web {"query":"durable execution for AI agents"}')
    await page.locator('#effects tbody tr').nth(7).waitFor()
    expect(await page.locator('#effects tbody tr').count()).toBe(8)
  }, TIMEOUT_MS)

  it('shows a paused run\'s question and answers it from the page: recorded with who and when, and the run goes on as after `cairn resume --response`', async () => {
    const storeUrl = `sqlite:${join(dir, 'approvals.db')}`
    for (const runId of ['by-page', 'by-cli', 'refused']) {
      const started = await runNode([APPROVALS, storeUrl, runId])
      expect(started.code, started.stderr).toBe(0)
    }
    const byCli = await cairn(storeUrl, ['resume', 'by-cli', '--agents', APPROVALS, '--response', 'order-1:approval="approve"'])
    expect(byCli.code, byCli.stderr).toBe(0)
    answerServer = spawn(process.execPath, [CAIRN_BIN, '--store', storeUrl, 'inspect', '--agents', APPROVALS], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
    const answerUrl = await inspectorUrl(answerServer)
    await page.goto(`${answerUrl}#/run/by-page`)
    const question = page.locator('#question .question')
    await question.waitFor()
    const asked = await question.innerText()
    expect(asked).toContain('approval')
    expect(asked).toContain('order-1:approval')
    expect(asked).toContain('Place an order for 3 widgets?')
    expect(asked).toContain('raised by tool place_order {"item":"widget","quantity":3}')
    expect(await question.locator('input[type=radio]').evaluateAll((radios) => radios.map((radio) => (radio as unknown as { value: string }).value))).toEqual(['"approve"', '"reject"'])
    expect(await page.locator('#run-status').innerText()).toContain('paused')
    await question.locator('label', { hasText: 'approve' }).locator('input').check()
    await page.fill('#answer-by', 'Ada Lovelace')
    await page.click('#answer')
    await page.locator('#answer-status', { hasText: 'answered by Ada Lovelace' }).waitFor()
    await page.locator('#run-status', { hasText: 'completed' }).waitFor()
    await page.locator('#answers', { hasText: 'by Ada Lovelace' }).waitFor()
    expect(await page.locator('#question .question').count()).toBe(0)
    expect(await page.locator('#timeline li.cp[data-phase="run_terminal"]').innerText()).toContain('run completed: "Order outcome: [{"text":"ordered 3 widgets"}]"')

    const store = new SqliteStore({ path: join(dir, 'approvals.db') })
    try {
      const [pageRun, cliRun] = [(await store.getRun('by-page'))!, (await store.getRun('by-cli'))!]
      expect(pageRun.status).toBe('completed')
      const answers = pageRun.metadata.cairnAnswers as { interruptId: string; response: unknown; by: string; at: number; via: string }[]
      expect(answers).toEqual([{ interruptId: 'order-1:approval', response: 'approve', by: 'Ada Lovelace', at: expect.any(Number) as number, via: 'inspector' }])
      expect(answers[0]!.at).toBeGreaterThanOrEqual(pageRun.createdAt)
      expect(answers[0]!.at).toBeLessThanOrEqual(pageRun.updatedAt)
      expect(cliRun.metadata.cairnAnswers).toEqual([{ ...answers[0], by: expect.any(String) as string, at: expect.any(Number) as number, via: 'cli' }])
      // The same outcome as the CLI's answer: the tool's result, the final answer, the stored responses.
      const outcome = async (runId: string) => {
        const latest = await store.getLatest<{ state: string; final_text: string }>({ runId })
        const effects = (await store.listEffects(runId)).map((effect) => [effect.callId, effect.status, effect.output, effect.attempts])
        const snapshot = (await store.listCheckpoints({ runId })).find((info) => info.metadata.snapshot === true)!
        const runtime = ((await store.load(snapshot.id)).payload as { runtime: { agent: { interrupts: { responses: unknown } } } }).runtime
        return { state: latest!.payload.state, text: latest!.payload.final_text, effects, responses: runtime.agent.interrupts.responses }
      }
      expect(await outcome('by-page')).toEqual(await outcome('by-cli'))
      expect((await outcome('by-page')).text).toBe('Order outcome: [{"text":"ordered 3 widgets"}]')
    } finally {
      await store.close()
    }

    // A cross-site write is refused, and so is an answer to a run that is not paused.
    const base = answerUrl.replace(/\?token=.*/, '')
    const token = answerUrl.replace(/.*\?token=/, '')
    const forged = await fetch(`${base}api/runs/refused/answer`, { method: 'POST', headers: { 'x-cairn-token': token, origin: 'http://evil.example', 'content-type': 'application/json' }, body: JSON.stringify({ responses: { 'order-1:approval': 'approve' } }) })
    expect(forged.status).toBe(403)
    const late = await fetch(`${base}api/runs/by-page/answer`, { method: 'POST', headers: { 'x-cairn-token': token, 'content-type': 'application/json' }, body: JSON.stringify({ responses: { 'order-1:approval': 'reject' } }) })
    expect(late.status).toBe(409)
    const wrong = await fetch(`${base}api/runs/refused/answer`, { method: 'POST', headers: { 'x-cairn-token': token, 'content-type': 'application/json' }, body: JSON.stringify({ responses: { 'no-such': 'approve' } }) })
    expect(wrong.status).toBe(400)
    expect(((await wrong.json()) as { error: string }).error).toContain('order-1:approval')
    const store2 = new SqliteStore({ path: join(dir, 'approvals.db') })
    try {
      const refused = (await store2.getRun('refused'))!
      expect(refused.status).toBe('paused')
      expect(refused.metadata.cairnAnswers).toBeUndefined()
    } finally {
      await store2.close()
    }
  }, TIMEOUT_MS)
})

/** The URL `cairn inspect` prints once it listens. */
function inspectorUrl(server: ChildProcess): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let out = ''
    server.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk
      const found = /open (http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+)/.exec(out)
      if (found) resolve(found[1]!)
    })
    server.on('exit', (code) => reject(new Error(`cairn inspect exited ${code}: ${out}`)))
  })
}
