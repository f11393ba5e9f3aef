import { afterEach, describe, expect, it } from 'vitest'
import { CairnClient, Runner, type WorkerEvent } from '../../src/index.js'
import { waitFor } from '../support/wait.js'
import { runCleanups, setup, startWorker } from './fixtures/time-setup.js'
import { askerAgent, logOf, quickAgent, sleeperAgent, waiterAgent } from './fixtures/time-agents.js'

afterEach(runCleanups)

const MINUTE = 60_000

describe('ctx.sleep', () => {
  it('stores the run sleeping with its wake time, does not go on before it, and runs the code after the sleep once', async () => {
    const { dir, store, clock } = await setup()
    const runner = new Runner({ store, clock })
    const first = await runner.run(sleeperAgent(dir, 10 * MINUTE), { input: 'go', runId: 'nap' })
    expect(first.state).toBe('sleeping')
    expect(first.interrupts[0]).toMatchObject({ name: 'cairn.sleep.1', wakeAt: clock.now() + 10 * MINUTE })
    expect(await store.getRun('nap')).toMatchObject({ status: 'sleeping' })
    expect(await store.waits!.getTimer('nap')).toBe(clock.now() + 10 * MINUTE)

    clock.advance(10 * MINUTE - 1)
    expect((await runner.resume(sleeperAgent(dir, 10 * MINUTE), { runId: 'nap' })).state).toBe('sleeping')
    expect(logOf(dir)).toEqual(['before'])

    clock.advance(1)
    const done = await runner.resume(sleeperAgent(dir, 10 * MINUTE), { runId: 'nap' })
    expect(done.state).toBe('completed')
    // The tool runs again from its start (before), its sleep returns at once, and what follows runs once.
    expect(logOf(dir)).toEqual(['before', 'before', 'after', 'effect'])
    expect(await store.getRun('nap')).toMatchObject({ status: 'completed' })
    expect(await store.waits!.getTimer('nap')).toBeUndefined()
  })

  it('many workers and one sleeping run: one resume at the wake time, the effect applied once', async () => {
    const { dir, open, store, clock } = await setup()
    const events: WorkerEvent[] = []
    for (const id of ['w1', 'w2', 'w3', 'w4']) await startWorker({ store: open(), clock, id, agents: { sleeper: () => sleeperAgent(dir, 5 * MINUTE) } }, events)
    const client = new CairnClient({ store, clock })
    await client.enqueue('sleeper', { input: 'go', runId: 'nap' })
    await waitFor(async () => (await store.getRun('nap'))?.status === 'sleeping', 'the run to sleep')
    // Workers keep sweeping; nothing wakes it early.
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect((await store.getRun('nap'))?.status).toBe('sleeping')
    clock.advance(5 * MINUTE)
    const outcome = await client.result('nap', { timeoutMs: 20_000 })
    expect(outcome.status).toBe('completed')
    expect(logOf(dir).filter((line) => line === 'effect')).toHaveLength(1)
    expect(logOf(dir).filter((line) => line === 'after')).toHaveLength(1)
    // Claimed twice: to start, and once to resume at the wake.
    expect(events.filter((event) => event.type === 'claimed' && event.runId === 'nap')).toHaveLength(2)
  })

  it('client.wake wakes a sleeping run early; a run that is not sleeping is refused', async () => {
    const { dir, store, clock } = await setup()
    await startWorker({ store, clock, agents: { sleeper: () => sleeperAgent(dir, 24 * 60 * MINUTE) } })
    const client = new CairnClient({ store, clock })
    await client.enqueue('sleeper', { input: 'go', runId: 'nap' })
    await waitFor(async () => (await store.getRun('nap'))?.status === 'sleeping', 'the run to sleep')
    await client.wake('nap')
    expect((await client.result('nap', { timeoutMs: 20_000 })).status).toBe('completed')
    expect(logOf(dir)).toEqual(['before', 'before', 'after', 'effect'])
    await expect(client.wake('nap')).rejects.toMatchObject({ code: 'run_not_paused', status: 'completed' })
  })
})

