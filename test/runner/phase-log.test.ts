import { hostname } from 'node:os'
import Database from 'better-sqlite3'
import { describe, expect, it, vi } from 'vitest'
import { z } from 'zod'
import { Agent, CheckpointCorruptionError, CheckpointNotFoundError, forkRun, MemoryStore, Runner, tool } from '../../src/index.js'
import { loadPhase } from '../../src/engine.js'
import { ScriptedModel } from '../../src/testing.js'
import { CRASH_LEASE_MS, forever, frozenLeases, leaseLapsed, researchAgent, sqliteStore, waitForHang, World } from './helpers.js'
import { waitFor } from '../support/wait.js'

/** An agent of `n` tool cycles (a model call asking for one lookup, then the lookup) and a closing answer. */
function cyclesAgent(n: number, idempotent: boolean): Agent {
  const lookup = tool({ name: 'lookup', description: 'look up', inputSchema: z.object({ i: z.number() }), idempotent, callback: ({ i }) => `fact ${i}` })
  const turn = (request: { messages: { content: object[] }[] }) => {
    const done = request.messages.flatMap((m) => m.content.filter((b) => 'toolResult' in b)).length
    return done < n ? [{ text: `step ${done}` }, { toolUse: { toolUseId: `t${done}`, name: 'lookup', input: { i: done } } }] : [{ text: 'done' }]
  }
  return new Agent({ model: new ScriptedModel(Array.from({ length: n + 1 }, () => turn)), tools: [lookup] })
}

function rowsInFile(path: string, runId: string): number {
  const db = new Database(path, { readonly: true })
  try {
    return db.prepare('SELECT count(*) FROM checkpoints WHERE run_id = ?').pluck().get(runId) as number
  } finally {
    db.close()
  }
}

