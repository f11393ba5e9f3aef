import { describe, expect, it } from 'vitest'
import { Agent, SlidingWindowConversationManager, tool, type AgentStreamEvent, type Message } from '../../src/index.js'
import { ScriptedModel } from '../../src/testing.js'
import { useTool, weatherAgent } from './helpers.js'

const resumeWith = (checkpoint: unknown) => [{ checkpointResume: { checkpoint } }]

describe('hooks, metrics and streaming', () => {
  it('invocation hooks fire on every resume call and metrics reset on each', async () => {
    const seen: string[] = []
    const { agent } = weatherAgent({
      hooks: {
        beforeInvocation: ({ resumed }) => void seen.push(`before:${resumed}`),
        afterInvocation: ({ result }) => void seen.push(`after:${result.stopReason}`),
        beforeModelCall: ({ cycleIndex }) => void seen.push(`model:${cycleIndex}`),
        beforeToolCall: ({ toolUse }) => void seen.push(`tool:${toolUse.name}`),
      },
    })
    const first = await agent.invoke('Weather?')
    expect(first.metrics).toMatchObject({ modelCalls: 1, cycleCount: 1, toolCalls: {} })
    const second = await agent.invoke(resumeWith(first.checkpoint!.toJSON()))
    expect(second.metrics.modelCalls).toBe(0)
    expect(second.metrics.toolCalls).toEqual({ get_weather: { calls: 1, errors: 0 }, get_forecast: { calls: 1, errors: 0 } })
    const third = await agent.invoke(resumeWith(second.checkpoint!.toJSON()))
    expect(third.metrics.modelCalls).toBe(1)
    expect(third.metrics.usage.totalTokens).toBeGreaterThan(0)
    expect(seen).toEqual([
      'before:false',
      'model:0',
      'after:checkpoint',
      'before:true',
      'tool:get_weather',
      'tool:get_forecast',
      'after:checkpoint',
      'before:true',
      'model:1',
      'after:end_turn',
    ])
  })

  it('stream yields typed events and a resume does not replay earlier cycles', async () => {
    const { agent } = weatherAgent()
    const collect = async (events: AsyncGenerator<AgentStreamEvent, unknown>) => {
      const types: string[] = []
      for await (const event of events) types.push(event.type === 'modelEvent' ? `model:${event.event.type}` : event.type)
      return types
    }
    const first = await collect(agent.stream('Weather?'))
    expect(first).toContain('model:toolUseStart')
    expect(first.at(-2)).toBe('checkpoint')
    expect(first.at(-1)).toBe('result')
    expect(first.filter((type) => type === 'messageAdded')).toHaveLength(2)
  })

  it('streams only the cycle after the resume', async () => {
    const { agent } = weatherAgent()
    const first = await agent.invoke('Weather?')
    const afterTools = await agent.invoke(resumeWith(first.checkpoint!.toJSON()))
    const texts: string[] = []
    let toolEvents = 0
    for await (const event of agent.stream(resumeWith(afterTools.checkpoint!.toJSON()))) {
      if (event.type === 'modelEvent' && event.event.type === 'textDelta') texts.push(event.event.text)
      if (event.type === 'toolStarted' || event.type === 'toolFinished') toolEvents++
    }
    expect(texts.join('')).toBe('Sunny, then clear skies.')
    expect(toolEvents).toBe(0)
  })

  it('messageAdded fires for the prompt, the model reply and the tool results', async () => {
    const added: string[] = []
    const { agent } = weatherAgent({ checkpointing: false, hooks: { messageAdded: ({ message }) => void added.push(message.role) } })
    await agent.invoke('Weather?')
    expect(added).toEqual(['user', 'assistant', 'user', 'assistant'])
  })

  it('refuses a second invocation while one is running', async () => {
    let release!: () => void
    const gate = tool({ name: 'gate', description: 'Waits.', inputSchema: { type: 'object' }, callback: () => new Promise<string>((resolve) => (release = () => resolve('ok'))) })
    const agent = new Agent({ model: new ScriptedModel([[useTool('g', 'gate', {})], [{ text: 'done' }]]), tools: [gate] })
    const running = agent.invoke('go')
    await new Promise((resolve) => setTimeout(resolve, 5))
    await expect(agent.invoke('again')).rejects.toMatchObject({ code: 'agent_busy' })
    release()
    expect((await running).stopReason).toBe('end_turn')
  })
})

