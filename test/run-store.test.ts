import { describe, expect, it } from 'vitest'
import { Agent, MemoryStore, Runner, type RunStore } from '../src/index.js'
import { ScriptedModel } from '../src/testing.js'

async function claimed(store: MemoryStore, runId: string) {
  const leases = store.leases!
  await leases.enqueue({ runId, name: 'job', metadata: { cairn: { name: 'job', input: 'go' }, tag: 'kept' } })
  const [claim] = await leases.claim({ owner: 'w1', limit: 1, leaseMs: 60_000 })
  return claim!
}

describe('the parts of a store', () => {
  it('a fenced view reads and writes its run and offers no delete, deleteRun, fork, prune or close', async () => {
    const store = new MemoryStore()
    const claim = await claimed(store, 'r1')
    const view: RunStore = store.fenced(claim.fence)
    const id = await view.save({ runId: 'r1', kind: 'demo', phase: 'start', payload: { n: 1 } })
    expect((await view.load(id)).payload).toEqual({ n: 1 })
    for (const method of ['delete', 'deleteRun', 'fork', 'prune', 'close']) expect(method in view).toBe(false)
    // The store itself still administers the run.
    expect(await store.delete(id)).toBe(true)
  })

  it('runner.run adopts a queued run that has no checkpoint yet, through a fenced view, keeping its metadata', async () => {
    const store = new MemoryStore()
    const claim = await claimed(store, 'r2')
    const agent = new Agent({ name: 'job', model: new ScriptedModel([[{ text: 'done' }]]) })
    const runner = new Runner({ store: store.fenced(claim.fence) })
    const result = await runner.run(agent, { runId: 'r2', input: 'go', lease: { fence: claim.fence } })
    expect(result.state).toBe('completed')
    const run = await store.getRun('r2')
    expect(run?.status).toBe('completed')
    expect(run?.name).toBe('job')
    expect(run?.metadata.tag).toBe('kept')
    expect(run?.metadata.cairn).toEqual({ name: 'job', input: 'go' })
  })

  it('runner.run refuses a run that already has a checkpoint', async () => {
    const store = new MemoryStore()
    await store.save({ runId: 'r3', kind: 'demo', phase: 'start', payload: {} })
    const agent = new Agent({ name: 'job', model: new ScriptedModel([[{ text: 'done' }]]) })
    await expect(new Runner({ store }).run(agent, { runId: 'r3', input: 'go' })).rejects.toMatchObject({ code: 'run_exists' })
  })
})
