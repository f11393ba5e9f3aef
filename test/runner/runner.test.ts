import { hostname } from 'node:os'
import Database from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { Agent, CheckpointNotFoundError, ConfigMismatchError, MemoryStore, Runner, SchemaVersionError, StoreError, tool } from '../../src/index.js'
import { phasesOf } from '../../src/runner/phase-log.js'
import { RUNNER_PHASES } from '../../src/runner/phases.js'
import { ScriptedModel } from '../../src/testing.js'
import { CRASH_LEASE_MS, dyingStore, forever, frozenLeases, leaseLapsed, researchAgent, researchTools, sqliteStore, waitForHang, World } from './helpers.js'
import { waitFor } from '../support/wait.js'

const RUNTIME_FIELDS = [
  'messages', 'step', 'state', 'context', 'llm_calls', 'tool_calls', 'started_at_s', 'usage', 'total_cost_usd', 'session_token',
  'checkpoint_token', 'pending_llm_response', 'tool_executions', 'subagent_executions', 'requested_model', 'normalized_model',
  'provider_adapter', 'final_text', 'final_structured', 'replayed_effect_count',
]

describe('managed runner', () => {
  for (const durability of ['sync', 'async'] as const) {
    it(`(${durability}) every phase is in the history with the documented fields, its time and its writer, and post_llm (and async post_tool_batch) carry the full runtime snapshot`, async () => {
      const { store } = await sqliteStore()
      const world = new World()
      const runner = new Runner({ store, durability })
      const run = await runner.run(researchAgent(world).agent, { input: 'research', runId: 'r35', context: { team: 'ops' } })
      expect(run).toMatchObject({ runId: 'r35', threadId: 'r35', state: 'completed' })
      expect(String(run.result)).toBe('Done after 3 tool results.')
      const history = await runner.history('r35')
      expect(history.map((c) => c.phase)).toEqual([
        'run_started',
        ...['step_started', 'pre_llm', 'post_llm', 'pre_tool_batch', 'post_tool_batch'],
        ...['step_started', 'pre_llm', 'post_llm', 'pre_tool_batch', 'post_tool_batch'],
        ...['step_started', 'pre_llm', 'post_llm'],
        'run_terminal',
      ])
      for (const record of history) {
        expect(Object.keys(record).sort()).toEqual(['checkpointId', 'payload', 'phase', 'runId', 'schemaVersion', 'step', 'threadId', 'timestampMs', 'writer'])
        expect(RUNNER_PHASES).toContain(record.phase)
        expect(record.writer).toBe(`pid ${process.pid} on ${hostname()}`)
      }
      // In the order they happened, each with when it was recorded.
      const times = history.map((c) => c.timestampMs)
      expect(times).toEqual([...times].sort((a, b) => a - b))
      expect(new Set(history.map((c) => c.checkpointId)).size).toBe(history.length)
      // The light phases are not stored rows: 1 run_started, 3 post_llm, 2 post_tool_batch, 1 run_terminal.
      // Async: nor is a snapshot a newer one superseded before either was written; its phase rides
      // in the phase log of the row after it.
      const stored = history.filter((c) => !c.checkpointId.includes('~'))
      const snapshotPhases = ['run_started', 'post_llm', 'post_tool_batch', 'post_llm', 'post_tool_batch', 'post_llm', 'run_terminal']
      if (durability === 'sync') expect(stored.map((c) => c.phase)).toEqual(snapshotPhases)
      else expect(stored.map((c) => c.phase)).toEqual(['run_started', 'post_llm', 'post_llm', 'run_terminal'])
      expect((await store.listCheckpoints({ runId: 'r35' })).length).toBe(stored.length)
      const byPhase = (phase: string) => history.filter((c) => c.phase === phase)
      expect(byPhase('run_started')[0]!.payload).toMatchObject({ agent_name: 'researcher', resumed: false })
      // The first commit holds the input, so the run is resumable before the model answers.
      expect((byPhase('run_started')[0]!.payload.runtime as { messages: unknown[] }).messages).toHaveLength(1)
      expect(byPhase('pre_llm')[0]!.payload).toMatchObject({ model: 'scripted', message_count: 1 })
      expect(byPhase('post_llm')[0]!.payload).toMatchObject({ finish_reason: 'tool_use', tool_call_count: 2, session_token: null })
      expect(byPhase('pre_tool_batch')[0]!.payload).toEqual({ tool_call_count: 2 })
      expect(byPhase('post_tool_batch')[1]!.payload).toMatchObject({ tool_calls_total: 3, tool_failures: 0 })
      expect(byPhase('run_terminal')[0]!.payload).toMatchObject({ state: 'completed', final_text: 'Done after 3 tool results.', requested_model: 'scripted' })
      for (const phase of ['post_tool_batch', 'post_llm']) {
        for (const record of byPhase(phase)) {
          const runtime = record.payload.runtime as Record<string, unknown> | null | undefined
          if (runtime === null || runtime === undefined) continue // coalesced by the async writer, or a sync batch (see below)
          for (const field of RUNTIME_FIELDS) expect(runtime, `${phase}.${field}`).toHaveProperty(field)
          expect(runtime.context).toEqual({ team: 'ops' })
        }
      }
      // A step's start is a light phase: no snapshot. Sync: nor has a batch's end; the commit at
      // the next step's start makes the batch's outcomes durable beside the model response's
      // snapshot, which a resume replays them onto.
      expect(byPhase('step_started').map((c) => c.payload.runtime)).toEqual([undefined, undefined, undefined])
      if (durability === 'sync') expect(byPhase('post_tool_batch').map((c) => c.payload.runtime)).toEqual([undefined, undefined])
      const lastPostLlm = byPhase('post_llm').at(-1)!.payload.runtime as Record<string, unknown>
      expect(lastPostLlm).toMatchObject({ llm_calls: 3, tool_calls: 3, pending_llm_response: null })
      expect(world.effects.sort()).toEqual(['lookup:a', 'lookup:b', 'note:a and b'])
    })
  }

  it('sync durability costs at most two durable commits per cycle of idempotent tools (plus the input and the end)', async () => {
    const { store } = await sqliteStore()
    const lookup = researchTools(new World())[0]!
    const turns = Array.from({ length: 5 }, (_, i) => [{ toolUse: { toolUseId: `l${i}`, name: 'lookup', input: { key: `k${i}` } } }])
    const agent = new Agent({ model: new ScriptedModel([...turns, [{ text: 'done' }]]), tools: [lookup] })
    const run = await new Runner({ store, durability: 'sync' }).run(agent, { input: 'go', runId: 'commits' })
    expect(run.commits).toBeLessThanOrEqual(2 * 5 + 2)
    expect(run.commits).toBe(12)
  })

  for (const durability of ['sync', 'async'] as const) {
    it(`stores a run of many cycles in linear space (${durability}): each message is written about once`, async () => {
      const { store, path } = await sqliteStore()
      const lookup = researchTools(new World())[0]!
      const turn = (request: { messages: { content: object[] }[] }) => {
        const results = request.messages.flatMap((m) => m.content.filter((b) => 'toolResult' in b)).length
        return results < 40 ? [{ text: `thinking ${results} `.padEnd(1000, '.') }, { toolUse: { toolUseId: `l${results}`, name: 'lookup', input: { key: `k${results}` } } }] : [{ text: 'done' }]
      }
      const agent = new Agent({ model: new ScriptedModel(Array.from({ length: 41 }, () => turn)), tools: [lookup] })
      await new Runner({ store, durability }).run(agent, { input: 'go', runId: 'linear' })
      await store.close()
      const finalBytes = JSON.stringify(agent.messages).length
      const db = new Database(path, { readonly: true })
      const stored = db.prepare('SELECT sum(length(item)) AS bytes FROM list_items').get() as { bytes: number }
      db.close()
      expect(stored.bytes).toBeLessThan(3 * finalBytes)
    })
  }

  it('resume needs a valid run id and a checkpoint', async () => {
    const { store } = await sqliteStore()
    const runner = new Runner({ store })
    await expect(runner.resume(researchAgent(new World()).agent, { runId: '../x' })).rejects.toMatchObject({ code: 'invalid_argument' })
    await expect(runner.resume(researchAgent(new World()).agent, { runId: 'never-ran' })).rejects.toBeInstanceOf(CheckpointNotFoundError)
    await expect(runner.resume(researchAgent(new World()).agent, { runId: 'never-ran' })).rejects.toMatchObject({ code: 'run_not_found', runId: 'never-ran' })
  })

  it('a malformed or too-new latest checkpoint is refused with no partial recovery', async () => {
    const { store } = await sqliteStore()
    const runner = new Runner({ store })
    await store.save({ runId: 'odd', kind: 'workflow', phase: 'superstep', payload: {} })
    await expect(runner.resume(researchAgent(new World()).agent, { runId: 'odd' })).rejects.toThrow(/not a runner checkpoint/)
    await store.save({ runId: 'bad', kind: 'runner', phase: 'post_llm', metadata: { snapshot: true }, payload: { runtime: { messages: 'nope' } } })
    await expect(runner.resume(researchAgent(new World()).agent, { runId: 'bad' })).rejects.toThrow(/malformed runtime snapshot/)
    await store.save({ runId: 'future', kind: 'runner', phase: 'run_started', schemaVersion: 9, payload: {} })
    await expect(runner.resume(researchAgent(new World()).agent, { runId: 'future' })).rejects.toBeInstanceOf(SchemaVersionError)
  })

  it('a finished run returns its stored result without running anything', async () => {
    const { store, reopen } = await sqliteStore()
    const world = new World()
    await new Runner({ store }).run(researchAgent(world).agent, { input: 'research', runId: 'done' })
    const fresh = researchAgent(world)
    const again = await new Runner({ store: reopen() }).resume(fresh.agent, { runId: 'done' })
    expect(again).toMatchObject({ state: 'completed', fromTerminalCheckpoint: true, llmCalls: 0 })
    expect(String(again.result)).toBe('Done after 3 tool results.')
    expect(fresh.model.calls).toHaveLength(0)
    expect(world.effects).toHaveLength(3)
  })

  it('a crash after the model answered resumes at its tool calls without calling the model again', async () => {
    const { store, reopen } = await sqliteStore()
    const world = new World()
    // The first commit holds step_started, pre_llm, post_llm, pre_tool_batch and the intents; the
    // lookups then hang: the process "dies" with the model's answer checkpointed and no outcome.
    const first = researchAgent(world, { onLookup: () => forever() })
    void new Runner({ store: frozenLeases(store), leaseMs: CRASH_LEASE_MS, durability: 'sync' }).run(first.agent, { input: 'research', runId: 'skip-llm' })
    await waitFor(() => world.effects.length === 2)
    await waitForHang(store, 'skip-llm', ['lookup-a', 'lookup-b'])
    await leaseLapsed(store, 'skip-llm')
    expect(first.model.calls).toHaveLength(1)
    const fresh = researchAgent(world)
    const resumed = await new Runner({ store: reopen(), durability: 'sync' }).resume(fresh.agent, { runId: 'skip-llm', context: { extra: 1 } })
    expect(resumed.state).toBe('completed')
    expect(fresh.model.calls).toHaveLength(2) // cycles 1 and 2: cycle 0's answer came from the checkpoint
    // The lookups are idempotent and had no outcome: re-run with the same keys; the note once.
    expect(world.effects.sort()).toEqual(['lookup:a', 'lookup:a', 'lookup:b', 'lookup:b', 'note:a and b'])
    const history = await new Runner({ store: reopen() }).history('skip-llm')
    const restarted = history.filter((c) => c.phase === 'run_started')
    expect(restarted.map((c) => c.payload.resumed)).toEqual([false, true])
    expect(history.filter((c) => c.phase === 'run_terminal')).toHaveLength(1)
  })

  it('sync: a crash in the model call after a tool batch resumes from the model response before it and replays the batch, running no tool again', async () => {
    const { store, reopen } = await sqliteStore()
    const world = new World()
    // The second model call hangs: the step's start has committed the lookups' outcomes, with no
    // snapshot of its own, and the process "dies" there.
    const first = researchAgent(world)
    const scripted = first.model
    let calls = 0
    const hanging = Object.assign(Object.create(Object.getPrototypeOf(scripted) as object) as typeof scripted, scripted, {
      stream: (request: Parameters<typeof scripted.stream>[0]) => {
        calls++
        if (calls === 2) return { [Symbol.asyncIterator]: () => ({ next: () => forever() }) } as unknown as ReturnType<typeof scripted.stream>
        return scripted.stream(request)
      },
    })
    const agent = new Agent({ name: 'researcher', model: hanging, tools: researchTools(world), systemPrompt: 'Research.' })
    void new Runner({ store: frozenLeases(store), leaseMs: CRASH_LEASE_MS, durability: 'sync' }).run(agent, { input: 'research', runId: 'sync-replay' })
    await waitFor(() => calls === 2)
    await leaseLapsed(store, 'sync-replay')
    expect(world.effects.sort()).toEqual(['lookup:a', 'lookup:b'])

    const fresh = researchAgent(world)
    const resumed = await new Runner({ store: reopen(), durability: 'sync' }).resume(fresh.agent, { runId: 'sync-replay' })
    expect(resumed.state).toBe('completed')
    expect(String(resumed.result)).toBe('Done after 3 tool results.')
    // The lookups came from the journal; the model was asked for cycles 1 and 2 only.
    expect(world.effects.sort()).toEqual(['lookup:a', 'lookup:b', 'note:a and b'])
    expect(fresh.model.calls).toHaveLength(2)
    expect(resumed.replayedEffectCount).toBe(2)
  })

  it('an undecodable pending model response is a corruption error, never a fresh model call', async () => {
    const { store } = await sqliteStore()
    const world = new World()
    await new Runner({ store }).run(researchAgent(world).agent, { input: 'research', runId: 'ok' })
    const latestSnapshot = (await store.listCheckpoints({ runId: 'ok' })).find((c) => c.phase === 'post_llm')!
    const record = await store.load<{ runtime: Record<string, unknown> }>(latestSnapshot.id)
    await store.save({
      runId: 'broken-pending',
      kind: 'runner',
      phase: 'post_llm',
      metadata: { snapshot: true, step: 0 },
      payload: { runtime: { ...record.payload.runtime, next: 'tools', pending_llm_response: { role: 'assistant', content: 'garbled' } } },
    })
    const fresh = researchAgent(world)
    await expect(new Runner({ store }).resume(fresh.agent, { runId: 'broken-pending' })).rejects.toThrow(/pending model response that cannot be decoded/)
    expect(fresh.model.calls).toHaveLength(0)
  })

  it('completed calls are replayed from the journal; a crash mid-batch re-runs only the unfinished call', async () => {
    const { store, reopen } = await sqliteStore()
    const world = new World()
    const first = researchAgent(world, { onLookup: async (key) => (key === 'b' ? forever() : undefined) })
    void new Runner({ store: frozenLeases(store), leaseMs: CRASH_LEASE_MS, durability: 'sync' }).run(first.agent, { input: 'research', runId: 'mid-batch' })
    await waitFor(() => world.effects.length === 2)
    await leaseLapsed(store, 'mid-batch')
    // lookup:a finished (its outcome waits for the batch commit: idempotent), lookup:b hangs: the process "dies".
    const fresh = researchAgent(world)
    const resumed = await new Runner({ store: reopen(), durability: 'sync' }).resume(fresh.agent, { runId: 'mid-batch' })
    expect(resumed.state).toBe('completed')
    expect(world.count('lookup:b')).toBe(2) // idempotent: re-run with the same key
    expect(world.count('note:a and b')).toBe(1)
    const keys = (await reopen().listEffects('mid-batch')).map((e) => e.idempotencyKey)
    expect(keys).toEqual(['mid-batch:lookup-a', 'mid-batch:lookup-b', 'mid-batch:note-1'])
  })

  it('a journaled outcome is replayed and counted, and an input mismatch is corruption', async () => {
    const { store } = await sqliteStore()
    const world = new World()
    const first = researchAgent(world, { onNote: () => forever() })
    void new Runner({ store: frozenLeases(store), leaseMs: CRASH_LEASE_MS, durability: 'sync' }).run(first.agent, { input: 'research', runId: 'replay' })
    await waitFor(() => world.count('note:a and b') === 1)
    await waitForHang(store, 'replay', ['note-1'])
    await leaseLapsed(store, 'replay')
    // The note started and hangs: complete it by hand as if its outcome had been written before the crash.
    await store.completeEffect({ runId: 'replay', callId: 'note-1', status: 'succeeded', output: { toolUseId: 'note-1', status: 'success', content: [{ text: 'saved' }] } })
    const fresh = researchAgent(world)
    const resumed = await new Runner({ store, durability: 'sync' }).resume(fresh.agent, { runId: 'replay' })
    expect(resumed).toMatchObject({ state: 'completed', replayedEffectCount: 1 })
    expect(world.count('note:a and b')).toBe(1)

  })

  it('a journaled input that differs from the checkpoint is a corruption error', async () => {
    const { store, reopen } = await sqliteStore()
    await store.recordEffectIntent({ runId: 'mismatch', callId: 'lookup-a', name: 'lookup', inputHash: 'not-the-real-hash', idempotencyKey: 'k' })
    const world = new World()
    // The intent's commit created the run (with no checkpoint): the runner adopts it in one more write.
    void new Runner({ store: dyingStore(store, 3), leaseMs: CRASH_LEASE_MS, durability: 'sync' }).run(researchAgent(world).agent, { input: 'x', runId: 'mismatch' })
    await waitFor(() => world.effects.length === 2)
    await waitForHang(store, 'mismatch', ['lookup-a', 'lookup-b'])
    await leaseLapsed(store, 'mismatch')
    const before = world.effects.length
    await expect(new Runner({ store: reopen() }).resume(researchAgent(world).agent, { runId: 'mismatch' })).rejects.toThrow(/journaled with other input/)
    expect(world.effects).toHaveLength(before)
  })

  it('an unknown outcome of a non-idempotent call is surfaced, never silently re-run; retry and skip are honoured', async () => {
    for (const answer of ['retry', 'skip'] as const) {
      const { store, reopen } = await sqliteStore()
      const world = new World()
      void new Runner({ store: frozenLeases(store), leaseMs: CRASH_LEASE_MS, durability: 'async' }).run(researchAgent(world, { onNote: () => forever() }).agent, { input: 'r', runId: `unknown-${answer}` })
      await waitFor(() => world.count('note:a and b') === 1)
      await waitForHang(store, `unknown-${answer}`, ['note-1'])
      await leaseLapsed(store, `unknown-${answer}`)
      const runner = new Runner({ store: reopen() })
      const paused = await runner.resume(researchAgent(world).agent, { runId: `unknown-${answer}` })
      expect(paused.state).toBe('paused')
      expect(paused.interrupts).toMatchObject([{ id: 'note-1:effect_outcome_unknown', name: 'effect_outcome_unknown' }])
      expect(world.count('note:a and b')).toBe(1)
      expect((await reopen().getRun(`unknown-${answer}`))?.status).toBe('paused')
      const done = await new Runner({ store: reopen() }).resume(researchAgent(world).agent, {
        runId: `unknown-${answer}`,
        responses: { 'note-1:effect_outcome_unknown': answer },
      })
      expect(done.state).toBe('completed')
      expect(world.count('note:a and b')).toBe(answer === 'retry' ? 2 : 1)
    }
  })

  it('a failed write is surfaced and fails the run; the final flush is bounded', async () => {
    const { store } = await sqliteStore()
    const failing = new Proxy(store, {
      get(target, property) {
        if (property === 'write') return async () => Promise.reject(new Error('disk full'))
        const value = Reflect.get(target, property) as unknown
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
      },
    })
    await expect(new Runner({ store: failing }).run(researchAgent(new World()).agent, { input: 'x', runId: 'fails' })).rejects.toThrow(/disk full/)
    const slow = new Proxy(store, {
      get(target, property) {
        if (property === 'write') return () => forever()
        const value = Reflect.get(target, property) as unknown
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
      },
    })
    const agent = new Agent({ model: new ScriptedModel([[{ text: 'hi' }]]) })
    await expect(new Runner({ store: slow, flushTimeoutMs: 50 }).run(agent, { input: 'x', runId: 'slow' })).rejects.toThrow(/could not be flushed within 50 ms/)
  })

  it('async writes coalesce superseded runtime snapshots but keep every phase record', async () => {
    const { store } = await sqliteStore()
    const world = new World()
    const runner = new Runner({ store, durability: 'async' })
    await runner.run(researchAgent(world).agent, { input: 'research', runId: 'coalesce' })
    const history = await runner.history('coalesce')
    expect(history).toHaveLength(15)
    const seqs = (await store.listCheckpoints({ runId: 'coalesce' })).map((c) => c.seq)
    expect(seqs).toEqual([...seqs].sort((a, b) => b - a))
  })

  it('async writes behind a loop that never waits on I/O batch more when each write holds the loop up longer', async () => {
    // A store whose every write blocks the thread for 20 ms, as a synced commit does.
    const store = new MemoryStore()
    const sizes: number[] = []
    const write = store.write.bind(store)
    store.write = (batch) => {
      sizes.push((batch.checkpoints ?? []).reduce((n, record) => n + phasesOf(record, '').length, 0))
      const until = performance.now() + 20
      while (performance.now() < until);
      return write(batch)
    }
    const echo = tool({ name: 'echo', description: 'echo', inputSchema: z.object({ i: z.number() }), idempotent: true, callback: ({ i }) => `echo ${i}` })
    const turns = Array.from({ length: 100 }, (_, i) => [{ toolUse: { toolUseId: `t${i}`, name: 'echo', input: { i } } }])
    const result = await new Runner({ store, durability: 'async' }).run(new Agent({ model: new ScriptedModel([...turns, [{ text: 'done' }]]), tools: [echo] }), { input: 'go', runId: 'slow-writes' })
    expect(result.state).toBe('completed')
    // 505 phases (the light ones and the superseded snapshots ride in phase logs): a write every
    // 32 staged checkpoints would be 7 writes; the loop runs 80 ms between two writes of 20 ms
    // instead, and every phase is written.
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(505)
    expect(sizes.length).toBeLessThan(7)
    expect(await new Runner({ store }).history('slow-writes')).toHaveLength(505)
  })

  it('async writes that coalesce many steps in one write keep a runtime snapshot every 32 staged, so a reader of any step finds one near it', async () => {
    // A store whose every write blocks the thread for 20 ms: writes hold many steps each.
    const store = new MemoryStore()
    const sizes: number[] = []
    const write = store.write.bind(store)
    store.write = (batch) => {
      // The snapshots staged in this write: each post_llm and post_tool_batch, stored or superseded.
      sizes.push((batch.checkpoints ?? []).flatMap((record) => phasesOf(record, '')).filter((phase) => phase.phase === 'post_llm' || phase.phase === 'post_tool_batch').length)
      const until = performance.now() + 20
      while (performance.now() < until);
      return write(batch)
    }
    const echo = tool({ name: 'echo', description: 'echo', inputSchema: z.object({ i: z.number() }), idempotent: true, callback: ({ i }) => `echo ${i}` })
    const turns = Array.from({ length: 300 }, (_, i) => [{ toolUse: { toolUseId: `t${i}`, name: 'echo', input: { i } } }])
    const result = await new Runner({ store, durability: 'async' }).run(new Agent({ model: new ScriptedModel([...turns, [{ text: 'done' }]]), tools: [echo] }), { input: 'go', runId: 'coalesced-steps' })
    expect(result.state).toBe('completed')
    // Writes of more than 64 checkpoints: coalescing alone would keep one snapshot in each.
    expect(Math.max(...sizes)).toBeGreaterThan(64)
    const headers = (await store.listCheckpoints({ runId: 'coalesced-steps' })).reverse()
    const steps = headers.filter((info) => info.metadata.snapshot === true).map((info) => info.metadata.step as number)
    // Two snapshots a step (the model's response, the tool batch's end): 32 staged span 16 steps.
    const gaps = steps.slice(1).map((step, k) => step - steps[k]!)
    expect(Math.max(...gaps)).toBeLessThanOrEqual(16)
    // A superseded snapshot is no row of its own: its phase, with its payload but no runtime, is
    // in the history from the phase log of the row after it.
    const history = await new Runner({ store }).history('coalesced-steps')
    const superseded = history.filter((c) => c.phase === 'post_llm' && c.checkpointId.includes('~'))
    expect(superseded.length).toBeGreaterThan(200)
    for (const entry of superseded) expect(entry.payload).toMatchObject({ finish_reason: 'tool_use', tool_call_count: 1 })
    for (const entry of superseded) expect(entry.payload).not.toHaveProperty('runtime')
    expect(headers.length).toBeLessThan(history.length / 10)
    // Every snapshot kept holds the runtime; resuming reads the newest.
    for (const info of headers.filter((h) => h.metadata.snapshot === true)) expect((await store.load<{ runtime: unknown }>(info.id)).payload.runtime).toBeTruthy()
  })

  it('provider tokens are stored and passed back on resume', async () => {
    const { store, reopen } = await sqliteStore()
    const first = new StatefulModel()
    void new Runner({ store: frozenLeases(store), leaseMs: CRASH_LEASE_MS, durability: 'sync' }).run(new Agent({ model: first, tools: [waitTool(true)] }), { input: 'x', runId: 'tokens' })
    await waitFor(() => first.requests.length === 1)
    await waitForHang(store, 'tokens', ['w'])
    await leaseLapsed(store, 'tokens')
    const second = new StatefulModel(1)
    const resumed = await new Runner({ store: reopen() }).resume(new Agent({ model: second, tools: [waitTool(false)] }), { runId: 'tokens' })
    expect(resumed.state).toBe('completed')
    expect(second.requests).toEqual([{ sessionToken: 's1' }])
    const terminal = (await new Runner({ store: reopen() }).history('tokens')).filter((c) => c.phase === 'post_llm').at(-1)!
    expect(terminal.payload.session_token).toBe('s2')
  })

  it('an interrupt pauses the run with its state; a fresh process answers it hours later', async () => {
    const { store, reopen } = await sqliteStore()
    const approve = tool({
      name: 'approve',
      description: 'Ask a human.',
      inputSchema: { type: 'object' },
      callback: (_input, ctx) => `approved: ${ctx.interrupt<string>({ name: 'approval', reason: 'pay $40?' })}`,
    })
    // The script is decided from the conversation, so a fresh process continues it.
    const turn = (request: { messages: { content: object[] }[] }) =>
      request.messages.some((m) => m.content.some((b) => 'toolResult' in b)) ? [{ text: 'paid' }] : [{ toolUse: { toolUseId: 'p', name: 'approve', input: {} } }]
    const build = () => new Agent({ model: new ScriptedModel([turn, turn]), tools: [approve] })
    const paused = await new Runner({ store }).run(build(), { input: 'pay', runId: 'hitl' })
    expect(paused).toMatchObject({ state: 'paused', interrupts: [{ id: 'p:approval', reason: 'pay $40?' }] })
    expect((await store.getRun('hitl'))?.status).toBe('paused')
    const again = await new Runner({ store: reopen() }).resume(build(), { runId: 'hitl' })
    expect(again.state).toBe('paused')
    await expect(new Runner({ store: reopen() }).resume(build(), { runId: 'hitl', responses: { nope: 1 } })).rejects.toThrow(/no pending interrupt nope/)
    const fresh = build()
    const done = await new Runner({ store: reopen() }).resume(fresh, { runId: 'hitl', responses: { 'p:approval': 'yes' } })
    expect(done.state).toBe('completed')
    expect(String(done.result)).toBe('paid')
    const transcript = fresh.messages.flatMap((m) => m.content.flatMap((b) => ('toolResult' in b ? [JSON.stringify(b.toolResult.content)] : [])))
    expect(transcript).toEqual(['[{"text":"approved: yes"}]'])
  })

  it('a run that failed with an exception is told apart from one whose process died', async () => {
    const { store, reopen } = await sqliteStore()
    const boom = { modelId: 'boom', async *stream() { yield* []; throw new Error('provider exploded') } }
    const failed = await new Runner({ store }).run(new Agent({ model: boom }), { input: 'x', runId: 'failed' })
    expect(failed).toMatchObject({ state: 'failed', error: { message: 'provider exploded' } })
    expect((await store.getRun('failed'))?.status).toBe('failed')
    const stored = await new Runner({ store: reopen() }).resume(new Agent({ model: boom }), { runId: 'failed' })
    expect(stored).toMatchObject({ state: 'failed', fromTerminalCheckpoint: true, error: { message: 'provider exploded' } })
    const world = new World()
    void new Runner({ store: dyingStore(store, 2), leaseMs: CRASH_LEASE_MS, durability: 'sync' }).run(researchAgent(world).agent, { input: 'x', runId: 'died' })
    await waitFor(() => world.effects.length > 0)
    await leaseLapsed(store, 'died')
    expect((await reopen().getRun('died'))?.status).toBe('running')
  })

  it('a store outage in the middle of a run is thrown, not recorded as the run failing: the run stays resumable', async () => {
    const { store, reopen } = await sqliteStore()
    const world = new World()
    // The journal's "started" mark before the non-idempotent note fails as a dropped connection
    // would (not a checkpoint write: the writer's own failures already stop the run); the store
    // works again right after.
    let marks = 0
    const flaky = new Proxy(store, {
      get(target, property) {
        const value = Reflect.get(target, property) as unknown
        if (property === 'write') {
          return async (...args: unknown[]) => {
            if ((args[0] as { starts?: unknown[] }).starts?.length && ++marks === 1) throw new StoreError('failed to mark effect note-1 started (run outage): Connection terminated unexpectedly')
            return (value as (...a: unknown[]) => unknown).apply(target, args)
          }
        }
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
      },
    })
    await expect(new Runner({ store: flaky, durability: 'sync' }).run(researchAgent(world).agent, { input: 'x', runId: 'outage' })).rejects.toThrow(/Connection terminated/)
    expect((await store.getRun('outage'))?.status).toBe('running')
    expect((await store.getLatest({ runId: 'outage' }))?.phase).not.toBe('run_terminal')
    const resumed = await new Runner({ store: reopen() }).resume(researchAgent(world).agent, { runId: 'outage' })
    expect(resumed.state).toBe('completed')
    expect((await reopen().getRun('outage'))?.status).toBe('completed')
  })

  it('resuming with a different agent configuration is refused', async () => {
    const { store } = await sqliteStore()
    const world = new World()
    void new Runner({ store: frozenLeases(store), leaseMs: CRASH_LEASE_MS, durability: 'sync' }).run(researchAgent(world, { onNote: () => forever() }).agent, { input: 'x', runId: 'config' })
    await waitFor(() => world.count('note:a and b') === 1)
    await leaseLapsed(store, 'config')
    const other = new Agent({ model: new ScriptedModel([]), systemPrompt: 'Something else.' })
    await expect(new Runner({ store }).resume(other, { runId: 'config' })).rejects.toBeInstanceOf(ConfigMismatchError)
  })
})

/** A model that returns a session token each call and records the tokens it is given. */
class StatefulModel {
  readonly modelId = 'stateful'
  readonly requests: unknown[] = []
  constructor(private calls = 0) {}
  async *stream(request: { providerTokens?: unknown }) {
    this.requests.push(request.providerTokens)
    this.calls++
    yield { type: 'messageStart' as const }
    yield { type: 'providerTokens' as const, tokens: { sessionToken: `s${this.calls}` } }
    if (this.calls === 1) {
      yield { type: 'toolUseStart' as const, toolUseId: 'w', name: 'wait' }
      yield { type: 'messageStop' as const, stopReason: 'tool_use' }
    } else {
      yield { type: 'textDelta' as const, text: 'ok' }
      yield { type: 'messageStop' as const, stopReason: 'end_turn' }
    }
  }
}

function waitTool(hang: boolean) {
  return tool({ name: 'wait', description: 'Wait.', idempotent: true, inputSchema: { type: 'object' }, callback: () => (hang ? forever() : 'waited') })
}

