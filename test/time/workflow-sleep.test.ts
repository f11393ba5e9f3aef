import { afterEach, describe, expect, it } from 'vitest'
import { CairnClient, type WorkerEvent } from '../../src/index.js'
import { waitFor } from '../support/wait.js'
import { runCleanups, setup, startWorker } from './fixtures/time-setup.js'
import { logOf } from './fixtures/time-agents.js'
import { napWorkflow, payWorkflow } from './fixtures/time-workflows.js'

afterEach(runCleanups)

const MINUTE = 60_000

describe('ctx.sleep in a workflow executor', () => {
  it('stores the run sleeping with its wake time; it does not go on before it; the handler runs again, the code after the sleep once', async () => {
    const { dir, store, clock } = await setup()
    const first = await napWorkflow(dir, 10 * MINUTE).run({ message: 'o-1', store, clock })
    expect(first.status).toBe('sleeping')
    const wakeAt = clock.now() + 10 * MINUTE
    expect(first.events.at(-1)).toMatchObject({ type: 'workflow_completed', status: 'sleeping', wakeAt })
    expect(await store.getRun(first.runId)).toMatchObject({ status: 'sleeping' })
    expect(await store.waits!.getTimer(first.runId)).toBe(wakeAt)
    expect(logOf(dir)).toEqual(['start', 'before'])

    // Resumed a millisecond early (a fresh instance, as another process would): nothing runs.
    clock.advance(10 * MINUTE - 1)
    const early = await napWorkflow(dir, 10 * MINUTE).run({ checkpointId: first.checkpointId!, store, clock })
    expect(early.status).toBe('sleeping')
    expect(early.events.some((event) => event.type === 'executor_invoked')).toBe(false)
    expect(logOf(dir)).toEqual(['start', 'before'])
    expect(await store.getRun(first.runId)).toMatchObject({ status: 'sleeping' })

    clock.advance(1)
    const done = await napWorkflow(dir, 10 * MINUTE).run({ checkpointId: early.checkpointId!, store, clock })
    expect(done.status).toBe('idle')
    // The handler ran again from its start (its staged write of the first time was dropped); start did not.
    expect(done.getOutputs()).toEqual(['slept on o-1, naps 1'])
    expect(logOf(dir)).toEqual(['start', 'before', 'before', 'after', 'effect'])
    expect(await store.getRun(first.runId)).toMatchObject({ status: 'completed' })
    expect(await store.waits!.getTimer(first.runId)).toBeUndefined()
  })

  it('without a store that keeps waits, ctx.sleep fails the run with time_unavailable', async () => {
    const { dir } = await setup()
    await expect(napWorkflow(dir, MINUTE).run({ message: 'x' })).rejects.toMatchObject({ cause: { code: 'time_unavailable' } })
  })

  it('many workers and one sleeping workflow run: one resume at the wake time, the effect applied once', async () => {
    const { dir, open, store, clock } = await setup()
    const events: WorkerEvent[] = []
    for (const id of ['w1', 'w2', 'w3', 'w4']) await startWorker({ store: open(), clock, id, workflows: { napper: () => napWorkflow(dir, 5 * MINUTE) } }, events)
    const client = new CairnClient({ store, clock })
    await client.enqueue('napper', { input: 'o-2', runId: 'nap' })
    await waitFor(async () => (await store.getRun('nap'))?.status === 'sleeping', 'the run to sleep')
    expect(await store.waits!.getTimer('nap')).toBe(clock.now() + 5 * MINUTE)
    // Workers keep sweeping; nothing wakes it early, and client.wake refuses a workflow's sleep.
    const refused = await client.wake('nap').then(() => undefined, (err: Error & { code?: string }) => err)
    expect(refused?.code).toBe('invalid_argument')
    expect(refused?.message).toContain('a workflow sleeps until its wake time')
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect((await store.getRun('nap'))?.status).toBe('sleeping')
    expect(logOf(dir)).toEqual(['start', 'before'])
    clock.advance(5 * MINUTE)
    const outcome = await client.result('nap', { timeoutMs: 20_000 })
    expect(outcome.status).toBe('completed')
    expect(outcome.workflow?.outputs).toEqual(['slept on o-2, naps 1'])
    expect(logOf(dir)).toEqual(['start', 'before', 'before', 'after', 'effect'])
    // Claimed twice: to start, and once to resume at the wake.
    expect(events.filter((event) => event.type === 'claimed' && event.runId === 'nap')).toHaveLength(2)
    expect(await store.waits!.getTimer('nap')).toBeUndefined()
  })
})

