import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { CairnClient } from '../../src/index.js'
import { type EngineStore } from '../../src/engine.js'
import { postgresTarget } from '../fixtures/postgres-target.js'
import { auditRuns } from './fixtures/audit.js'
import { Fleet, waitFor } from './fixtures/fleet.js'
import type { WorkerProcessConfig } from './fixtures/worker-process.js'

// Real worker processes on a real Postgres server. Skipped on PGlite, which lives inside one
// process: worker processes cannot share it (the reason is printed when the target is chosen).
const target = await postgresTarget()
afterAll(() => target.close())
const skip = target.skipChildProcesses !== undefined

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A store on a fresh schema, a directory for effects and logs, and a fleet of workers on both. */
async function setup(config: Partial<WorkerProcessConfig>): Promise<{ store: EngineStore; client: CairnClient; fleet: Fleet; effectsDir: string }> {
  const schema = target.freshSchema()
  const store = target.openStore(schema, { onWarning: () => {} })
  cleanups.push(() => store.close())
  const dir = await mkdtemp(join(tmpdir(), 'cairn-fleet-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  const fleet = new Fleet({
    backend: { kind: 'postgres', connectionString: target.connectionString!, schema },
    logFile: join(dir, 'events.log'),
    effectsDir: dir,
    concurrency: 4,
    leaseMs: 1500,
    heartbeatMs: 300,
    pollMs: 200,
    maxRecoveryAttempts: 50,
    cycles: 5,
    toolDelayMs: 60,
    ...config,
  })
  cleanups.push(() => fleet.stopAll(1000))
  return { store, client: new CairnClient({ store }), fleet, effectsDir: dir }
}

async function countStatus(store: EngineStore, status: 'completed' | 'failed'): Promise<number> {
  return (await store.listRuns({ status, limit: 10_000 })).length
}

