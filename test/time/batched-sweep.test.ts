import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import type { EngineStore } from '../../src/engine.js'
import { SqliteStore } from '../../src/sqlite.js'
import { sweep } from '../../src/worker/time-sweep.js'
import { postgresTarget } from '../fixtures/postgres-target.js'

const target = await postgresTarget()
const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})
afterAll(() => target.dropSchemas())

const backends = [
  {
    name: 'SQLite (two handles on one file)',
    open: async () => {
      const dir = await mkdtemp(join(tmpdir(), 'cairn-sweep-'))
      cleanups.push(() => rm(dir, { recursive: true, force: true }))
      return () => new SqliteStore({ path: join(dir, 'cairn.db') })
    },
  },
  {
    name: 'Postgres (two pools on one schema)',
    open: async () => {
      const schema = target.freshSchema()
      return () => target.openStore(schema) as EngineStore
    },
  },
]

const NOW = Date.parse('2026-03-02T09:00:00.000Z')

/** `n` runs enqueued, claimed, handed back `sleeping` with a timer at `NOW - i` ms. */
async function sleepers(store: EngineStore, n: number): Promise<string[]> {
  const leases = store.leases!
  const runIds = Array.from({ length: n }, (_, i) => `nap-${String(i).padStart(3, '0')}`)
  for (const runId of runIds) await leases.enqueue({ runId, name: 'sleeper' })
  for (const lease of await leases.claim({ owner: 'setup', limit: n, leaseMs: 60_000 })) await leases.release(lease.fence, { status: 'sleeping' })
  for (const [i, runId] of runIds.entries()) await store.waits!.setTimer(runId, NOW - i)
  return runIds
}

describe.each(backends)('the sweep requeues due timers in batches: $name', ({ open }) => {
  it('two sweeps at once over 60 due sleepers (one finished meanwhile, one not due) wake each due run once and clear its timer', { timeout: 60_000 }, async () => {
    const handle = await open()
    const [a, b] = [handle(), handle()]
    cleanups.push(() => a.close(), () => b.close())
    const runIds = await sleepers(a, 60)
    await a.updateRun(runIds[1]!, { status: 'completed' })
    await a.waits!.setTimer(runIds[2]!, NOW + 60_000)

    const [one, two] = await Promise.all([
      sweep({ waits: a.waits!, leases: a.leases!, now: () => NOW }),
      sweep({ waits: b.waits!, leases: b.leases!, now: () => NOW }),
    ])
    const woken = [...one.woken, ...two.woken].sort()
    const due = runIds.filter((_, i) => i !== 1 && i !== 2)
    expect(woken).toEqual(due)
    for (const runId of due) expect((await a.getRun(runId))?.status).toBe('queued')
    expect((await a.getRun(runIds[1]!))?.status).toBe('completed')
    expect((await a.getRun(runIds[2]!))?.status).toBe('sleeping')
    // Cleared: the woken runs' timers and the finished run's; kept: the one not due.
    expect((await a.waits!.dueTimers(NOW + 120_000, 1000)).map((timer) => timer.runId)).toEqual([runIds[2]])
    // A second pass finds nothing more to wake.
    expect((await sweep({ waits: a.waits!, leases: a.leases!, now: () => NOW })).woken).toEqual([])
  })

  it('a run still held by its worker is left for the next sweep, the others of the batch are queued', { timeout: 60_000 }, async () => {
    const store = (await open())()
    cleanups.push(() => store.close())
    const runIds = await sleepers(store, 3)
    // The lease is taken again (as by a worker handing the run back late) while the run is stored sleeping.
    const acquired = await store.leases!.acquire({ runId: runIds[0]!, owner: 'slow', leaseMs: 60_000 })
    expect(acquired.outcome).toBe('acquired')
    const { woken } = await sweep({ waits: store.waits!, leases: store.leases!, now: () => NOW })
    expect(woken.sort()).toEqual(runIds.slice(1))
    expect(await store.waits!.getTimer(runIds[0]!)).toBe(NOW)
  })
})
