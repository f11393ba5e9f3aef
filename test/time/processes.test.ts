import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { CairnClient } from '../../src/index.js'
import { waitFor } from '../support/wait.js'
import { logOf } from './fixtures/time-agents.js'
import { backends, cleanups, runCleanups, startWorker, target } from './fixtures/time-processes.js'

afterEach(runCleanups)
afterAll(() => target.dropSchemas())

describe.each(backends)('real time, real worker processes: $name', ({ skip, open }) => {
  it.skipIf(skip !== undefined)('three workers and one run sleeping 2 s: woken once, not before; its worker SIGKILLed right at the wake, another finishes it with the effect once', { timeout: 90_000 }, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-time-proc-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    const { store, backend } = open(dir)
    cleanups.push(() => store.close())
    const client = new CairnClient({ store })
    for (const id of ['p1', 'p2', 'p3']) startWorker({ backend, dir, id, sleepMs: 2000, killAtWake: true })
    const enqueuedAt = Date.now()
    await client.enqueue('sleeper', { input: 'go', runId: 'nap' })
    await waitFor(async () => (await store.getRun('nap'))?.status === 'sleeping', 'the run to sleep', 30_000)
    await waitFor(async () => (await store.getRun('nap'))?.status === 'completed', 'the run to finish', 60_000)
    const log = logOf(dir)
    // Slept once (2 s at least), woken, killed right after the wake, taken over: the effect once.
    expect(log.filter((line) => line === 'effect')).toHaveLength(1)
    expect(log.filter((line) => line === 'after')).toHaveLength(2)
    const files = await readdir(dir)
    expect(files).toContain('killed-at-wake')
    const claims = files.filter((file) => file.startsWith('claimed-nap-')).map((file) => Number(file.split('-').pop()))
    // The start, the wake (killed), the take-over.
    expect(claims).toHaveLength(3)
    expect(Math.min(...claims.slice().sort((a, b) => a - b).slice(1))).toBeGreaterThanOrEqual(enqueuedAt + 2000)
  })

  it.skipIf(skip !== undefined)('an event sent before the run waits, and one sent twice, across worker processes', { timeout: 90_000 }, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-time-proc-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    const { store, backend } = open(dir)
    cleanups.push(() => store.close())
    const client = new CairnClient({ store })
    await client.send('order.paid', { amount: 1 }, { match: 'o-1', idempotencyKey: 'k1' })
    expect((await client.send('order.paid', { amount: 1 }, { match: 'o-1', idempotencyKey: 'k1' })).sent).toBe(false)
    for (const id of ['p1', 'p2']) startWorker({ backend, dir, id, sleepMs: 0, killAtWake: false })
    await client.enqueue('waiter', { input: 'go', runId: 'a' })
    await client.enqueue('waiter', { input: 'go', runId: 'b' })
    await waitFor(async () => logOf(dir).length === 1, 'one run to take the event', 30_000)
    await waitFor(async () => [(await store.getRun('a'))?.status, (await store.getRun('b'))?.status].includes('waiting'), 'the other run to wait', 30_000)
    await client.send('order.paid', { amount: 2 }, { match: 'o-1', idempotencyKey: 'k2' })
    await waitFor(async () => (await store.getRun('a'))?.status === 'completed' && (await store.getRun('b'))?.status === 'completed', 'both runs to finish', 30_000)
    expect(logOf(dir).sort()).toEqual(['paid 1', 'paid 2'])
  })
})
