import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, expect, it } from 'vitest'
import { CairnClient } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { auditRuns } from './fixtures/audit.js'
import { Fleet } from './fixtures/fleet.js'

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

it('the same protocol on SQLite: 3 worker processes on one file, killed at random, finish 60 runs with one owner at a time', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-sqlite-fleet-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  const path = join(dir, 'cairn.db')
  const store = new SqliteStore({ path })
  cleanups.push(() => store.close())
  const client = new CairnClient({ store })
  const fleet = new Fleet({
    backend: { kind: 'sqlite', path },
    logFile: join(dir, 'events.log'),
    effectsDir: dir,
    concurrency: 3,
    leaseMs: 1200,
    heartbeatMs: 250,
    pollMs: 100,
    maxRecoveryAttempts: 50,
    cycles: 4,
    toolDelayMs: 60,
  })
  cleanups.push(() => fleet.stopAll(1000))
  const runIds = Array.from({ length: 60 }, (_, i) => `run-${String(i).padStart(2, '0')}`)
  for (const runId of runIds) await client.enqueue('job', { input: 'apply four effects', runId })
  for (let slot = 0; slot < 3; slot++) fleet.start(slot)

  // Kills are tied to progress, not to the clock: the k-th kill lands once the fleet has completed
  // a set number of runs, so all five happen while runs are still in flight on any machine speed.
  const killAtCompleted = [3, 10, 18, 26, 34]
  let kills = 0
  const started = Date.now()
  for (;;) {
    const completed = (await store.listRuns({ status: 'completed', limit: 1000 })).length
    if (completed >= runIds.length) break
    if (Date.now() - started > 60_000) throw new Error(`runs did not finish; worker stderr:\n${fleet.stderr()}`)
    const threshold = killAtCompleted[kills]
    if (threshold !== undefined && completed >= threshold) {
      const slot = Math.floor(Math.random() * 3)
      await fleet.kill(slot)
      kills++
      fleet.start(slot)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  await fleet.stopAll()
  const audit = await auditRuns({ store, runIds, log: fleet.log(), effectsDir: dir, cycles: 4 })
  expect(audit.violations).toEqual([])
  expect(kills).toBe(5)
  expect(audit.recoveredRuns).toBeGreaterThan(0)
}, 80_000)
