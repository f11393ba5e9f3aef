import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { Agent, ConfigMismatchError, InvalidArgumentError, tool } from '../../src/index.js'
import { ScriptedModel } from '../../src/testing.js'
import { useTool } from './helpers.js'

function approvalAgent(turns: ConstructorParameters<typeof ScriptedModel>[0]) {
  const ran: string[] = []
  const pay = tool({
    name: 'pay',
    description: 'Pay after approval.',
    inputSchema: z.object({ amount: z.number() }),
    callback: ({ amount }, ctx) => {
      const answer = ctx.interrupt<string>({ name: 'approve', reason: { amount } })
      ran.push(`${amount}:${answer}`)
      return answer
    },
  })
  return { ran, agent: new Agent({ model: new ScriptedModel(turns), tools: [pay], systemPrompt: 'Pay.' }) }
}

describe('agent snapshots', () => {
  it('a snapshot is a versioned envelope whose fields are chosen by preset, include and exclude', async () => {
    const { agent } = approvalAgent([[{ text: 'hello' }]])
    await agent.invoke('hi')
    const full = agent.takeSnapshot({ preset: 'session', appData: { who: 'me' } })
    expect(full).toMatchObject({ scope: 'agent', schemaVersion: '1.0', appData: { who: 'me' } })
    expect(Object.keys(full.data).sort()).toEqual(['config', 'conversationManager', 'interrupts', 'messages', 'state'])
    expect(Object.keys(agent.takeSnapshot({ include: ['messages'] }).data).sort()).toEqual(['config', 'messages'])
    expect(Object.keys(agent.takeSnapshot({ exclude: ['messages', 'interrupts'] }).data).sort()).toEqual(['config', 'conversationManager', 'state'])
    expect(() => agent.takeSnapshot({ include: ['messages'], exclude: ['messages'] })).toThrow(/selection is empty/)
    expect(() => agent.takeSnapshot({ include: ['bogus' as never] })).toThrow(InvalidArgumentError)
  })

  it('interrupt state is persisted: a fresh agent loads it and takes the response', async () => {
    const first = approvalAgent([[useTool('p', 'pay', { amount: 9 })]])
    expect((await first.agent.invoke('pay 9')).stopReason).toBe('interrupt')
    const persisted = JSON.stringify(first.agent.takeSnapshot())

    const second = approvalAgent([[{ text: 'Paid.' }]])
    second.agent.loadSnapshot(JSON.parse(persisted) as ReturnType<Agent["takeSnapshot"]>)
    expect(second.agent.pendingInterrupts.map((i) => i.id)).toEqual(['p:approve'])
    const result = await second.agent.invoke([{ interruptResponse: { interruptId: 'p:approve', response: 'yes' } }])
    expect(String(result)).toBe('Paid.')
    expect(second.ran).toEqual(['9:yes'])
    expect(first.ran).toEqual([])
  })

  it('loading a snapshot from another configuration is refused unless allowed', async () => {
    const { agent } = approvalAgent([[{ text: 'x' }]])
    await agent.invoke('hi')
    const snapshot = agent.takeSnapshot()
    const other = new Agent({ model: new ScriptedModel([]), systemPrompt: 'Other.' })
    expect(() => other.loadSnapshot(snapshot)).toThrow(ConfigMismatchError)
    other.loadSnapshot(snapshot, { allowConfigChange: true })
    expect(other.messages).toEqual(agent.messages)
  })
})
