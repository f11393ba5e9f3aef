import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { Agent, tool, type Tool } from '../../src/index.js'
import { ScriptedModel } from '../../src/testing.js'
import { useTool, weatherAgent, weatherTools } from './helpers.js'

const resumeWith = (checkpoint: unknown) => [{ checkpointResume: { checkpoint } }]

function approvalTools() {
  const ran: string[] = []
  const pay = tool({
    name: 'pay',
    description: 'Pay an invoice after a human approves.',
    inputSchema: z.object({ amount: z.number() }),
    callback: ({ amount }, ctx) => {
      const answer = ctx.interrupt<string>({ name: 'approve_payment', reason: { amount } })
      ran.push(`pay:${amount}:${answer}`)
      return answer === 'yes' ? 'paid' : 'refused'
    },
  })
  const lookup = tool({
    name: 'lookup',
    description: 'Look something up.',
    inputSchema: z.object({ key: z.string() }),
    callback: ({ key }) => {
      ran.push(`lookup:${key}`)
      return `value of ${key}`
    },
  })
  return { ran, tools: [pay, lookup] as Tool[] }
}

describe('interrupts', () => {
  it('an interrupt beats the after_tools checkpoint and resuming re-runs only the interrupted tool', async () => {
    const { ran, tools } = approvalTools()
    const model = new ScriptedModel([
      [useTool('p1', 'pay', { amount: 40 }), useTool('l1', 'lookup', { key: 'k' })],
      [useTool('l2', 'lookup', { key: 'k2' })],
      [{ text: 'Paid and looked up.' }],
    ])
    const agent = new Agent({ model, tools, checkpointing: true })
    const first = await agent.invoke('Pay invoice 7')
    expect(first.checkpoint?.position).toBe('after_model')
    const interrupted = await agent.invoke(resumeWith(first.checkpoint!.toJSON()))
    expect(interrupted.stopReason).toBe('interrupt')
    expect(interrupted.checkpoint).toBeUndefined()
    expect(interrupted.interrupts).toEqual([{ id: 'p1:approve_payment', name: 'approve_payment', reason: { amount: 40 }, toolUseId: 'p1' }])
    expect(ran).toEqual(['lookup:k'])
    expect(agent.pendingInterrupts).toHaveLength(1)

    const answered = await agent.invoke([{ interruptResponse: { interruptId: 'p1:approve_payment', response: 'yes' } }])
    expect(ran).toEqual(['lookup:k', 'pay:40:yes'])
    expect(answered.checkpoint?.position).toBe('after_tools')
    const results = answered.checkpoint!.snapshot.data.messages.at(-1)!.content.map((b) => ('toolResult' in b ? b.toolResult.toolUseId : ''))
    expect(results).toEqual(['p1', 'l1'])
    // Once resolved, later cycles checkpoint normally.
    const next = await agent.invoke(resumeWith(answered.checkpoint!.toJSON()))
    expect(next.checkpoint).toMatchObject({ position: 'after_model', cycleIndex: 1 })
    expect(next.checkpoint!.snapshot.data.interrupts.pending).toEqual([])
  })

  it('a new prompt while interrupts are pending is refused, and so is an unknown interrupt id', async () => {
    const { tools } = approvalTools()
    const agent = new Agent({ model: new ScriptedModel([[useTool('p1', 'pay', { amount: 1 })]]), tools })
    expect((await agent.invoke('pay')).stopReason).toBe('interrupt')
    await expect(agent.invoke('something else')).rejects.toThrow(/waiting for responses to interrupts p1:approve_payment/)
    await expect(agent.invoke([{ interruptResponse: { interruptId: 'nope', response: 1 } }])).rejects.toThrow(/not pending/)
  })

  it('interrupt state travels in snapshots taken while it is set', async () => {
    const { tools } = approvalTools()
    const agent = new Agent({ model: new ScriptedModel([[useTool('p1', 'pay', { amount: 1 })], [{ text: 'done' }]]), tools, checkpointing: true })
    const first = await agent.invoke('pay')
    expect(first.checkpoint!.snapshot.data.interrupts).toEqual({ pending: [], completed: [], responses: {}, cycleIndex: 0 })
    const interrupted = await agent.invoke(resumeWith(first.checkpoint!.toJSON()))
    expect(interrupted.stopReason).toBe('interrupt')
  })
})

