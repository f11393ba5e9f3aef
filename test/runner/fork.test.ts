import { describe, expect, it } from 'vitest'
import { CheckpointError, forkRun, Runner } from '../../src/index.js'
import { researchAgent, sqliteStore, World } from './helpers.js'

describe('forking a runner run', () => {
  for (const durability of ['sync', 'async'] as const) {
    it(`forks at every checkpoint of a finished run (${durability}) and each fork resumes to the same answer`, async () => {
      const { store } = await sqliteStore()
      const world = new World()
      const runner = new Runner({ store, durability })
      await runner.run(researchAgent(world).agent, { input: 'research', runId: 'src' })
      const history = await runner.history('src')
      expect(history.some((c) => c.phase === 'pre_llm' && c.payload.runtime === undefined)).toBe(true)
      for (const [i, checkpoint] of history.entries()) {
        const forkWorld = new World()
        const fork = await forkRun(store, { checkpointId: checkpoint.checkpointId, runId: `fork-${i}` })
        expect(fork.runId).toBe(`fork-${i}`)
        expect(await store.getRun(fork.runId)).toMatchObject({ name: 'researcher', metadata: { forkedFrom: { runId: 'src', checkpointId: checkpoint.checkpointId } } })
        const resumed = await runner.resume(researchAgent(forkWorld).agent, { runId: fork.runId })
        expect(resumed.state, `fork at ${checkpoint.phase} #${i}`).toBe('completed')
        expect(String(resumed.result)).toBe('Done after 3 tool results.')
        // The note ran in the source before every checkpoint from the second post_tool_batch on;
        // in a fork from there it is replayed from the journal, never run again.
        const noteDone = history.slice(0, i + 1).filter((c) => c.phase === 'post_tool_batch').length === 2
        expect(forkWorld.count('note:a and b'), `fork at ${checkpoint.phase} #${i}`).toBe(noteDone ? 0 : 1)
      }
      expect(world.count('note:a and b')).toBe(1)
    })
  }

  it('a fork at a post_tool_batch checkpoint replays the whole batch from the copied journal', async () => {
    const { store } = await sqliteStore()
    const runner = new Runner({ store, durability: 'sync' })
    await runner.run(researchAgent(new World()).agent, { input: 'research', runId: 'src' })
    const history = await runner.history('src')
    const batch = history.filter((c) => c.phase === 'post_tool_batch')[1]!
    const fork = await forkRun(store, { checkpointId: batch.checkpointId, runId: 'after-note' })
    expect(fork.effectsCopied).toBe(3)
    expect((await store.listEffects('after-note')).map((e) => [e.callId, e.status]).sort()).toEqual([
      ['lookup-a', 'succeeded'],
      ['lookup-b', 'succeeded'],
      ['note-1', 'succeeded'],
    ])
    const world = new World()
    const resumed = await runner.resume(researchAgent(world).agent, { runId: 'after-note' })
    expect(resumed.replayedEffectCount).toBe(1)
    expect(world.effects).toEqual([])
  })

  it('refuses a fork point with no runtime snapshot at or before it, naming the nearest one that can be forked', async () => {
    const { store } = await sqliteStore()
    const runner = new Runner({ store, durability: 'sync' })
    await runner.run(researchAgent(new World()).agent, { input: 'research', runId: 'src' })
    const history = await runner.history('src')
    const preLlm = history.find((c) => c.phase === 'pre_llm')!
    // Delete the stored checkpoints before the one whose phase log holds it.
    for (const c of history.slice(0, history.indexOf(preLlm))) if (!c.checkpointId.includes('~')) await store.delete(c.checkpointId)
    const error = await forkRun(store, { checkpointId: preLlm.checkpointId }).catch((err: unknown) => err)
    expect(error).toBeInstanceOf(CheckpointError)
    const nearest = history.find((c, i) => i > history.indexOf(preLlm) && c.payload.runtime !== undefined)!
    expect((error as Error).message).toContain(`the nearest checkpoint that can be forked is ${nearest.checkpointId}`)
  })
})