describe('interrupt deadlines', () => {
  it('a deadline reached while no worker is up is handled at the next start: the default answer', async () => {
    const { dir, open, store, clock } = await setup()
    const agents = { asker: () => askerAgent(dir, { name: 'approve', expiresAt: clock.now() + 30 * MINUTE, onExpiry: { answer: 'auto-approved' } }) }
    const first = await startWorker({ store: open(), clock, agents })
    const client = new CairnClient({ store, clock })
    await client.enqueue('asker', { input: 'go', runId: 'ask' })
    await waitFor(async () => (await store.getRun('ask'))?.status === 'paused', 'the run to pause')
    await first.stop()
    clock.advance(31 * MINUTE)
    // Too late for a human: refused, and nothing changes.
    await expect(client.respond('ask', { 'call-1:approve': 'yes' })).rejects.toMatchObject({ name: 'InterruptExpiredError', code: 'interrupt_expired', interruptId: 'call-1:approve' })
    expect((await store.getRun('ask'))?.status).toBe('paused')
    await startWorker({ store: open(), clock, agents })
    await waitFor(async () => (await store.getRun('ask'))?.status === 'completed', 'the run to go on with the default answer')
    expect(logOf(dir)).toEqual(['answer "auto-approved"'])
  })

  it('escalation raises a new interrupt in place of the expired one; fail fails the run', async () => {
    const { dir, store, clock } = await setup()
    const escalate = { name: 'approve', expiresAt: clock.now() + MINUTE, onExpiry: { escalate: { name: 'approve_as_manager', reason: 'the owner did not answer' } } }
    await startWorker({ store, clock, agents: { escalating: () => askerAgent(dir, escalate), failing: () => askerAgent(dir, { name: 'approve', expiresAt: clock.now() + MINUTE }) } })
    const client = new CairnClient({ store, clock })
    await client.enqueue('escalating', { input: 'go', runId: 'esc' })
    await client.enqueue('failing', { input: 'go', runId: 'fail' })
    await waitFor(async () => (await store.getRun('esc'))?.status === 'paused' && (await store.getRun('fail'))?.status === 'paused', 'both runs to pause')
    clock.advance(MINUTE)
    await waitFor(async () => (await client.result('esc')).interrupts.some((i) => i.name === 'approve_as_manager'), 'the escalation')
    await client.respond('esc', { 'call-1:approve_as_manager': 'manager says yes' })
    expect((await client.result('esc', { timeoutMs: 20_000 })).status).toBe('completed')
    expect(logOf(dir)).toEqual(['answer "manager says yes"'])
    const failed = await client.result('fail', { timeoutMs: 20_000 })
    expect(failed.status).toBe('failed')
    expect(failed.error).toMatchObject({ name: 'InterruptExpiredError', code: 'interrupt_expired' })
  })
})

describe('ctx.waitForEvent and client.send', () => {
  it('an event sent before the run waits is kept and taken when the run gets there', async () => {
    const { dir, store, clock } = await setup()
    const client = new CairnClient({ store, clock })
    expect(await client.send('order.paid', { amount: 42 }, { match: 'o-1' })).toMatchObject({ sent: true, woken: [] })
    await startWorker({ store, clock, agents: { waiter: () => waiterAgent(dir, 'o-1') } })
    await client.enqueue('waiter', { input: 'go', runId: 'wait-1' })
    expect((await client.result('wait-1', { timeoutMs: 20_000 })).status).toBe('completed')
    expect(logOf(dir)).toEqual(['paid 42'])
  })

  it('a waiting run is woken by the event; one sent twice with one idempotency key is delivered once', async () => {
    const { dir, open, store, clock } = await setup()
    for (const id of ['w1', 'w2']) await startWorker({ store: open(), clock, id, agents: { waiter: () => waiterAgent(dir, 'o-2') } })
    const client = new CairnClient({ store, clock })
    await client.enqueue('waiter', { input: 'go', runId: 'a' })
    await client.enqueue('waiter', { input: 'go', runId: 'b' })
    await waitFor(async () => (await store.getRun('a'))?.status === 'waiting' && (await store.getRun('b'))?.status === 'waiting', 'both runs to wait')
    const first = await client.send('order.paid', { amount: 7 }, { match: 'o-2', idempotencyKey: 'pay-7' })
    const again = await client.send('order.paid', { amount: 7 }, { match: 'o-2', idempotencyKey: 'pay-7' })
    expect([first.sent, again.sent]).toEqual([true, false])
    await waitFor(async () => logOf(dir).length === 1, 'one run to get the event')
    await new Promise((resolve) => setTimeout(resolve, 200))
    const statuses = [(await store.getRun('a'))?.status, (await store.getRun('b'))?.status].sort()
    expect(statuses).toEqual(['completed', 'waiting'])
    expect(logOf(dir)).toEqual(['paid 7'])
    // Another payment (another key) reaches the run still waiting.
    await client.send('order.paid', { amount: 8 }, { match: 'o-2', idempotencyKey: 'pay-8' })
    await waitFor(async () => (await store.getRun('a'))?.status === 'completed' && (await store.getRun('b'))?.status === 'completed', 'both runs to finish')
    expect(logOf(dir).sort()).toEqual(['paid 7', 'paid 8'])
  })

  it('an event of another match is not taken; the wait times out at its deadline', async () => {
    const { dir, store, clock } = await setup()
    await startWorker({ store, clock, agents: { waiter: () => waiterAgent(dir, 'o-3', 10 * MINUTE) } })
    const client = new CairnClient({ store, clock })
    await client.enqueue('waiter', { input: 'go', runId: 'w' })
    await waitFor(async () => (await store.getRun('w'))?.status === 'waiting', 'the run to wait')
    await client.send('order.paid', { amount: 1 }, { match: 'another-order' })
    clock.advance(10 * MINUTE)
    expect((await client.result('w', { timeoutMs: 20_000 })).status).toBe('completed')
    expect(logOf(dir)).toEqual(['timed out'])
    expect((await store.waits!.listEvents())[0]).toMatchObject({ match: 'another-order', takenBy: null })
  })
})

