import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { CairnClient, Worker } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { cairn, cairnJson } from '../cli/cli-helpers.js'
import { waitFor } from '../support/wait.js'
import { logOf, quickAgent, sleeperAgent, waiterAgent } from './fixtures/time-agents.js'

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

describe('cairn send, schedules, wake and runs on a SQLite store', { timeout: 120_000 }, () => {
  it('runs shows what stopped runs wait for; wake wakes one; send delivers an event once per key; schedules lists, pauses and deletes', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-time-cli-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    const path = join(dir, 'cairn.db')
    const url = `sqlite:${path}`
    const store = new SqliteStore({ path })
    cleanups.push(() => store.close())
    const worker = new Worker({ store, pollMs: 20, sweepMs: 20, agents: { sleeper: () => sleeperAgent(dir, 3_600_000), waiter: () => waiterAgent(dir, 'o-9', 3_600_000), quick: () => quickAgent() } })
    cleanups.push(() => worker.stop({ timeoutMs: 0 }))
    await worker.start()
    const client = new CairnClient({ store })
    await client.enqueue('sleeper', { input: 'go', runId: 'nap' })
    await client.enqueue('waiter', { input: 'go', runId: 'wait' })
    await waitFor(async () => (await store.getRun('nap'))?.status === 'sleeping' && (await store.getRun('wait'))?.status === 'waiting', 'a sleeping and a waiting run')

    const runs = await cairnJson<{ runId: string; status: string; waitingFor: string }[]>(url, ['runs'])
    expect(runs.find((run) => run.runId === 'nap')?.waitingFor).toMatch(/^wakes \d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/)
    expect(runs.find((run) => run.runId === 'wait')?.waitingFor).toMatch(/^event order\.paid\[o-9\] until \d{4}-/)
    expect((await cairn(url, ['runs'])).stdout).toMatch(/WAITING FOR/)

    expect((await cairn(url, ['wake', 'nap'])).stdout).toContain('woke nap')
    await waitFor(async () => (await store.getRun('nap'))?.status === 'completed', 'the woken run to finish')
    const refused = await cairn(url, ['wake', 'nap'])
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain('run nap is completed, not sleeping')

    const sent = await cairnJson<{ sent: boolean; woken: string[] }>(url, ['send', 'order.paid', '{"amount":5}', '--match', 'o-9', '--key', 'pay-5'])
    expect(sent).toMatchObject({ sent: true, woken: ['wait'] })
    expect((await cairn(url, ['send', 'order.paid', '{"amount":5}', '--match', 'o-9', '--key', 'pay-5'])).stdout).toContain('was sent before; nothing sent again')
    await waitFor(async () => (await store.getRun('wait'))?.status === 'completed', 'the waiting run to finish')
    expect(logOf(dir).filter((line) => line.startsWith('paid'))).toEqual(['paid 5'])

    await client.schedule({ id: 'hourly', cron: '0 * * * *', timezone: 'Europe/Paris', agent: 'quick', input: 'x' })
    expect((await cairn(url, ['schedules'])).stdout).toMatch(/hourly\s+0 \* \* \* \*\s+Europe\/Paris\s+quick\s+skip\s+active/)
    expect(await cairnJson<{ id: string; paused: boolean }[]>(url, ['schedules', '--pause', 'hourly'])).toMatchObject([{ id: 'hourly', paused: true }])
    expect(await cairnJson<unknown[]>(url, ['schedules', '--delete', 'hourly'])).toEqual([])
  })
})
