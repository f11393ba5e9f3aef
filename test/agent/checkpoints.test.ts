import { describe, expect, it, vi } from 'vitest'
import { Agent, AgentResult, Checkpoint, CheckpointError, ConfigMismatchError, InvalidArgumentError, tool } from '../../src/index.js'
import { ScriptedModel } from '../../src/testing.js'
import { runToEnd, SYSTEM_PROMPT, useTool, weatherAgent, weatherTools } from './helpers.js'

const resumeWith = (checkpoint: unknown) => [{ checkpointResume: { checkpoint } }]

describe('agent checkpoints', () => {
  it('checkpointing defaults to false and then changes nothing', async () => {
    const { calls, tools } = weatherTools()
    const model = new ScriptedModel([[useTool('t1', 'get_weather'), useTool('t2', 'get_forecast')], [{ text: 'Sunny.' }]])
    const agent = new Agent({ model, tools, systemPrompt: SYSTEM_PROMPT })
    expect(agent.checkpointing).toBe(false)
    const result = await agent.invoke('What is the weather and forecast for Seattle?')
    expect(result.stopReason).toBe('end_turn')
    expect(result.checkpoint).toBeUndefined()
    expect(calls).toEqual(['weather:Seattle', 'forecast:Seattle'])
    expect(model.calls).toHaveLength(2)
  })

  it('a checkpointResume input is rejected when checkpointing is off', async () => {
    const { agent } = weatherAgent({ checkpointing: false })
    await expect(agent.invoke(resumeWith({}))).rejects.toMatchObject({ name: 'CheckpointError', code: 'checkpointing_disabled' })
  })

  it('a tool-use cycle stops at after_model and after_tools with a checkpoint', async () => {
    const { agent, calls } = weatherAgent()
    const first = await agent.invoke('What is the weather and forecast for Seattle?')
    expect(first.stopReason).toBe('checkpoint')
    expect(first.checkpoint).toBeInstanceOf(Checkpoint)
    expect(first.checkpoint?.position).toBe('after_model')
    expect(calls).toEqual([])
    const second = await agent.invoke(resumeWith(first.checkpoint!.toJSON()))
    expect(second.stopReason).toBe('checkpoint')
    expect(second.checkpoint?.position).toBe('after_tools')
    expect(calls).toEqual(['weather:Seattle', 'forecast:Seattle'])
    const last = await agent.invoke(resumeWith(second.checkpoint!.toJSON()))
    expect(last.stopReason).toBe('end_turn')
    expect(last.checkpoint).toBeUndefined()
    expect(String(last)).toBe('Sunny, then clear skies.')
  })

  it('a first call that ends its turn returns normally with no checkpoint', async () => {
    const { agent } = weatherAgent({ turns: [[{ text: 'It is sunny.' }]] })
    const result = await agent.invoke('Weather?')
    expect(result.stopReason).toBe('end_turn')
    expect(result.checkpoint).toBeUndefined()
  })

  it('a checkpoint has position, cycleIndex, a readonly schemaVersion 1.0, an opaque snapshot and appData', async () => {
    const { agent } = weatherAgent()
    const { checkpoint } = await agent.invoke('Weather?', { appData: { ticket: 'T-1' } })
    expect(checkpoint).toMatchObject({ position: 'after_model', cycleIndex: 0, schemaVersion: '1.0', appData: { ticket: 'T-1' } })
    expect(checkpoint!.snapshot).toMatchObject({ scope: 'agent', schemaVersion: '1.0' })
    const built = new Checkpoint({ position: 'after_tools', snapshot: checkpoint!.snapshot })
    expect(built.cycleIndex).toBe(0)
    expect(built.schemaVersion).toBe('1.0')
  })

  it('appData is copied, and carried forward by a resume unless replaced', async () => {
    const { agent } = weatherAgent()
    const options = { appData: { ticket: 'T-1' } }
    const first = await agent.invoke('Weather?', options)
    first.checkpoint!.appData.ticket = 'changed'
    expect(options.appData).toEqual({ ticket: 'T-1' })
    const second = await agent.invoke(resumeWith(first.checkpoint!.toJSON()))
    expect(second.checkpoint!.appData).toEqual({ ticket: 'changed' })
    const third = await weatherAgent().agent.invoke(resumeWith(second.checkpoint!.toJSON()), { appData: { ticket: 'T-2' } })
    expect(third.message).toBeDefined()
  })

  it('toJSON survives JSON and fromJSON checks the schema version and ignores unknown keys', async () => {
    const { agent } = weatherAgent()
    const { checkpoint } = await agent.invoke('Weather?', { appData: { n: 1 } })
    const json = JSON.parse(JSON.stringify(checkpoint!.toJSON())) as Record<string, unknown>
    expect(Checkpoint.fromJSON(json).toJSON()).toEqual(checkpoint!.toJSON())
    const codeOf = (fn: () => unknown) => {
      try {
        fn()
      } catch (err) {
        return (err as CheckpointError).code
      }
    }
    expect(codeOf(() => Checkpoint.fromJSON({ ...json, schemaVersion: '2.0' }))).toBe('schema_mismatch')
    const { schemaVersion: _dropped, ...unversioned } = json
    expect(codeOf(() => Checkpoint.fromJSON(unversioned))).toBe('schema_mismatch')
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    expect(Checkpoint.fromJSON({ ...json, extra: true }).position).toBe('after_model')
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('extra'), 'CairnWarning')
    warn.mockRestore()
  })

  it('the resume block must be alone, single, and hold a checkpoint; a resume appends no user message', async () => {
    const { agent } = weatherAgent()
    const { checkpoint } = await agent.invoke('Weather?')
    const data = checkpoint!.toJSON()
    await expect(agent.invoke([{ text: 'hi' }, { checkpointResume: { checkpoint: data } }])).rejects.toBeInstanceOf(InvalidArgumentError)
    await expect(agent.invoke([{ checkpointResume: { checkpoint: data } }, { checkpointResume: { checkpoint: data } }])).rejects.toBeInstanceOf(InvalidArgumentError)
    await expect(agent.invoke([{ checkpointResume: {} as never }])).rejects.toMatchObject({ code: 'missing_checkpoint' })
    const before = data.snapshot.data.messages.length
    await agent.invoke(resumeWith(data))
    expect(agent.messages.filter((m) => m.role === 'user' && m.content.some((b) => 'text' in b))).toHaveLength(1)
    expect(agent.messages.length).toBe(before + 1)
  })

  it('validation order is disabled, mixing, count, missing key, schema version', async () => {
    const off = new Agent({ model: new ScriptedModel([]), checkpointing: false })
    await expect(off.invoke([{ text: 'x' }, { checkpointResume: {} as never }, { checkpointResume: {} as never }])).rejects.toMatchObject({
      code: 'checkpointing_disabled',
    })
    const on = new Agent({ model: new ScriptedModel([]), checkpointing: true })
    await expect(on.invoke([{ text: 'x' }, { checkpointResume: {} as never }, { checkpointResume: {} as never }])).rejects.toThrow(/only block/)
    await expect(on.invoke([{ checkpointResume: {} as never }, { checkpointResume: {} as never }])).rejects.toThrow(/only one/)
    await expect(on.invoke([{ checkpointResume: {} as never }])).rejects.toMatchObject({ code: 'missing_checkpoint' })
    await expect(on.invoke(resumeWith({ schemaVersion: '0.9' }))).rejects.toMatchObject({ code: 'schema_mismatch' })
  })

  it('resume from after_model runs the tools without calling the model', async () => {
    const { agent, model, calls } = weatherAgent()
    const first = await agent.invoke('Weather?')
    const persisted = JSON.stringify(first.checkpoint!.toJSON())
    const fresh = weatherAgent({ turns: [] })
    const resumed = await fresh.agent.invoke(resumeWith(JSON.parse(persisted)))
    expect(fresh.model.calls).toHaveLength(0)
    expect(fresh.calls).toEqual(['weather:Seattle', 'forecast:Seattle'])
    expect(resumed.checkpoint?.position).toBe('after_tools')
    expect(model.calls).toHaveLength(1)
    expect(calls).toEqual([])
  })

  it('resume from after_tools calls the model next and completed tools never run again', async () => {
    const { agent } = weatherAgent()
    const first = await agent.invoke('Weather?')
    const second = await agent.invoke(resumeWith(first.checkpoint!.toJSON()))
    const fresh = weatherAgent({ turns: [[{ text: 'Done.' }]] })
    const last = await fresh.agent.invoke(resumeWith(JSON.parse(JSON.stringify(second.checkpoint!.toJSON()))))
    expect(fresh.calls).toEqual([])
    expect(fresh.model.calls).toHaveLength(1)
    const seen = fresh.model.calls[0]!.messages.flatMap((m) => m.content.filter((b) => 'toolResult' in b))
    expect(seen).toHaveLength(2)
    expect(String(last)).toBe('Done.')
  })

  it('cycle indexes follow the boundaries and every fresh invocation starts at 0', async () => {
    const turns = [[useTool('a', 'get_weather')], [useTool('b', 'get_forecast')], [{ text: 'ok' }]]
    const { agent } = weatherAgent({ turns: [...turns, ...turns] })
    const { positions } = await runToEnd(agent, await agent.invoke('first'))
    expect(positions).toEqual(['after_model:0', 'after_tools:0', 'after_model:1', 'after_tools:1'])
    const again = await runToEnd(agent, await agent.invoke('second'))
    expect(again.positions).toEqual(['after_model:0', 'after_tools:0', 'after_model:1', 'after_tools:1'])
  })

  it('resuming the same after_model checkpoint keeps its cycle and does not emit it again', async () => {
    const { agent } = weatherAgent({ turns: [[useTool('a', 'get_weather')], [useTool('b', 'get_forecast')], [{ text: 'ok' }]] })
    const first = await agent.invoke('go')
    const afterTools = await agent.invoke(resumeWith(first.checkpoint!.toJSON()))
    expect(afterTools.checkpoint).toMatchObject({ position: 'after_tools', cycleIndex: 0 })
    const nextModel = await agent.invoke(resumeWith(afterTools.checkpoint!.toJSON()))
    expect(nextModel.checkpoint).toMatchObject({ position: 'after_model', cycleIndex: 1 })
  })

  it('at after_tools the result message is the assistant message that requested the tools', async () => {
    const { agent } = weatherAgent()
    const first = await agent.invoke('Weather?')
    const second = await agent.invoke(resumeWith(first.checkpoint!.toJSON()))
    expect(second.message?.role).toBe('assistant')
    expect(second.message?.content.map((b) => ('toolUse' in b ? b.toolUse.name : ''))).toEqual(['get_weather', 'get_forecast'])
    const last = second.checkpoint!.snapshot.data.messages.at(-1)!
    expect(last.content.every((b) => 'toolResult' in b)).toBe(true)
  })

  it('a checkpoint from an agent with other tools or prompt is a ConfigMismatchError naming the difference', async () => {
    const { agent } = weatherAgent()
    const data = (await agent.invoke('Weather?')).checkpoint!.toJSON()
    const { tools } = weatherTools()
    const other = new Agent({ model: new ScriptedModel([[{ text: 'x' }]]), tools: [tools[0]!], systemPrompt: 'Different.', checkpointing: true })
    const error = await other.invoke(resumeWith(data)).catch((err: unknown) => err)
    expect(error).toBeInstanceOf(ConfigMismatchError)
    expect((error as Error).message).toMatch(/system prompt changed/)
    expect((error as Error).message).toMatch(/tool get_forecast was removed/)
    const changedTool = tool({ name: 'get_weather', description: 'Another description.', inputSchema: { type: 'object' }, callback: () => 'x' })
    const third = new Agent({ model: new ScriptedModel([]), tools: [changedTool, tools[1]!], systemPrompt: SYSTEM_PROMPT, checkpointing: true })
    await expect(third.invoke(resumeWith(data))).rejects.toThrow(/tool get_weather changed/)
    const allowed = await other.invoke(resumeWith(data), { allowConfigChange: true })
    expect(allowed.stopReason).toBe('checkpoint')
  })

  it('a result serializes with its checkpoint (null when absent) and is restored from JSON', async () => {
    const { agent } = weatherAgent()
    const withCheckpoint = await agent.invoke('Weather?')
    const json = JSON.parse(JSON.stringify(withCheckpoint.toJSON())) as ReturnType<AgentResult['toJSON']>
    const restored = AgentResult.fromJSON(json)
    expect(restored.checkpoint).toBeInstanceOf(Checkpoint)
    expect(restored.checkpoint?.toJSON()).toEqual(withCheckpoint.checkpoint?.toJSON())
    const plain = await new Agent({ model: new ScriptedModel([[{ text: 'hi' }]]) }).invoke('hi')
    expect(plain.toJSON().checkpoint).toBeNull()
    expect(AgentResult.fromJSON(plain.toJSON()).checkpoint).toBeUndefined()
  })

  it('rejects a malformed snapshot as a CheckpointError', async () => {
    const { agent } = weatherAgent()
    const data = (await agent.invoke('Weather?')).checkpoint!.toJSON()
    await expect(agent.invoke(resumeWith({ ...data, snapshot: { scope: 'other' } }))).rejects.toBeInstanceOf(CheckpointError)
  })
})