describe('schedules', () => {
  it('a schedule across three workers for 20 ticks starts 20 runs, one per tick, named by the tick', async () => {
    const { open, store, clock } = await setup()
    clock.ms = Date.parse('2026-01-01T00:00:00.500Z')
    const client = new CairnClient({ store, clock })
    await client.schedule({ id: 'every-second', cron: '* * * * * *', agent: 'quick', input: 'tick' })
    for (const id of ['w1', 'w2', 'w3']) await startWorker({ store: open(), clock, id, agents: { quick: () => quickAgent() } })
    for (let tick = 1; tick <= 20; tick++) {
      clock.advance(1000)
      const runId = `every-second@${new Date(Date.parse('2026-01-01T00:00:00.000Z') + tick * 1000).toISOString()}`
      await waitFor(async () => (await store.getRun(runId)) !== undefined, `the run of tick ${tick}`)
    }
    await waitFor(async () => (await store.listRuns({ status: 'completed' })).length === 20, '20 completed runs')
    await new Promise((resolve) => setTimeout(resolve, 100))
    const runs = await store.listRuns({})
    expect(runs).toHaveLength(20)
    expect(new Set(runs.map((run) => run.runId)).size).toBe(20)
    expect((await client.schedules())[0]).toMatchObject({ id: 'every-second', paused: false, lastTick: new Date('2026-01-01T00:00:20.000Z') })
  })

  it('pause, catch-up after downtime (skip or the latest once), and unschedule', async () => {
    const { store, clock } = await setup()
    clock.ms = Date.parse('2026-01-01T00:00:30.000Z')
    const client = new CairnClient({ store, clock })
    await client.schedule({ id: 'skip', cron: '* * * * *', agent: 'quick', input: 'x', catchUp: 'skip', missedAfterMs: 10_000 })
    await client.schedule({ id: 'latest', cron: '* * * * *', agent: 'quick', input: 'x', catchUp: 'latest' })
    await client.schedule({ id: 'paused', cron: '* * * * *', agent: 'quick', input: 'x' })
    await client.pauseSchedule('paused')
    // Ten minutes with no worker up: every tick is more than 10 s late.
    clock.advance(10 * MINUTE)
    await startWorker({ store, clock, agents: { quick: () => quickAgent() } })
    await waitFor(async () => (await store.getRun('latest@2026-01-01T00:10:00.000Z'))?.status === 'completed', 'the latest missed tick to run')
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect((await store.listRuns({})).map((run) => run.runId)).toEqual(['latest@2026-01-01T00:10:00.000Z'])
    // The next tick (on time) runs for both that are not paused.
    clock.advance(31_000)
    await waitFor(async () => (await store.listRuns({})).length === 3, 'the next tick of both')
    expect((await store.listRuns({})).map((run) => run.runId).sort()).toEqual(['latest@2026-01-01T00:10:00.000Z', 'latest@2026-01-01T00:11:00.000Z', 'skip@2026-01-01T00:11:00.000Z'])
    expect(await client.unschedule('skip')).toBe(true)
    expect((await client.schedules()).map((s) => [s.id, s.paused])).toEqual([['latest', false], ['paused', true]])
    await expect(client.schedule({ id: 'bad', cron: 'not a cron', agent: 'quick', input: 'x' })).rejects.toMatchObject({ code: 'invalid_argument' })
  })
})
