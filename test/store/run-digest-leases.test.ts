import { afterAll, describe, expect, it } from 'vitest'
import { Runner, type CheckpointStore, type EngineStoreOptions } from '../../src/index.js'
import { EngineStore, MemoryEngine } from '../../src/engine.js'
import { runDigest, type RunRow } from '../../src/engine.js'
import { fileBackend, postgresBackend, removeTempDirs, sqliteBackend, type RawBackend } from '../trust/raw-rows.js'
import { crashedRun, KEY_A, scriptedAgent } from '../trust/scenario.js'

afterAll(removeTempDirs)

const BACKENDS: readonly [string, () => Promise<RawBackend | undefined>][] = [
  ['memory', async () => undefined],
  ['sqlite', sqliteBackend],
  ['file', fileBackend],
  ['postgres', postgresBackend],
]
const MODES: readonly [string, EngineStoreOptions][] = [
  ['without keys', {}],
  ['with keys', { keys: [KEY_A] }],
]

for (const [name, open] of BACKENDS) {
  for (const [mode, options] of MODES) {
    describe(`status changes made by the lease code of ${name} ${mode}`, { timeout: 60_000 }, () => {
      it('leave a row whose digest verifies: enqueue, claim, release paused, requeue, cancel requested, cancel', async () => {
        const backend = await open()
        const store = backend ? backend.open(options) : new EngineStore(new MemoryEngine(), options)
        const leases = store.leases!
        const read = () => store.getRun('job')
        await leases.enqueue({ runId: 'job', name: 'job', metadata: { n: 1 } })
        expect(await read()).toMatchObject({ status: 'queued' })
        const [first] = await leases.claim({ owner: 'w1', limit: 1, leaseMs: 60_000 })
        await leases.release(first!.fence, { status: 'paused', metadata: { n: 1, waiting: true } })
        expect(await read()).toMatchObject({ status: 'paused', metadata: { n: 1, waiting: true } })
        expect(await leases.requeuePaused('job', (run) => ({ ...run.metadata, responses: { approve: true } }))).toEqual({ outcome: 'queued' })
        expect(await read()).toMatchObject({ status: 'queued', metadata: { n: 1, waiting: true, responses: { approve: true } } })
        const [second] = await leases.claim({ owner: 'w2', limit: 1, leaseMs: 60_000 })
        expect(await leases.cancel('job')).toMatchObject({ outcome: 'requested' })
        await leases.release(second!.fence)
        expect(await leases.cancel('job')).toEqual({ outcome: 'cancelled', status: 'cancelled' })
        expect(await read()).toMatchObject({ status: 'cancelled', metadata: { responses: { approve: true } } })
        await store.close()
        if (backend && options.keys === undefined) {
          const stored = await backend.runColumns('job')
          expect(stored.digest).toBe(runDigest({ ...(stored as unknown as RunRow), createdAt: Number(stored.createdAt) }))
        }
      })
    })
  }
}

/** Lease columns as a SQL backend stores them, edited to hand the run to nobody in particular. */
function leaseEdits(backend: RawBackend): Record<string, unknown> {
  const expired = backend.name.startsWith('postgres') ? '1970-01-01T00:00:01Z' : 1000
  return { owner: 'intruder', leaseEpoch: 41, leaseExpiresAt: expired, recoveries: 9, queue: 'elsewhere', priority: 7 }
}

/** The lease columns are not covered by the digest: editing them changes who may write, never what a resume trusts. */
for (const [name, open] of [
  ['sqlite', sqliteBackend],
  ['postgres', postgresBackend],
] as const) {
  for (const [mode, options] of MODES) {
    describe(`lease columns of a ${name} store ${mode}`, { timeout: 60_000 }, () => {
      it('edited under a crashed run, change nothing a read returns, and the resume repeats no model call and no tool', async () => {
        const backend = await open()
        const store: CheckpointStore = backend.open(options)
        const world = await crashedRun(store, 'crashed')
        const before = await store.getRun('crashed')
        await store.close()
        await backend.writeRunRow('crashed', leaseEdits(backend))
        const reopened = backend.open(options)
        expect(await reopened.getRun('crashed')).toEqual(before)
        const fresh = scriptedAgent(world)
        const resumed = await new Runner({ store: reopened }).resume(fresh.agent, { runId: 'crashed' })
        // The note started without an outcome: a human decides; nothing ran again.
        expect(resumed.state).not.toBe('failed')
        expect(fresh.model.calls).toHaveLength(0)
        expect(world.count('lookup:')).toBe(2)
        expect(world.count('note:')).toBe(1)
        await reopened.close()
      })
    })
  }
}
