import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, expect, it } from 'vitest'
import { CairnClient } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { Fleet, type LogEntry } from './fixtures/fleet.js'

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** Poll the log until `find` matches an entry (store state, never a fixed sleep), for at most `timeoutMs`. */
async function logged(fleet: Fleet, find: (entry: LogEntry) => boolean, timeoutMs = 60_000): Promise<LogEntry> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const found = fleet.log().find(find)
    if (found) return found
    if (Date.now() > deadline) throw new Error(`not logged in time; log:\n${JSON.stringify(fleet.log())}\nstderr:\n${fleet.stderr()}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

it('a worker SIGKILLed on this machine has its run taken over by the next worker at once, while its lease is still live', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-dead-worker-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  const path = join(dir, 'cairn.db')
  const store = new SqliteStore({ path })
  cleanups.push(() => store.close())
  const client = new CairnClient({ store })
  // A lease far longer than the test may take: only the dead-owner check can hand the run over.
  const fleet = new Fleet({
    backend: { kind: 'sqlite', path },
    logFile: join(dir, 'events.log'),
    effectsDir: dir,
    concurrency: 1,
    leaseMs: 600_000,
    heartbeatMs: 200,
    pollMs: 100,
    maxRecoveryAttempts: 5,
    cycles: 4,
    toolDelayMs: 200,
  })
  cleanups.push(() => fleet.stopAll(1000))
  await client.enqueue('job', { input: 'apply four effects', runId: 'held' })

  // Default worker ids (`<host>:<pid>:<random>`), as a worker started without an id has.
  const first = fleet.start(0, { id: undefined })
  const claimed = await logged(fleet, (entry) => entry.type === 'claimed' && entry.pid === first.child.pid)
  const before = await store.leases!.getLease('held')
  expect(before).toMatchObject({ owner: claimed.owner, epoch: claimed.epoch })
  await fleet.kill(0)

  const second = fleet.start(1, { id: undefined })
  const takeover = await logged(fleet, (entry) => entry.type === 'claimed' && entry.pid === second.child.pid)
  expect(takeover).toMatchObject({ runId: 'held', epoch: before!.epoch + 1, recoveries: 1 })
  // Taken over while the dead worker's lease still had most of its 10 minutes to run.
  expect(takeover.at).toBeLessThan(before!.leaseExpiresAt!)
  expect(await client.result('held', { timeoutMs: 60_000 })).toMatchObject({ status: 'completed', result: { state: 'completed' } })
}, 120_000)