describe.skipIf(skip)('workers in separate processes on Postgres', () => {
  it('4 workers killed with SIGKILL at random and restarted finish 200 runs: each effect once, one owner at a time', async () => {
    const { store, client, fleet, effectsDir } = await setup({})
    const runIds = Array.from({ length: 200 }, (_, i) => `run-${String(i).padStart(3, '0')}`)
    for (const runId of runIds) await client.enqueue('job', { input: 'apply five effects', runId })
    for (let slot = 0; slot < 4; slot++) fleet.start(slot)

    // Chaos: SIGKILL a random worker and start a fresh one in its place, ten times. Each kill is
    // keyed to progress (the k-th once a set number of runs completed), not to the clock, so all
    // ten land while runs are in flight however fast the machine is.
    const killAtCompleted = [5, 20, 35, 50, 65, 80, 95, 110, 125, 140]
    let kills = 0
    const started = Date.now()
    for (;;) {
      const completed = await countStatus(store, 'completed')
      if (completed >= runIds.length) break
      if (Date.now() - started > 80_000) throw new Error(`runs did not finish; worker stderr:\n${fleet.stderr()}`)
      const threshold = killAtCompleted[kills]
      if (threshold !== undefined && completed >= threshold) {
        const slot = Math.floor(Math.random() * 4)
        await fleet.kill(slot)
        kills++
        fleet.start(slot)
      }
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    await fleet.stopAll()

    for (const runId of runIds) expect((await client.result(runId)).status, runId).toBe('completed')
    const audit = await auditRuns({ store, runIds, log: fleet.log(), effectsDir, cycles: 5 })
    expect(audit.violations).toEqual([])
    expect(kills).toBe(10)
    // The kills cut runs short, and other workers took those runs over.
    expect(audit.recoveredRuns).toBeGreaterThan(0)
    console.info(`kill test: ${kills} kills, ${audit.claims} claims for ${runIds.length} runs, ${audit.recoveredRuns} runs recovered, ${audit.reexecutions} effect re-executions under the same key`)
  }, 100_000)

  it('a zombie worker frozen past its lease has every write rejected once it wakes, and abandons the run', async () => {
    const { store, client, fleet, effectsDir } = await setup({ concurrency: 1, leaseMs: 1500, heartbeatMs: 250, pollMs: 100, cycles: 4, toolDelayMs: 900 })
    await client.enqueue('job', { input: 'apply four effects', runId: 'r1' })
    const zombie = fleet.start(0)
    await waitFor(async () => (await store.listEffects('r1')).some((e) => e.callId === 'call-1'), 'the first worker to reach its second tool call', 20_000)
    fleet.signal(0, 'SIGSTOP')
    const successor = fleet.start(1)
    const successorWrote = async () => (await store.listCheckpoints({ runId: 'r1' })).some((cp) => (cp.metadata.lease as { owner: string }).owner === successor.id)
    await waitFor(successorWrote, 'the second worker to take the run over and write', 20_000)
    fleet.signal(0, 'SIGCONT')

    await waitFor(async () => (await store.getRun('r1'))?.status === 'completed', 'the run to complete', 20_000)
    await waitFor(() => fleet.log().some((e) => e.type === 'lost' && e.worker === zombie.id), 'the zombie to give the run up', 10_000)
    const zombieEvents = fleet.log().filter((e) => e.worker === zombie.id && e.runId === 'r1')
    expect(zombieEvents.map((e) => e.type)).toEqual(['claimed', 'lost'])
    const lost = zombieEvents[1]!
    // On waking it finds its lease deadline passed (or a write refused by the store, if one raced
    // that check) and refuses every write from then on: its run ends without writing anything.
    expect(lost).toMatchObject({ epoch: 1 })
    expect(lost.rejectedWrites).toBeGreaterThan(0)
    expect(fleet.log().find((e) => e.type === 'claimed' && e.worker === successor.id)).toMatchObject({ runId: 'r1', epoch: 2, recoveries: 1 })
    // The zombie is alive and well; it just does not touch the run any more.
    expect(zombie.child.exitCode).toBeNull()
    await fleet.stopAll()

    const audit = await auditRuns({ store, runIds: ['r1'], log: fleet.log(), effectsDir, cycles: 4 })
    expect(audit.violations).toEqual([])
    expect(audit.recoveredRuns).toBe(1)
    const owners = (await store.listCheckpoints({ runId: 'r1' })).reverse().map((cp) => (cp.metadata.lease as { owner: string }).owner)
    expect(owners.lastIndexOf(zombie.id)).toBeLessThan(owners.indexOf(successor.id))
  }, 60_000)

  it('a run that keeps killing its workers is failed after maxRecoveryAttempts, and the other runs finish', async () => {
    // One run at a time per worker, so the other runs never die alongside the poison run (and
    // never count recoveries of their own).
    const { store, client, fleet, effectsDir } = await setup({ concurrency: 1, leaseMs: 1200, heartbeatMs: 200, pollMs: 100, maxRecoveryAttempts: 2, cycles: 2, toolDelayMs: 10 })
    await client.enqueue('poison', { input: 'crash', runId: 'poison' })
    const runIds = Array.from({ length: 10 }, (_, i) => `ok-${i}`)
    for (const runId of runIds) await client.enqueue('job', { input: 'apply two effects', runId })
    for (let slot = 0; slot < 2; slot++) fleet.start(slot)
    // Restart whichever worker the poison run killed.
    const deadline = Date.now() + 60_000
    while ((await store.getRun('poison'))?.status !== 'failed' || (await countStatus(store, 'completed')) < runIds.length) {
      if (Date.now() > deadline) throw new Error(`timed out; worker stderr:\n${fleet.stderr()}`)
      for (const [slot, member] of fleet.members) {
        if (member.child.exitCode !== null || member.child.signalCode !== null) {
          await fleet.kill(slot)
          fleet.start(slot)
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    await fleet.stopAll()
    const outcome = await client.result('poison')
    expect(outcome).toMatchObject({ status: 'failed', error: { name: 'RecoveryLimitError', code: 'max_recovery_attempts' } })
    expect(outcome.error?.message).toContain('recovered 3 times')
    expect(fleet.log().filter((e) => e.type === 'poisoned')).toHaveLength(3)
    const audit = await auditRuns({ store, runIds, log: fleet.log(), effectsDir, cycles: 2 })
    expect(audit.violations).toEqual([])
  }, 90_000)
})
