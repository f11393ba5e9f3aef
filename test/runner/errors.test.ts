import { describe, expect, it } from 'vitest'
import { Agent, CheckpointError, forkRun, MemoryStore, ModelStreamError, Runner, RunNotPausedError, tool } from '../../src/index.js'
import { ResponseAssembler } from '../../src/model/model.js'
import { ScriptedModel } from '../../src/testing.js'

/** An agent whose one tool puts a function into agent state, then the model answers. */
function leakyAgent() {
  let modelCalls = 0
  const model = new ScriptedModel([
    () => {
      modelCalls++
      return [{ toolUse: { toolUseId: 'leak-1', name: 'leak', input: {} } }]
    },
    () => {
      modelCalls++
      return [{ text: 'the model saw the tool result' }]
    },
  ])
  const leak = tool({
    name: 'leak',
    description: 'Store a callback in agent state.',
    inputSchema: { type: 'object', properties: {} },
    callback: (_input, ctx) => {
      ctx.agentState.set('callback', (() => 1) as never)
      return 'stored'
    },
  })
  return { agent: new Agent({ name: 'leaky', model, tools: [leak] }), modelCalls: () => modelCalls }
}

describe('runner errors a caller can handle', () => {
  it('a tool that puts a function into agent state fails the run; the model never sees it as a tool result', async () => {
    const store = new MemoryStore()
    const { agent, modelCalls } = leakyAgent()
    const result = await new Runner({ store }).run(agent, { runId: 'leak', input: 'go' })
    expect(result.state).toBe('failed')
    expect(result.error).toMatchObject({ name: 'CheckpointError', code: 'unserializable' })
    expect(result.error?.message).toContain('agent state callback')
    expect(modelCalls()).toBe(1)
    expect((await store.getRun('leak'))?.status).toBe('failed')
  })

  it('agent.invoke rejects with the CheckpointError of a tool that put a function into agent state', async () => {
    const { agent, modelCalls } = leakyAgent()
    await expect(agent.invoke('go')).rejects.toBeInstanceOf(CheckpointError)
    expect(modelCalls()).toBe(1)
  })

  it('a runner context that no checkpoint can hold is a CheckpointError naming its path, and no run is created', async () => {
    const store = new MemoryStore()
    const agent = new Agent({ name: 'a', model: new ScriptedModel([[{ text: 'hi' }]]) })
    const context = { tenant: 't1', client: { send: () => 1 } } as never
    const refused = await new Runner({ store }).run(agent, { runId: 'ctx', input: 'go', context }).catch((err: unknown) => err)
    expect(refused).toBeInstanceOf(CheckpointError)
    expect(refused).toMatchObject({ code: 'unserializable', path: 'context.client.send' })
    expect((refused as Error).message).toContain('context.client.send')
    expect(await store.getRun('ctx')).toBeUndefined()
  })

  it('answers given to a run that is not paused are refused with RunNotPausedError, and the run is unchanged', async () => {
    const store = new MemoryStore()
    const runner = new Runner({ store })
    await runner.run(new Agent({ name: 'a', model: new ScriptedModel([[{ text: 'hi' }]]) }), { runId: 'idle', input: 'go' })
    // A resumable, unpaused run: a fork of the run at a checkpoint before its end.
    const history = await runner.history('idle')
    const before = history.find((record) => record.phase === 'step_started')!
    const { runId } = await forkRun(store, { checkpointId: before.checkpointId, runId: 'idle-fork' })
    const refused = await runner.resume(new Agent({ name: 'a', model: new ScriptedModel([[{ text: 'again' }]]) }), { runId, responses: { x: 'yes' } }).catch((err: unknown) => err)
    expect(refused).toBeInstanceOf(RunNotPausedError)
    expect(refused).toMatchObject({ code: 'run_not_paused', runId: 'idle-fork' })
  })

  it('answers given to a finished run are refused with RunNotPausedError, not answered with its stored result', async () => {
    const store = new MemoryStore()
    const runner = new Runner({ store })
    await runner.run(new Agent({ name: 'a', model: new ScriptedModel([[{ text: 'hi' }]]) }), { runId: 'done', input: 'go' })
    const agent = () => new Agent({ name: 'a', model: new ScriptedModel([]) })
    const refused = await runner.resume(agent(), { runId: 'done', responses: { 'call-1:effect_outcome_unknown': 'skip' } }).catch((err: unknown) => err)
    expect(refused).toBeInstanceOf(RunNotPausedError)
    expect(refused).toMatchObject({ code: 'run_not_paused', runId: 'done', status: 'completed' })
    expect((refused as Error).message).toMatch(/^run done is completed, not paused/)
    // Without answers, resuming it still returns its result.
    expect(await runner.resume(agent(), { runId: 'done' })).toMatchObject({ state: 'completed', fromTerminalCheckpoint: true })
  })

  it('a model stream that cannot be assembled is a ModelStreamError with its own code', () => {
    const assembler = new ResponseAssembler()
    assembler.add({ type: 'messageStart' })
    assembler.add({ type: 'textStart' })
    assembler.add({ type: 'textDelta', text: 'cut' })
    let error: unknown
    try {
      assembler.finish()
    } catch (err) {
      error = err
    }
    expect(error).toBeInstanceOf(ModelStreamError)
    expect(error).toMatchObject({ code: 'model_stream_invalid' })
  })
})
