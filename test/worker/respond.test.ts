import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { CairnClient, LeaseLostError, RunNotPausedError, type ClaimedLease } from '../../src/index.js'
import { type EngineStore, type RunLeases } from '../../src/engine.js'
import { backends } from './fixtures/backends.js'

const leasesOf = (store: EngineStore): RunLeases => {
  const leases = store.leases
  if (!leases) throw new Error('this backend has no leases')
  return leases
}

/** Enqueue `runId` as a job and claim it for `owner`, as a worker does. */
async function claimJob(store: EngineStore, runId: string, owner = 'w1', leaseMs = 60_000): Promise<ClaimedLease> {
  const leases = leasesOf(store)
  await leases.enqueue({ runId, name: 'job', metadata: { cairn: { name: 'job', input: 'go' } } })
  const [claimed] = await leases.claim({ owner, limit: 1, leaseMs })
  expect(claimed?.run.runId).toBe(runId)
  return claimed!
}

/** A run a worker paused and handed back (what it leaves after an agent's interrupt). */
async function pausedJob(store: EngineStore, runId: string): Promise<void> {
  const claimed = await claimJob(store, runId)
  await store.fenced(claimed.fence).updateRun(runId, { status: 'paused' })
  await leasesOf(store).release(claimed.fence, { status: 'paused' })
}

const responsesOf = async (store: EngineStore, runId: string) => ((await store.getRun(runId))?.metadata.cairn as { responses?: unknown } | undefined)?.responses

describe.each(backends())('respond() on $name', ({ make }) => {
  it('of two concurrent respond() calls exactly one succeeds; the other is refused naming the status, and the first answers stay', async () => {
    const backend = await make()
    const store = backend.open()
    await pausedJob(store, 'r1')
    // Two clients, on handles of their own where the backend has them (two processes would be).
    const [a, b] = [new CairnClient({ store: backend.open() }), new CairnClient({ store: backend.open() })]
    await Promise.all([a.store.getRun('r1'), b.store.getRun('r1')])
    const settled = await Promise.allSettled([a.respond('r1', { approval: 'from a' }), b.respond('r1', { approval: 'from b' })])
    const winners = settled.flatMap((s, i) => (s.status === 'fulfilled' ? [i === 0 ? 'from a' : 'from b'] : []))
    expect(winners).toHaveLength(1)
    const refused = settled.find((s) => s.status === 'rejected')?.reason as unknown
    expect(refused).toBeInstanceOf(RunNotPausedError)
    expect(refused).toMatchObject({ code: 'run_not_paused', runId: 'r1', status: 'queued' })
    expect((refused as Error).message).toContain('run r1 is queued, not paused')
    expect(await store.getRun('r1')).toMatchObject({ status: 'queued', metadata: { cairn: { name: 'job', input: 'go' } } })
    expect(await responsesOf(store, 'r1')).toEqual({ approval: winners[0] })
  })

  it('a cancel racing respond() is never undone: a run reported cancelled stays cancelled', async () => {
    const backend = await make()
    const store = backend.open()
    await pausedJob(store, 'r1')
    const client = new CairnClient({ store })
    const [answered, cancelled] = await Promise.all([client.respond('r1', { approval: 'yes' }).then(
      () => 'answered',
      (err: unknown) => err,
    ), client.cancel('r1')])
    expect(cancelled).toEqual({ outcome: 'cancelled', status: 'cancelled' })
    expect(await store.getRun('r1')).toMatchObject({ status: 'cancelled' })
    // Either the answers came first (and the cancel then ended the queued run), or respond was refused.
    if (answered !== 'answered') expect(answered).toMatchObject({ name: 'RunNotPausedError', status: 'cancelled' })
    await expect(client.respond('r1', { approval: 'again' })).rejects.toThrow('run r1 is cancelled, not paused: only a paused run takes responses (it has ended')
  })

  it('respond() waits for the worker that paused a run to hand it back, so the hand-back cannot undo the answers', async () => {
    const backend = await make()
    const store = backend.open()
    const claimed = await claimJob(store, 'r1')
    // The runner has written `paused`; its worker has not released the run yet.
    await store.fenced(claimed.fence).updateRun('r1', { status: 'paused' })
    const client = new CairnClient({ store: backend.open() })
    let settled = false
    const answered = client.respond('r1', { approval: 'yes' }).finally(() => (settled = true))
    await sleep(50)
    expect(settled).toBe(false)
    expect(await store.getRun('r1')).toMatchObject({ status: 'paused' })
    expect(await responsesOf(store, 'r1')).toBeUndefined()
    await leasesOf(store).release(claimed.fence, { status: 'paused' })
    await answered
    expect(await store.getRun('r1')).toMatchObject({ status: 'queued' })
    expect(await responsesOf(store, 'r1')).toEqual({ approval: 'yes' })
    const [next] = await leasesOf(store).claim({ owner: 'w2', limit: 1, leaseMs: 60_000 })
    expect(next).toMatchObject({ run: { runId: 'r1', status: 'queued', metadata: { cairn: { responses: { approval: 'yes' } } } }, lease: { epoch: 2 } })
  })

  it('a paused run whose worker died is answered once its lease lapses, and that worker is fenced out', async () => {
    const backend = await make()
    const store = backend.open()
    const claimed = await claimJob(store, 'r1', 'w1', 30)
    const zombie = store.fenced(claimed.fence)
    await zombie.updateRun('r1', { status: 'paused' })
    await sleep(60)
    await new CairnClient({ store }).respond('r1', { approval: 'yes' })
    expect(await leasesOf(store).getLease('r1')).toMatchObject({ owner: null, epoch: 2 })
    // The dead worker's late hand-back cannot put the run back to paused.
    await expect(leasesOf(store).release(claimed.fence, { status: 'paused' })).rejects.toBeInstanceOf(LeaseLostError)
    await expect(zombie.updateRun('r1', { status: 'paused' })).rejects.toBeInstanceOf(LeaseLostError)
    expect(await store.getRun('r1')).toMatchObject({ status: 'queued', metadata: { cairn: { responses: { approval: 'yes' } } } })
  })

  it('respond() refuses an unknown run, a run that is not paused, and a paused run no worker would claim', async () => {
    const backend = await make()
    const store = backend.open()
    const client = new CairnClient({ store })
    await expect(client.respond('ghost', { approval: 'yes' })).rejects.toMatchObject({ code: 'run_not_found' })
    await claimJob(store, 'claimed')
    await expect(client.respond('claimed', { approval: 'yes' })).rejects.toMatchObject({ name: 'RunNotPausedError', status: 'queued' })
    await pausedJob(store, 'r1')
    await expect(client.respond('r1', {})).rejects.toThrow("respond('r1') needs the answers by interrupt or request id")
    await store.createRun({ runId: 'own-runner', status: 'paused' })
    await expect(client.respond('own-runner', { approval: 'yes' })).rejects.toThrow('run own-runner was not enqueued for workers')
    expect(await store.getRun('own-runner')).toMatchObject({ status: 'paused' })
    expect(await store.getRun('r1')).toMatchObject({ status: 'paused' })
  })
})