describe('cancellation', () => {
  it('a cancel at after_model returns cancelled without a checkpoint and gives the tool uses error results', async () => {
    const controller = new AbortController()
    const { agent, calls } = weatherAgent({ hooks: { afterModelCall: () => controller.abort() } })
    const result = await agent.invoke('Weather?', { signal: controller.signal })
    expect(result.stopReason).toBe('cancelled')
    expect(result.checkpoint).toBeUndefined()
    expect(calls).toEqual([])
    const last = agent.messages.at(-1)!
    expect(last.content.map((b) => ('toolResult' in b ? b.toolResult.status : ''))).toEqual(['error', 'error'])
  })

  it('a cancel during tools returns cancelled after them, without another model call or a checkpoint', async () => {
    let agent!: Agent
    const slow = tool({
      name: 'slow',
      description: 'Slow work.',
      inputSchema: { type: 'object' },
      callback: async (_input, ctx) => {
        agent.cancel()
        await new Promise((resolve) => setTimeout(resolve, 5))
        if (ctx.signal.aborted) throw new Error('aborted')
        return 'done'
      },
    })
    const model = new ScriptedModel([[useTool('s1', 'slow', {})], [{ text: 'never' }]])
    agent = new Agent({ model, tools: [slow], checkpointing: false })
    const result = await agent.invoke('go')
    expect(result.stopReason).toBe('cancelled')
    expect(model.calls).toHaveLength(1)
    const toolResult = agent.messages.at(-1)!.content[0]!
    expect('toolResult' in toolResult && toolResult.toolResult.status).toBe('error')

    const resumed = new Agent({ model: new ScriptedModel([[useTool('s1', 'slow', {})]]), tools: [slow], checkpointing: true })
    agent = resumed
    const first = await resumed.invoke('go')
    expect(first.checkpoint?.position).toBe('after_model')
    const afterTools = await resumed.invoke(resumeWith(first.checkpoint!.toJSON()))
    expect(afterTools.stopReason).toBe('cancelled')
    expect(afterTools.checkpoint).toBeUndefined()
  })

  it('a cancel at after_tools with checkpointing returns cancelled immediately', async () => {
    const controller = new AbortController()
    const { agent, model } = weatherAgent({ hooks: { afterToolCall: () => controller.abort() } })
    const first = await agent.invoke('Weather?')
    const result = await agent.invoke(resumeWith(first.checkpoint!.toJSON()), { signal: controller.signal })
    expect(result.stopReason).toBe('cancelled')
    expect(result.checkpoint).toBeUndefined()
    expect(model.calls).toHaveLength(1)
  })
})

describe('stop signals', () => {
  it('stopEventLoop set by a tool ends the loop with the normal stop reason and no after_tools checkpoint', async () => {
    const stopper = tool({
      name: 'finish',
      description: 'Stop.',
      inputSchema: { type: 'object' },
      callback: (_input, ctx) => {
        ctx.requestState.stopEventLoop = true
        return 'stopping'
      },
    })
    const agent = new Agent({ model: new ScriptedModel([[useTool('f', 'finish', {})]]), tools: [stopper], checkpointing: true })
    const first = await agent.invoke('go')
    const result = await agent.invoke(resumeWith(first.checkpoint!.toJSON()))
    expect(result.stopReason).toBe('tool_use')
    expect(result.checkpoint).toBeUndefined()
  })

  it('structured output completing stops the loop with no after_tools checkpoint and returns the value', async () => {
    const schema = z.object({ city: z.string(), temperature: z.number() })
    const model = new ScriptedModel([[useTool('s', 'StructuredOutput', { city: 'Seattle', temperature: 12 })]])
    const agent = new Agent({ model, checkpointing: false })
    const result = await agent.invoke('Weather as data', { structuredOutputSchema: schema })
    expect(result.structuredOutput).toEqual({ city: 'Seattle', temperature: 12 })
    expect(result.stopReason).toBe('end_turn')
    expect(result.checkpoint).toBeUndefined()
    expect(model.calls[0]!.tools.map((t) => t.name)).toContain('StructuredOutput')
  })

  it('structured output is forced once when the model answers in text, then refused', async () => {
    const schema = z.object({ n: z.number() })
    const forced = new ScriptedModel([[{ text: 'five' }], [useTool('s', 'StructuredOutput', { n: 5 })]])
    const result = await new Agent({ model: forced }).invoke('n?', { structuredOutputSchema: schema })
    expect(result.structuredOutput).toEqual({ n: 5 })
    expect(forced.calls[1]!.toolChoice).toEqual({ tool: 'StructuredOutput' })
    const stubborn = new ScriptedModel([[{ text: 'five' }], [{ text: 'still five' }]])
    await expect(new Agent({ model: stubborn }).invoke('n?', { structuredOutputSchema: schema })).rejects.toMatchObject({ code: 'structured_output' })
  })
})

