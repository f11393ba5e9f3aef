import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { LeaseLostError } from '../../core/errors.js'
import type { EngineStore } from '../../store/engine-store.js'
import type { ClaimedLease, RunLeases } from '../../store/leases/run-leases.js'
import type { EngineContext } from './engine-context.js'

const leasesOf = (store: EngineStore): RunLeases => {
  const leases = store.leases
  if (!leases) throw new Error('this backend has no leases')
  return leases
}

/** Claim `runId` for `owner` once the current holder's lease (`holderMs`) has lapsed. */
async function takeOver(leases: RunLeases, owner: string, runId: string): Promise<ClaimedLease> {
  for (let i = 0; i < 100; i++) {
    const [claimed] = await leases.claim({ owner, limit: 1, leaseMs: 60_000 })
    if (claimed) {
      expect(claimed.run.runId).toBe(runId)
      return claimed
    }
    await sleep(10)
  }
  throw new Error(`${owner} never took ${runId} over`)
}

/**
 * The lease protocol and write fencing, through the store's `leases` and `fenced` views: claims,
 * heartbeats, release, cancel, takeover by another worker and the fencing out of the old one.
 */
export function leaseCases(ctx: EngineContext): void {
  describe('leases and fencing', () => {
    it('a worker whose lease was taken over has every write rejected, and nothing of it is stored', async () => {
      const store = await ctx.openStore()
      const leases = leasesOf(store)
      await leases.enqueue({ runId: 'r1', name: 'job' })
      const [first] = await leases.claim({ owner: 'w1', limit: 1, leaseMs: 30 })
      expect(first).toMatchObject({ run: { runId: 'r1', status: 'queued' }, fence: { runId: 'r1', owner: 'w1', epoch: 1 }, lease: { recoveries: 0 } })
      const lost: LeaseLostError[] = []
      const zombie = store.fenced(first!.fence, { onLost: (err) => lost.push(err) })
      const kept = await zombie.save({ runId: 'r1', kind: 'demo', phase: 'p', payload: { by: 'w1' } })
      expect((await store.load(kept)).metadata).toEqual({ lease: { owner: 'w1', epoch: 1 } })
      await zombie.recordEffectIntent({ runId: 'r1', callId: 'c1', name: 'send', inputHash: 'h', idempotencyKey: 'k1' })

      // w1 stops renewing; once its lease lapses w2 claims the run at the next epoch.
      const second = await takeOver(leases, 'w2', 'r1')
      expect(second.fence).toEqual({ runId: 'r1', owner: 'w2', epoch: 2 })
      expect(second.lease).toMatchObject({ owner: 'w2', epoch: 2, recoveries: 1 })

      // Every kind of write w1 attempts is refused: the first by the store, the rest without trying.
      await expect(zombie.save({ runId: 'r1', kind: 'demo', phase: 'p', payload: { by: 'w1 again' } })).rejects.toBeInstanceOf(LeaseLostError)
      await expect(zombie.startEffect('r1', 'c1')).rejects.toMatchObject({ code: 'lease_lost', runId: 'r1', owner: 'w1', epoch: 1 })
      await expect(zombie.completeEffect({ runId: 'r1', callId: 'c1', status: 'succeeded', output: 'from w1' })).rejects.toBeInstanceOf(LeaseLostError)
      await expect(zombie.recordEffectIntent({ runId: 'r1', callId: 'c2', name: 'send', inputHash: 'h', idempotencyKey: 'k2' })).rejects.toBeInstanceOf(LeaseLostError)
      await expect(zombie.updateRun('r1', { status: 'completed' })).rejects.toBeInstanceOf(LeaseLostError)
      await expect(zombie.write({ runId: 'r1', checkpoints: [{ runId: 'r1', kind: 'demo', phase: 'p', payload: 1 }] })).rejects.toBeInstanceOf(LeaseLostError)
      expect(zombie.rejectedWrites).toBe(6)
      expect(lost).toHaveLength(1)
      expect(lost[0]?.message).toContain('w1')

      expect((await store.listCheckpoints({ runId: 'r1' })).map((cp) => cp.id)).toEqual([kept])
      expect(await store.listEffects('r1')).toMatchObject([{ callId: 'c1', status: 'pending', attempts: 1 }])
      expect(await store.getRun('r1')).toMatchObject({ status: 'queued' })

      // The new holder writes on.
      const owner = (await ctx.openStore()).fenced(second.fence)
      await owner.startEffect('r1', 'c1')
      await owner.completeEffect({ runId: 'r1', callId: 'c1', status: 'succeeded', output: 'from w2' })
      const next = await owner.save({ runId: 'r1', kind: 'demo', phase: 'p', payload: { by: 'w2' } })
      expect((await store.listCheckpoints({ runId: 'r1' })).map((cp) => [cp.id, cp.metadata.lease])).toEqual([
        [next, { owner: 'w2', epoch: 2 }],
        [kept, { owner: 'w1', epoch: 1 }],
      ])
      expect(await store.getEffect('r1', 'c1')).toMatchObject({ status: 'succeeded', output: 'from w2' })
    })

    it('a write to a child run is fenced on the parent run’s lease', async () => {
      const store = await ctx.openStore()
      const leases = leasesOf(store)
      await leases.enqueue({ runId: 'parent' })
      const [held] = await leases.claim({ owner: 'w1', limit: 1, leaseMs: 30 })
      const view = store.fenced(held!.fence)
      await view.createRun({ runId: 'child' })
      await view.save({ runId: 'child', kind: 'demo', phase: 'p', payload: 1 })
      await takeOver(leases, 'w2', 'parent')
      await expect(view.save({ runId: 'child', kind: 'demo', phase: 'p', payload: 2 })).rejects.toBeInstanceOf(LeaseLostError)
      expect(await store.listCheckpoints({ runId: 'child' })).toHaveLength(1)
    })

    it('claims hand each run out once, most urgent first, and only from the queues asked for', async () => {
      const store = await ctx.openStore()
      const leases = leasesOf(store)
      for (let i = 0; i < 12; i++) {
        await leases.enqueue({ runId: `r${String(i).padStart(2, '0')}`, queue: i % 3 === 0 ? 'batch' : 'default', priority: i === 7 ? 5 : 0 })
        await sleep(2)
      }
      const [urgent, oldest] = await leases.claim({ owner: 'a', limit: 2, leaseMs: 60_000, queues: ['default'] })
      expect([urgent?.run.runId, oldest?.run.runId]).toEqual(['r07', 'r01'])
      expect((await leases.claim({ owner: 'a', limit: 10, leaseMs: 60_000, queues: ['batch'] })).map((c) => c.run.runId)).toEqual(['r00', 'r03', 'r06', 'r09'])

      // Six claimers at once, on separate handles where the backend has them: no run twice.
      const handles = await Promise.all(Array.from({ length: 6 }, () => ctx.openStore()))
      const claims = await Promise.all(handles.map((handle, k) => leasesOf(handle).claim({ owner: `w${k}`, limit: 2, leaseMs: 60_000 })))
      const ids = claims.flat().map((c) => c.run.runId)
      expect(new Set(ids).size).toBe(ids.length)
      expect(ids.sort()).toEqual(['r02', 'r04', 'r05', 'r08', 'r10', 'r11'])
      expect(await leases.claim({ owner: 'late', limit: 5, leaseMs: 60_000 })).toEqual([])
    })

    it('a per-queue limit holds across workers', async () => {
      const store = await ctx.openStore()
      const leases = leasesOf(store)
      for (let i = 0; i < 4; i++) await leases.enqueue({ runId: `gpu-${i}`, queue: 'gpu' })
      for (let i = 0; i < 3; i++) await leases.enqueue({ runId: `cpu-${i}`, queue: 'cpu' })
      const queueLimits = { gpu: 2 }
      const a = await leases.claim({ owner: 'a', limit: 10, leaseMs: 60_000, queueLimits })
      expect(a.map((c) => c.run.runId).sort()).toEqual(['cpu-0', 'cpu-1', 'cpu-2', 'gpu-0', 'gpu-1'])
      expect(await leases.claim({ owner: 'b', limit: 10, leaseMs: 60_000, queueLimits })).toEqual([])
      await leases.release(a.find((c) => c.run.runId === 'gpu-0')!.fence, { status: 'completed' })
      expect((await leases.claim({ owner: 'b', limit: 10, leaseMs: 60_000, queueLimits })).map((c) => c.run.runId)).toEqual(['gpu-2'])
    })

    it('heartbeats extend only leases still held; a released run is claimable again unless finished', async () => {
      const store = await ctx.openStore()
      const leases = leasesOf(store)
      await leases.enqueue({ runId: 'r1' })
      await leases.enqueue({ runId: 'r2' })
      const claimed = await leases.claim({ owner: 'w1', limit: 2, leaseMs: 600 })
      const runs = claimed.map((c) => ({ runId: c.run.runId, epoch: c.fence.epoch }))
      // Four heartbeats 200 ms apart keep the 600 ms leases alive well past their first expiry.
      for (let i = 0; i < 4; i++) {
        await sleep(200)
        expect((await leases.heartbeat({ owner: 'w1', leaseMs: 600, runs })).map((h) => h.runId).sort()).toEqual(['r1', 'r2'])
        expect(await leases.claim({ owner: 'w2', limit: 2, leaseMs: 60_000 })).toEqual([])
      }
      // A heartbeat at a stale epoch or from another owner extends nothing.
      expect(await leases.heartbeat({ owner: 'w1', leaseMs: 60, runs: [{ runId: 'r1', epoch: 7 }] })).toEqual([])
      expect(await leases.heartbeat({ owner: 'w2', leaseMs: 60, runs })).toEqual([])

      const [r1, r2] = claimed
      await leases.release(r1!.fence, { status: 'completed' })
      await leases.release(r2!.fence, {})
      await expect(leases.release(r2!.fence, {})).rejects.toBeInstanceOf(LeaseLostError)
      expect(await leases.getLease('r1')).toMatchObject({ owner: null, leaseExpiresAt: null, epoch: 1, recoveries: 0 })
      const again = await leases.claim({ owner: 'w2', limit: 5, leaseMs: 60_000 })
      expect(again.map((c) => [c.run.runId, c.fence.epoch, c.lease.recoveries])).toEqual([['r2', 2, 0]])
      // A release that reports a failed execution counts one recovery.
      await leases.release(again[0]!.fence, { failed: true, metadata: { note: 'failed once' } })
      expect(await store.getRun('r2')).toMatchObject({ status: 'queued', metadata: { note: 'failed once' } })
      expect((await leases.claim({ owner: 'w3', limit: 1, leaseMs: 60_000 }))[0]?.lease).toMatchObject({ epoch: 3, recoveries: 1 })
    })

    it('cancel: at once when nobody holds the run, through the holder’s next write when one does', async () => {
      const store = await ctx.openStore()
      const leases = leasesOf(store)
      await leases.enqueue({ runId: 'queued' })
      expect(await leases.cancel('queued')).toEqual({ outcome: 'cancelled', status: 'cancelled' })
      expect(await store.getRun('queued')).toMatchObject({ status: 'cancelled' })

      await leases.enqueue({ runId: 'held' })
      const [held] = await leases.claim({ owner: 'w1', limit: 1, leaseMs: 60_000 })
      let requested = 0
      const view = store.fenced(held!.fence, { onCancelRequested: () => requested++ })
      await view.save({ runId: 'held', kind: 'demo', phase: 'p', payload: 1 })
      expect(requested).toBe(0)
      expect(await leases.cancel('held')).toEqual({ outcome: 'requested', status: 'queued' })
      await view.save({ runId: 'held', kind: 'demo', phase: 'p', payload: 2 })
      expect(requested).toBe(1)
      expect(await leases.heartbeat({ owner: 'w1', leaseMs: 60_000, runs: [{ runId: 'held', epoch: 1 }] })).toEqual([{ runId: 'held', cancelRequested: true }])
      await view.updateRun('held', { status: 'cancelled' })
      await leases.release(held!.fence)
      expect(await leases.cancel('held')).toEqual({ outcome: 'unchanged', status: 'cancelled' })

      // A holder whose lease lapsed is fenced out by the cancel.
      await leases.enqueue({ runId: 'lapsed' })
      const [lapsed] = await leases.claim({ owner: 'w1', limit: 1, leaseMs: 20 })
      await sleep(40)
      expect(await leases.cancel('lapsed')).toEqual({ outcome: 'cancelled', status: 'cancelled' })
      await expect(store.fenced(lapsed!.fence).save({ runId: 'lapsed', kind: 'demo', phase: 'p', payload: 1 })).rejects.toBeInstanceOf(LeaseLostError)
      await expect(leases.cancel('nope')).rejects.toMatchObject({ code: 'run_not_found' })
    })

    it('a release with a final status and a requeue of a paused run leave a row every read accepts (its digest recomputed)', async () => {
      const store = await ctx.openStore()
      const leases = leasesOf(store)
      await leases.enqueue({ runId: 'asks', metadata: { n: 1 } })
      const [held] = await leases.claim({ owner: 'w1', limit: 1, leaseMs: 60_000 })
      await leases.release(held!.fence, { status: 'paused', metadata: { n: 1, question: 'ok?' } })
      expect(await store.getRun('asks')).toMatchObject({ status: 'paused', metadata: { question: 'ok?' } })
      expect(await leases.requeuePaused('asks', (run) => ({ ...run.metadata, answer: 'yes' }))).toEqual({ outcome: 'queued' })
      expect(await store.getRun('asks')).toMatchObject({ status: 'queued', metadata: { n: 1, question: 'ok?', answer: 'yes' } })
      expect((await store.listRuns()).map((run) => run.status)).toEqual(['queued'])
    })

    it("the engine's release, requeue and cancel change a run row only while its digest is the one their swap expects", async () => {
      const store = await ctx.openStore()
      const engine = ctx.engine()
      const leases = engine.leases!
      await leasesOf(store).enqueue({ runId: 's' })
      const queued = (await engine.getRun('s'))!.digest ?? null
      const stale = { ifDigest: 'not-the-digest', digest: 'never' }
      const [held] = await leasesOf(store).claim({ owner: 'w1', limit: 1, leaseMs: 60_000 })
      expect(await leases.release({ fence: held!.fence, patch: { status: 'paused', updatedAt: 1, swap: stale } })).toEqual({ outcome: 'changed' })
      expect(await leases.getLease('s')).toMatchObject({ owner: 'w1' })
      expect(await leases.release({ fence: held!.fence, patch: { status: 'paused', updatedAt: 1, swap: { ifDigest: queued, digest: 'paused' } } })).toBe(true)
      expect(await engine.getRun('s')).toMatchObject({ status: 'paused', digest: 'paused' })
      const requeue = { runId: 's', metadata: '{"answer":1}', now: Date.now() }
      expect(await leases.requeuePaused({ ...requeue, swap: stale })).toEqual({ outcome: 'changed' })
      expect(await engine.getRun('s')).toMatchObject({ status: 'paused', metadata: '{}', digest: 'paused' })
      expect(await leases.requeuePaused({ ...requeue, swap: { ifDigest: 'paused', digest: 'requeued' } })).toMatchObject({ outcome: 'queued' })
      expect(await engine.getRun('s')).toMatchObject({ status: 'queued', metadata: '{"answer":1}', digest: 'requeued' })
      expect(await leases.cancel('s', stale)).toEqual({ outcome: 'changed' })
      expect(await engine.getRun('s')).toMatchObject({ status: 'queued', digest: 'requeued' })
      expect(await leases.cancel('s', { ifDigest: 'requeued', digest: 'cancelled' })).toEqual({ outcome: 'cancelled', status: 'cancelled' })
      expect(await engine.getRun('s')).toMatchObject({ status: 'cancelled', digest: 'cancelled' })
    })

    it('enqueue is idempotent by run id, and a store without the run refuses a fence', async () => {
      const store = await ctx.openStore()
      const leases = leasesOf(store)
      const first = await leases.enqueue({ runId: 'r1', name: 'job', metadata: { n: 1 }, priority: 3 })
      expect(first).toMatchObject({ created: true, run: { runId: 'r1', status: 'queued', name: 'job', metadata: { n: 1 } } })
      const again = await leases.enqueue({ runId: 'r1', name: 'other', metadata: { n: 2 } })
      expect(again).toMatchObject({ created: false, run: { name: 'job', metadata: { n: 1 } } })
      expect(await leases.getLease('r1')).toMatchObject({ queue: 'default', priority: 3, owner: null, epoch: 0 })
      await expect(store.fenced({ runId: 'ghost', owner: 'w1', epoch: 1 }).save({ runId: 'ghost', kind: 'demo', phase: 'p', payload: 1 })).rejects.toBeInstanceOf(
        LeaseLostError,
      )
      expect(await store.getRun('ghost')).toBeUndefined()
      // A run created outside the queue is never claimed.
      await store.save({ runId: 'plain', kind: 'demo', phase: 'p', payload: 1 })
      expect((await leases.claim({ owner: 'w1', limit: 5, leaseMs: 60_000 })).map((c) => c.run.runId)).toEqual(['r1'])
    })
  })
}