describe('the phase log', () => {
  for (const durability of ['async', 'sync'] as const) {
    for (const idempotent of [true, false]) {
      it(`(${durability}, ${idempotent ? 'idempotent' : 'non-idempotent'} tools) stores ${durability === 'sync' ? 'one checkpoint row per step plus two per run' : 'fewer rows than steps'} in the SQLite file, and the history still shows all five phases of each cycle`, async () => {
        const { store, path } = await sqliteStore()
        const runner = new Runner({ store, durability })
        const n = 30
        const run = await runner.run(cyclesAgent(n, idempotent), { input: 'go', runId: 'rows' })
        expect(run.state).toBe('completed')
        const history = await runner.history('rows')
        await store.close()
        const steps = 2 * n + 1
        // Sync: run_started, n × (post_llm, post_tool_batch), the last post_llm, run_terminal.
        // Async: a snapshot superseded before it was written rides in the phase log of the row
        // after it. Tools not idempotent commit their intents first, and with them the model
        // response; the batch's end then rides with the next one.
        const rows = rowsInFile(path, 'rows')
        if (durability === 'sync') expect(rows).toBe(steps + 2)
        else expect(rows).toBeLessThanOrEqual(idempotent ? steps / 4 : n + 3)
        // Before the phase log: 5 per cycle, 3 for the last step, run_started and run_terminal.
        expect(history).toHaveLength(5 * n + 5)
        expect(history.slice(1, 6).map((c) => c.phase)).toEqual(['step_started', 'pre_llm', 'post_llm', 'pre_tool_batch', 'post_tool_batch'])
      })
    }
  }

  it('every phase of the history has its own id, its light payload, its time and the process that recorded it, and loadPhase reads each', async () => {
    const { store } = await sqliteStore()
    const runner = new Runner({ store })
    await runner.run(researchAgent(new World()).agent, { input: 'research', runId: 'audit' })
    const history = await runner.history('audit')
    const light = history.filter((c) => c.checkpointId.includes('~'))
    // The light phases, and (async) the snapshots superseded before they were written.
    const lightPhases = ['step_started', 'pre_llm', 'pre_tool_batch', 'step_started', 'pre_llm', 'pre_tool_batch', 'step_started', 'pre_llm']
    expect(light.map((c) => c.phase).filter((phase) => lightPhases.includes(phase))).toEqual(lightPhases)
    const superseded = light.filter((c) => !lightPhases.includes(c.phase))
    expect(superseded.length).toBeGreaterThan(0)
    for (const entry of superseded) expect(['post_llm', 'post_tool_batch']).toContain(entry.phase)
    for (const entry of superseded) expect(entry.payload).not.toHaveProperty('runtime')
    for (const [i, entry] of history.entries()) {
      expect(entry.writer).toBe(`pid ${process.pid} on ${hostname()}`)
      if (i > 0) expect(entry.timestampMs).toBeGreaterThanOrEqual(history[i - 1]!.timestampMs)
      const loaded = await loadPhase<Record<string, unknown>>(store, entry.checkpointId)
      expect({ id: loaded.id, phase: loaded.phase, payload: loaded.payload, at: loaded.createdAt }).toEqual({ id: entry.checkpointId, phase: entry.phase, payload: entry.payload, at: entry.timestampMs })
    }
    expect(light.find((c) => c.phase === 'pre_llm')!.payload).toEqual({ model: 'scripted', provider: 'ScriptedModel', message_count: 1 })
    const stored = history.find((c) => !c.checkpointId.includes('~'))!.checkpointId
    await expect(loadPhase(store, `${stored}~99`)).rejects.toBeInstanceOf(CheckpointNotFoundError)
  })

  it('a write-ahead commit before tools that are not idempotent makes pre_tool_batch durable with the model response, before any tool runs', async () => {
    const { store } = await sqliteStore()
    const world = new World()
    // The note tool is not idempotent: its intent is committed before it runs, and it hangs.
    void new Runner({ store: frozenLeases(store), leaseMs: CRASH_LEASE_MS }).run(researchAgent(world, { onNote: () => forever() }).agent, { input: 'x', runId: 'ahead' })
    await waitFor(() => world.count('note:a and b') === 1)
    await waitForHang(store, 'ahead', ['note-1'])
    const latest = (await store.getLatest({ runId: 'ahead' }))!
    expect(latest.phase).toBe('post_llm')
    expect((latest.metadata.phaseLog as { after: { phase: string }[] }).after.map((e) => e.phase)).toEqual(['pre_tool_batch'])
    // The resume continues from that snapshot exactly as before: the note's outcome is unknown.
    await leaseLapsed(store, 'ahead')
    const resumed = await new Runner({ store }).resume(researchAgent(world).agent, { runId: 'ahead' })
    expect(resumed.state).toBe('paused')
    expect(resumed.interrupts.map((i) => i.name)).toEqual(['effect_outcome_unknown'])
    const history = await new Runner({ store }).history('ahead')
    const tail = history.slice(history.findIndex((c) => c.checkpointId === latest.id))
    expect(tail.map((c) => c.phase)).toEqual(['post_llm', 'pre_tool_batch', 'run_started', 'pre_tool_batch', 'run_paused'])
  })

  it('a fork from a light phase resumes from the newest runtime snapshot at or before it', async () => {
    const store = new MemoryStore()
    const runner = new Runner({ store, durability: 'sync' })
    await runner.run(researchAgent(new World()).agent, { input: 'research', runId: 'src' })
    const history = await runner.history('src')
    // The second step's pre_llm rides with its post_llm, but the fork starts from the snapshot
    // before it: the first model response's (sync), whose batch the fork replays from the journal.
    const preLlm = history.filter((c) => c.phase === 'pre_llm')[1]!
    const fork = await forkRun(store, { checkpointId: preLlm.checkpointId, runId: 'forked' })
    const snapshot = history.slice(0, history.indexOf(preLlm)).findLast((c) => c.payload.runtime)!
    expect(fork.snapshotFrom).toBe(snapshot.checkpointId)
    expect(fork.checkpoint.phase).toBe('pre_llm')
    const world = new World()
    const again = await runner.resume(researchAgent(world).agent, { runId: 'forked' })
    expect(String(again.result)).toBe('Done after 3 tool results.')
    expect(snapshot.phase).toBe('post_llm')
    expect(again).toMatchObject({ llmCalls: 2, replayedEffectCount: 2 })
  })

  it('a fork point written in the millisecond a later call completed: the fork replays the closed batch and runs the later call itself', async () => {
    // Every time the same millisecond: the order of the fork point and the calls is in the phase
    // chain, not in the clock (a fast machine writes a step's pre_llm, its model response and its
    // tool's outcome within one millisecond).
    const now = vi.spyOn(Date, 'now').mockReturnValue(Date.now())
    try {
      const store = new MemoryStore()
      const runner = new Runner({ store, durability: 'sync' })
      await runner.run(researchAgent(new World()).agent, { input: 'research', runId: 'src' })
      const preLlm = (await runner.history('src')).filter((c) => c.phase === 'pre_llm')[1]!
      const fork = await forkRun(store, { checkpointId: preLlm.checkpointId, runId: 'forked' })
      expect(fork.effectsCopied).toBe(2)
      const world = new World()
      const again = await runner.resume(researchAgent(world).agent, { runId: 'forked' })
      expect(again).toMatchObject({ llmCalls: 2, replayedEffectCount: 2 })
      expect(world.effects).toHaveLength(1)
    } finally {
      now.mockRestore()
    }
  })

  it('a phase log entry without its fields is a CheckpointCorruptionError naming the checkpoint', async () => {
    const store = new MemoryStore()
    const id = await store.save({ runId: 'bad', kind: 'runner', phase: 'post_llm', metadata: { step: 0, snapshot: false, phaseLog: { before: [{ phase: 'pre_llm' }] } }, payload: {} })
    const runner = new Runner({ store })
    await expect(runner.history('bad')).rejects.toBeInstanceOf(CheckpointCorruptionError)
    await expect(runner.history('bad')).rejects.toMatchObject({ checkpointId: id, runId: 'bad' })
  })
})