describe('snapshot', () => {
  it('holds messages, agent state, conversation-manager state, interrupt state and the configuration signature', async () => {
    const remember = tool({
      name: 'remember',
      description: 'Remember a note.',
      inputSchema: { type: 'object', properties: { note: { type: 'string' } } },
      callback: (input, ctx) => {
        ctx.agentState.set('note', (input as { note: string }).note)
        return 'noted'
      },
    })
    const model = new ScriptedModel([[useTool('r', 'remember', { note: 'buy milk' })], [{ text: 'ok' }]])
    const agent = new Agent({ model, tools: [remember], checkpointing: true, conversationManager: new SlidingWindowConversationManager({ windowSize: 10 }) })
    const first = await agent.invoke('remember')
    const second = await agent.invoke(resumeWith(first.checkpoint!.toJSON()))
    const { data } = second.checkpoint!.snapshot
    expect(data.state).toEqual({ note: 'buy milk' })
    expect(data.messages).toHaveLength(3)
    expect(data.conversationManager).toEqual({ type: 'sliding_window', windowSize: 10, removedMessageCount: 0 })
    expect(data.interrupts.pending).toEqual([])
    expect(data.config.hash).toBe(agent.configSignature.hash)
    const fresh = new Agent({ model: new ScriptedModel([[{ text: 'ok' }]]), tools: [remember], checkpointing: true })
    await fresh.invoke(resumeWith(JSON.parse(JSON.stringify(second.checkpoint!.toJSON()))))
    expect(fresh.state.get('note')).toBe('buy milk')
  })
})

describe('sliding window conversation manager', () => {
  it('keeps the last messages without starting on an orphan tool result, and its state is restored', async () => {
    const manager = new SlidingWindowConversationManager({ windowSize: 3 })
    const messages: Message[] = [
      { role: 'user', content: [{ text: 'a' }] },
      { role: 'assistant', content: [useTool('1', 'x', {})] },
      { role: 'user', content: [{ toolResult: { toolUseId: '1', status: 'success', content: [{ text: 'r' }] } }] },
      { role: 'assistant', content: [{ text: 'b' }] },
      { role: 'user', content: [{ text: 'c' }] },
    ]
    manager.apply(messages)
    expect(messages.map((m) => m.content[0])).toEqual([{ text: 'b' }, { text: 'c' }])
    expect(manager.getState()).toMatchObject({ removedMessageCount: 3 })
    const restored = new SlidingWindowConversationManager({ windowSize: 3 })
    restored.restoreState(manager.getState())
    expect(restored.removedMessageCount).toBe(3)
  })

  it('trims what the model sees in a long conversation', async () => {
    const turns = Array.from({ length: 6 }, (_, i) => [{ text: `reply ${i}` }])
    const model = new ScriptedModel(turns)
    const agent = new Agent({ model, conversationManager: new SlidingWindowConversationManager({ windowSize: 4 }) })
    for (let i = 0; i < 6; i++) await agent.invoke(`question ${i}`)
    expect(model.calls.at(-1)!.messages).toHaveLength(4)
    expect(model.calls.at(-1)!.messages[0]).toEqual({ role: 'assistant', content: [{ text: 'reply 3' }] })
    expect(agent.messages).toHaveLength(5)
  })
})

describe('ScriptedModel', () => {
  it('derives the stop reason, records calls, accepts function turns and says when it runs out', async () => {
    const model = new ScriptedModel([(request) => [{ text: `you said ${JSON.stringify(request.messages.at(-1)!.content)}` }], { content: [{ text: 'cut' }], stopReason: 'max_tokens' }])
    const agent = new Agent({ model })
    expect(String(await agent.invoke('hi'))).toBe('you said [{"text":"hi"}]')
    expect((await agent.invoke('more')).stopReason).toBe('max_tokens')
    expect(model.calls).toHaveLength(2)
    await expect(agent.invoke('again')).rejects.toThrow('ScriptedModel was called 3 times but has only 2 scripted turns')
  })
})
