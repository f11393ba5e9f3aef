import { spawnSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { Agent, Runner, tool } from '../../src/index.js'
import { ScriptedModel } from '../../src/testing.js'
import { CRASH_LEASE_MS, forever, frozenLeases, leaseLapsed, researchAgent, sqliteStore, waitForHang, World } from './helpers.js'
import { waitFor } from '../support/wait.js'
import { Annotation, START, StateGraph } from '@langchain/langgraph'
import { CairnSaver } from '../../src/langgraph.js'

/** A run whose tool hangs forever and whose lease has lapsed, as if its process had died mid-tool. */
async function hungRun(runId: string) {
  const { store } = await sqliteStore()
  const world = new World()
  void new Runner({ store: frozenLeases(store), leaseMs: CRASH_LEASE_MS, durability: 'sync' }).run(researchAgent(world, { onNote: () => forever() }).agent, { input: 'x', runId })
  await waitFor(() => world.count('note:a and b') === 1)
  await waitForHang(store, runId, ['note-1'])
  await leaseLapsed(store, runId)
  return { store, world }
}

/** A run whose process died on this machine while a tool ran: `running`, its lease lapsed, its pid a dead one's. */
async function orphanedRun() {
  const { store, world } = await hungRun('orphan')
  const deadPid = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString()
  const run = await store.getRun('orphan')
  await store.updateRun('orphan', { metadata: { ...run!.metadata, pid: Number(deadPid) } })
  return { store, world, run: run! }
}

describe('managed runs', () => {
  it('the context is the restored one with the caller overlay on top', async () => {
    const { store } = await sqliteStore()
    const world = new World()
    void new Runner({ store: frozenLeases(store), leaseMs: CRASH_LEASE_MS, durability: 'sync' }).run(researchAgent(world, { onNote: () => forever() }).agent, {
      input: 'x',
      runId: 'ctx',
      context: { team: 'ops', region: 'eu' },
    })
    await waitFor(() => world.count('note:a and b') === 1)
    await waitForHang(store, 'ctx', ['note-1'])
    await leaseLapsed(store, 'ctx')
    const runner = new Runner({ store })
    await runner.resume(researchAgent(world).agent, { runId: 'ctx', context: { region: 'us' } })
    await runner.resume(researchAgent(world).agent, { runId: 'ctx', responses: { 'note-1:effect_outcome_unknown': 'skip' }, context: { region: 'us' } })
    const snapshots = (await runner.history('ctx')).filter((c) => (c.payload.runtime as { context?: unknown } | null | undefined)?.context)
    expect((snapshots.at(-1)!.payload.runtime as { context: unknown }).context).toEqual({ team: 'ops', region: 'us' })
  })

  it('pruning a finished run keeps its terminal checkpoint, so resume still returns its result', async () => {
    const { store } = await sqliteStore()
    const runner = new Runner({ store })
    await runner.run(researchAgent(new World()).agent, { input: 'x', runId: 'pruned' })
    const stored = (await store.listCheckpoints({ runId: 'pruned' })).length
    expect(stored).toBeGreaterThan(1)
    const result = await store.prune({ runId: 'pruned', keepLast: 1 })
    // Every stored checkpoint but the terminal one goes (the light phases and the snapshots
    // superseded before they were written ride in their phase logs).
    expect(result.checkpointsDeleted).toBe(stored - 1)
    expect(result.effectsDeleted).toBe(3)
    const again = await runner.resume(researchAgent(new World()).agent, { runId: 'pruned' })
    expect(again).toMatchObject({ state: 'completed', fromTerminalCheckpoint: true })
  })

  it('a resume never moves the latest checkpoint backwards or restarts the step count', async () => {
    const { store, world } = await hungRun('mono')
    const before = await store.getLatest({ runId: 'mono' })
    const runner = new Runner({ store })
    await runner.resume(researchAgent(world).agent, { runId: 'mono' })
    const history = await runner.history('mono')
    // Past the stored checkpoint that was latest, and the light phases it carries.
    const after = history.slice(history.findLastIndex((c) => c.checkpointId.split('~')[0] === before?.id) + 1)
    expect(after[0]!.phase).toBe('run_started')
    expect(Math.min(...after.map((c) => c.step))).toBeGreaterThanOrEqual(1)
  })

  it('dangling tool uses are repaired with error results and the repair is persisted', async () => {
    const { store } = await sqliteStore()
    const world = new World()
    const runner = new Runner({ store })
    await runner.run(researchAgent(world).agent, { input: 'x', runId: 'source' })
    // A snapshot whose history ends with tool uses that never got results (written elsewhere).
    const snapshot = (await runner.history('source')).filter((c) => (c.payload.runtime as { next?: string } | null)?.next === 'model')[0]!
    const runtime = structuredClone(snapshot.payload.runtime) as Record<string, unknown> & { messages: unknown[] }
    runtime.messages = [...runtime.messages, { role: 'assistant', content: [{ toolUse: { toolUseId: 'lost', name: 'lookup', input: { key: 'z' } } }] }]
    await store.save({ runId: 'dangling', kind: 'runner', phase: 'post_tool_batch', metadata: { snapshot: true, step: 0 }, payload: { runtime } })
    const fresh = researchAgent(world)
    const done = await runner.resume(fresh.agent, { runId: 'dangling' })
    expect(done.state).toBe('completed')
    expect(world.count('lookup:z')).toBe(0)
    const repaired = (await runner.history('dangling')).find((c) => c.payload.repaired_dangling_tool_uses === true)
    expect(repaired).toBeDefined()
    const seen = fresh.model.calls[0]!.messages.at(-1)!.content[0]
    expect(seen).toMatchObject({ toolResult: { toolUseId: 'lost', status: 'error' } })
  })

  it('recoverAll resumes the runs a dead process on this machine left running', async () => {
    const { store, world, run } = await orphanedRun()
    await store.createRun({ runId: 'alive', metadata: { host: run.metadata.host!, pid: process.pid } })
    const recovered = await new Runner({ store }).recoverAll(() => researchAgent(world).agent)
    expect(recovered.map((r) => [r.runId, r.state])).toEqual([['orphan', 'paused']])
    expect(recovered[0]!.interrupts[0]!.name).toBe('effect_outcome_unknown')
  })

  it('recoverAll resumes agent runs only: a LangGraph thread in the same store stays as it is', async () => {
    const { store, world } = await orphanedRun()
    // A thread stays `running` between invocations of its graph, and is listed before the older agent run.
    const State = Annotation.Root({ steps: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) })
    const graph = new StateGraph(State).addNode('plan', () => ({ steps: ['plan'] })).addEdge(START, 'plan').compile({ checkpointer: new CairnSaver({ store }) })
    await graph.invoke({ steps: [] }, { configurable: { thread_id: 'chat-1' } })
    const thread = (await store.listRuns({ status: 'running' })).find((listed) => listed.threadId === 'chat-1')!
    const recovered = await new Runner({ store }).recoverAll(() => researchAgent(world).agent)
    expect(recovered.map((r) => [r.runId, r.state])).toEqual([['orphan', 'paused']])
    expect((await store.getRun(thread.runId))?.lastSeq).toBe(thread.lastSeq)
    expect((await graph.getState({ configurable: { thread_id: 'chat-1' } })).values).toEqual({ steps: ['plan'] })
  })

  it('a fresh worker resumes a run by its stable id and repeats no completed work', async () => {
    const { store, reopen } = await sqliteStore()
    const world = new World()
    void new Runner({ store: frozenLeases(store), leaseMs: CRASH_LEASE_MS, durability: 'sync' }).run(researchAgent(world, { onNote: () => forever() }).agent, { input: 'x', runId: 'stable' })
    await waitFor(() => world.count('note:a and b') === 1)
    await waitForHang(store, 'stable', ['note-1'])
    await leaseLapsed(store, 'stable')
    const fresh = researchAgent(world)
    const paused = await new Runner({ store: reopen() }).resume(fresh.agent, { runId: 'stable' })
    expect(paused.state).toBe('paused')
    expect(fresh.model.calls).toHaveLength(0)
    expect(world.count('lookup:a')).toBe(1)
  })

  it('runs an agent used as a tool as a child run, inside subagent phases, resumable on its own', async () => {
    const { store } = await sqliteStore()
    const runner = new Runner({ store, durability: 'sync' })
    const buildChild = () => new Agent({ name: 'summarizer', model: new ScriptedModel([[{ text: 'summary: fine' }]]) })
    const summarize = runner.asTool(buildChild, { name: 'summarize', description: 'Summarize with a child agent.' })
    const parent = new Agent({
      name: 'lead',
      model: new ScriptedModel([[{ toolUse: { toolUseId: 'sub-1', name: 'summarize', input: { prompt: 'sum it up' } } }], [{ text: 'Reported.' }]]),
      tools: [summarize],
    })
    const run = await runner.run(parent, { input: 'go', runId: 'parent' })
    expect(run.state).toBe('completed')
    const phases = (await runner.history('parent')).map((c) => c.phase)
    expect(phases).toContain('pre_subagent_batch')
    expect(phases).toContain('post_subagent_batch')
    const child = await store.getRun('parent:sub-1')
    expect(child).toMatchObject({ status: 'completed', metadata: { parentRunId: 'parent' } })
    const again = await runner.resume(buildChild(), { runId: 'parent:sub-1' })
    expect(again).toMatchObject({ state: 'completed', fromTerminalCheckpoint: true })
    expect(String(again.result)).toBe('summary: fine')
    const last = (await runner.history('parent')).filter((c) => (c.payload as { runtime?: unknown }).runtime).at(-1)!
    expect((last.payload.runtime as { subagent_executions: unknown[] }).subagent_executions).toEqual([
      { tool_call_id: 'sub-1', child_run_id: 'parent:sub-1', agent_name: 'summarize', step: 0, state: 'completed' },
    ])
  })

  it('refuses to start a run whose id exists', async () => {
    const { store } = await sqliteStore()
    const runner = new Runner({ store })
    const agent = new Agent({ model: new ScriptedModel([[{ text: 'a' }]]) })
    await runner.run(agent, { input: 'x', runId: 'once' })
    await expect(runner.run(agent, { input: 'x', runId: 'once' })).rejects.toThrow(/already exists; continue it with runner.resume/)
    const idle = tool({ name: 'idle', description: 'x', inputSchema: { type: 'object' }, callback: () => 'x' })
    expect(idle.idempotent).toBe(false)
  })
})

