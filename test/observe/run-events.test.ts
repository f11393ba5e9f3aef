import { describe, expect, it } from 'vitest'
import { Runner, type RunEvent } from '../../src/index.js'
import { dyingStore, researchAgent, sqliteStore, World, CRASH_LEASE_MS, leaseLapsed } from '../runner/helpers.js'

describe('run events', () => {
  it('onEvent and runner.stream report the same typed events: started, model calls with tokens, tools, commits, finished', async () => {
    const { store } = await sqliteStore()
    const seen: RunEvent[] = []
    const runner = new Runner({ store, durability: 'sync', onEvent: (event) => seen.push(event) })
    const streamed: RunEvent[] = []
    const events = runner.stream(researchAgent(new World()).agent, { input: 'research', runId: 'ev' })
    let next = await events.next()
    while (!next.done) {
      streamed.push(next.value)
      next = await events.next()
    }
    expect(next.value.state).toBe('completed')
    expect(streamed).toEqual(seen)
    const types = seen.map((e) => e.type)
    expect(types[0]).toBe('run_started')
    expect(types.at(-1)).toBe('run_finished')
    expect(seen.filter((e) => e.type === 'model_call_finished')).toHaveLength(3)
    expect(seen.find((e) => e.type === 'model_call_finished')).toMatchObject({ runId: 'ev', step: 0, model: 'scripted', stopReason: 'tool_use', toolCalls: 2, usage: { inputTokens: expect.any(Number) as number } })
    expect(seen.filter((e) => e.type === 'tool_call_finished').map((e) => (e as { toolUseId: string }).toolUseId).sort()).toEqual(['lookup-a', 'lookup-b', 'note-1'])
    const committed = seen.filter((e) => e.type === 'phase_committed').map((e) => (e as { phase: string }).phase)
    expect(committed).toEqual((await runner.history('ev')).map((c) => c.phase))
  })

  it('a resume reports the calls the journal satisfied as tool_call_replayed, not as started', async () => {
    const { store, reopen } = await sqliteStore()
    // The store "dies" after the note's batch intents and outcome are written, before the batch checkpoint.
    const world = new World()
    void new Runner({ store: dyingStore(store, 6), leaseMs: CRASH_LEASE_MS, durability: 'sync' }).run(researchAgent(world).agent, { input: 'research', runId: 'ev2' })
    await expect.poll(() => world.count('note:a and b'), { timeout: 20_000 }).toBe(1)
    await leaseLapsed(store, 'ev2')
    const seen: RunEvent[] = []
    const result = await new Runner({ store: reopen(), durability: 'sync', onEvent: (e) => seen.push(e) }).resume(researchAgent(new World()).agent, { runId: 'ev2' })
    expect(result.state).toBe('completed')
    expect(seen[0]).toMatchObject({ type: 'run_started', resumed: true })
    const replayed = seen.filter((e) => e.type === 'tool_call_replayed')
    expect(replayed.length).toBe(result.replayedEffectCount)
    expect(replayed.length).toBeGreaterThan(0)
    for (const event of replayed) expect(seen.some((e) => e.type === 'tool_call_started' && e.toolUseId === (event as { toolUseId: string }).toolUseId)).toBe(false)
  })
})