describe('tools', () => {
  it('run concurrently by default with results in call order, or sequentially on request', async () => {
    const log: string[] = []
    const make = (name: string, ms: number) =>
      tool({
        name,
        description: name,
        inputSchema: { type: 'object' },
        callback: async () => {
          log.push(`start:${name}`)
          await new Promise((resolve) => setTimeout(resolve, ms))
          log.push(`end:${name}`)
          return name
        },
      })
    const turns = () => [[useTool('1', 'slow', {}), useTool('2', 'fast', {})], [{ text: 'ok' }]]
    const concurrent = new Agent({ model: new ScriptedModel(turns()), tools: [make('slow', 20), make('fast', 1)] })
    await concurrent.invoke('go')
    expect(log).toEqual(['start:slow', 'start:fast', 'end:fast', 'end:slow'])
    const ids = concurrent.messages.at(-2)!.content.map((b) => ('toolResult' in b ? b.toolResult.toolUseId : ''))
    expect(ids).toEqual(['1', '2'])
    log.length = 0
    const sequential = new Agent({ model: new ScriptedModel(turns()), tools: [make('slow', 20), make('fast', 1)], toolExecution: 'sequential' })
    await sequential.invoke('go')
    expect(log).toEqual(['start:slow', 'end:slow', 'start:fast', 'end:fast'])
  })

  it('a throwing tool, an unknown tool and invalid input become error results the model sees', async () => {
    const boom = tool({ name: 'boom', description: 'Fails.', inputSchema: { type: 'object' }, callback: () => { throw new Error('disk on fire') } })
    const { tools } = weatherTools()
    const model = new ScriptedModel([
      [useTool('a', 'boom', {}), useTool('b', 'missing', {}), useTool('c', 'get_weather', { city: 7 }), useTool('d', 'get_weather', {})],
      [{ text: 'ok' }],
    ])
    const agent = new Agent({ model, tools: [boom, ...tools] })
    const result = await agent.invoke('go')
    const texts = model.calls[1]!.messages.at(-1)!.content.map((b) => ('toolResult' in b ? `${b.toolResult.status}:${JSON.stringify(b.toolResult.content)}` : ''))
    expect(texts[0]).toMatch(/^error:.*disk on fire/)
    expect(texts[1]).toMatch(/^error:.*Tool missing does not exist/)
    expect(texts[2]).toMatch(/^error:.*Invalid input for tool get_weather: city/)
    expect(texts[3]).toMatch(/^error:.*city/)
    expect(result.metrics.toolCalls.get_weather).toEqual({ calls: 2, errors: 2 })
  })

  it('validate JSON Schema input and name the field', async () => {
    const add = tool({
      name: 'add',
      description: 'Add two numbers.',
      inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
      callback: (input) => {
        const { a, b } = input as { a: number; b: number }
        return { sum: a + b }
      },
    })
    const model = new ScriptedModel([[useTool('1', 'add', { a: 1, b: 2 }), useTool('2', 'add', { a: 1 })], [{ text: 'ok' }]])
    await new Agent({ model, tools: [add] }).invoke('add')
    const results = model.calls[1]!.messages.at(-1)!.content.map((b) => ('toolResult' in b ? b.toolResult : undefined))
    expect(results[0]).toMatchObject({ status: 'success', content: [{ json: { sum: 3 } }] })
    expect(results[1]).toMatchObject({ status: 'error', content: [{ text: 'Invalid input for tool add: b: is required' }] })
  })
})