describe('ctx.waitForEvent in a workflow executor', () => {
  it('an event sent before the run waits is taken when it gets there', async () => {
    const { dir, store, clock } = await setup()
    const client = new CairnClient({ store, clock })
    await client.send('order.paid', { amount: 42 }, { match: 'o-1' })
    await startWorker({ store, clock, workflows: { payer: () => payWorkflow(dir) } })
    await client.enqueue('payer', { input: 'o-1', runId: 'pay-1' })
    const outcome = await client.result('pay-1', { timeoutMs: 20_000 })
    expect(outcome.status).toBe('completed')
    expect(outcome.workflow?.outputs).toEqual(['o-1 paid 42'])
  })

  it('waiting runs are woken by the event; one sent twice with one idempotency key is delivered once', async () => {
    const { dir, open, store, clock } = await setup()
    for (const id of ['w1', 'w2']) await startWorker({ store: open(), clock, id, workflows: { payer: () => payWorkflow(dir) } })
    const client = new CairnClient({ store, clock })
    await client.enqueue('payer', { input: 'o-2', runId: 'a' })
    await client.enqueue('payer', { input: 'o-2', runId: 'b' })
    await waitFor(async () => (await store.getRun('a'))?.status === 'waiting' && (await store.getRun('b'))?.status === 'waiting', 'both runs to wait')
    expect((await store.waits!.getWaits('a')).map((wait) => [wait.name, wait.match])).toEqual([['order.paid', 'o-2']])
    const first = await client.send('order.paid', { amount: 7 }, { match: 'o-2', idempotencyKey: 'pay-7' })
    const again = await client.send('order.paid', { amount: 7 }, { match: 'o-2', idempotencyKey: 'pay-7' })
    expect([first.sent, again.sent]).toEqual([true, false])
    await waitFor(async () => logOf(dir).length === 1, 'one run to get the event')
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect([(await store.getRun('a'))?.status, (await store.getRun('b'))?.status].sort()).toEqual(['completed', 'waiting'])
    await client.send('order.paid', { amount: 8 }, { match: 'o-2', idempotencyKey: 'pay-8' })
    await waitFor(async () => (await store.getRun('a'))?.status === 'completed' && (await store.getRun('b'))?.status === 'completed', 'both runs to finish')
    expect(logOf(dir).sort()).toEqual(['o-2 paid 7', 'o-2 paid 8'])
  })

  it('an event of another match is not taken; the wait times out at its deadline', async () => {
    const { dir, store, clock } = await setup()
    await startWorker({ store, clock, workflows: { payer: () => payWorkflow(dir, 10 * MINUTE) } })
    const client = new CairnClient({ store, clock })
    await client.enqueue('payer', { input: 'o-3', runId: 'w' })
    await waitFor(async () => (await store.getRun('w'))?.status === 'waiting', 'the run to wait')
    expect(await store.waits!.getTimer('w')).toBe(clock.now() + 10 * MINUTE)
    await client.send('order.paid', { amount: 1 }, { match: 'another-order' })
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect((await store.getRun('w'))?.status).toBe('waiting')
    clock.advance(10 * MINUTE)
    const outcome = await client.result('w', { timeoutMs: 20_000 })
    expect(outcome.workflow?.outputs).toEqual(['o-3 timed out'])
    expect((await store.waits!.listEvents())[0]).toMatchObject({ match: 'another-order', takenBy: null })
  })
})
