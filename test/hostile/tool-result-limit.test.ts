import { statSync } from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { Agent, configureLimits, DEFAULT_LIMITS, Runner, tool, type JsonValue, type Message, type Tool } from '../../src/index.js'
import { ScriptedModel } from '../../src/testing.js'
import { useTool } from '../agent/helpers.js'
import { sqliteStore } from '../runner/helpers.js'

afterEach(() => {
  configureLimits(DEFAULT_LIMITS)
})

function hugeAgent(size: number) {
  const dump = tool({
    name: 'dump',
    description: 'Return a very large result.',
    inputSchema: { type: 'object', properties: {} },
    callback: async () => 'x'.repeat(size),
  })
  const model = new ScriptedModel([[useTool('t1', 'dump', {})], [{ text: 'done' }]])
  return { agent: new Agent({ model, tools: [dump] }), model }
}

function toolResultTexts(messages: readonly Message[]): string[] {
  return messages.flatMap((m) => m.content.flatMap((b) => ('toolResult' in b ? b.toolResult.content.map((c) => ('text' in c ? c.text : JSON.stringify(c.json))) : [])))
}

describe('tool result limit', () => {
  it('a 50 MB result is truncated to the limit by default: the model, the journal and the database hold only the kept part', async () => {
    const { store, path } = await sqliteStore()
    const { agent, model } = hugeAgent(50 * 1024 * 1024)
    const result = await new Runner({ store }).run(agent, { input: 'go', runId: 'huge' })
    expect(result.state).toBe('completed')
    const seen = toolResultTexts(model.calls[1]!.messages)
    expect(seen).toHaveLength(1)
    expect(seen[0]!.length).toBeLessThan(DEFAULT_LIMITS.maxToolResultChars + 200)
    expect(seen[0]).toContain(`${50 * 1024 * 1024} characters, of which the first ${DEFAULT_LIMITS.maxToolResultChars} are kept`)
    const [effect] = await store.listEffects('huge')
    expect(JSON.stringify(effect!.output).length).toBeLessThan(DEFAULT_LIMITS.maxToolResultChars + 400)
    await store.close()
    expect(statSync(path).size).toBeLessThan(8 * 1024 * 1024)
  })

  it("under 'refuse' the model is told the result was too large and nothing of it is kept", async () => {
    configureLimits({ maxToolResultChars: 10_000, toolResultPolicy: 'refuse' })
    const { store } = await sqliteStore()
    const { agent, model } = hugeAgent(200_000)
    await new Runner({ store }).run(agent, { input: 'go', runId: 'refused' })
    const seen = toolResultTexts(model.calls[1]!.messages)
    expect(seen).toEqual([expect.stringContaining('returned a result of 200000 characters, more than the limit maxToolResultChars (10000)')])
    const [effect] = await store.listEffects('refused')
    expect(effect!.status).toBe('failed')
    await store.close()
  })

  it('a result within the limit is kept whole', async () => {
    configureLimits({ maxToolResultChars: 10_000 })
    const { store } = await sqliteStore()
    const { agent, model } = hugeAgent(10_000)
    await new Runner({ store }).run(agent, { input: 'go', runId: 'fits' })
    expect(toolResultTexts(model.calls[1]!.messages)).toEqual(['x'.repeat(10_000)])
    await store.close()
  })
})

function deeply(levels: number): unknown {
  let value: unknown = 'bottom'
  for (let i = 0; i < levels; i++) value = { next: value }
  return value
}

function cyclic(): unknown {
  const node: Record<string, unknown> = { name: 'loop' }
  node.self = node
  return node
}

/** A tool written against the Tool interface by hand, whose result holds a cycle in a JSON block. */
function handWrittenCyclicTool(): Tool {
  const made = tool({ name: 'graph', description: 'Return a graph.', inputSchema: { type: 'object', properties: {} }, callback: () => 'unused' })
  return { ...made, run: async (toolUse) => ({ toolUseId: toolUse.toolUseId, status: 'success', content: [{ json: cyclic() as JsonValue }] }) }
}

describe('tool results that cannot be stored', () => {
  const returning = (value: () => unknown): Tool => tool({ name: 'odd', description: 'Return something odd.', inputSchema: { type: 'object', properties: {} }, callback: value })
  const cases: { name: string; tool: () => Tool; toolName: string; reason: RegExp }[] = [
    { name: 'nested deeper than maxDepth', tool: () => returning(() => deeply(DEFAULT_LIMITS.maxDepth + 20)), toolName: 'odd', reason: /deeper|depth/i },
    { name: 'with a cycle', tool: () => returning(cyclic), toolName: 'odd', reason: /cycle|circular/i },
    { name: 'holding a function', tool: () => returning(() => ({ callback: () => 1 })), toolName: 'odd', reason: /function/ },
    { name: 'holding a BigInt longer than maxBigIntDigits', tool: () => returning(() => ({ big: 10n ** 20_000n })), toolName: 'odd', reason: /BigInt|digits/ },
    { name: 'with a cycle, from a tool written by hand', tool: handWrittenCyclicTool, toolName: 'graph', reason: /cycle|circular/i },
  ]
  for (const c of cases) {
    it(`a result ${c.name} becomes an error result the model sees, and the journal records it as failed`, async () => {
      const { store } = await sqliteStore()
      const model = new ScriptedModel([[useTool('t1', c.toolName, {})], [{ text: 'understood' }]])
      const result = await new Runner({ store }).run(new Agent({ model, tools: [c.tool()] }), { input: 'go', runId: 'odd' })
      expect(result.state).toBe('completed')
      const seen = toolResultTexts(model.calls[1]!.messages)
      expect(seen).toEqual([expect.stringContaining(`Tool ${c.toolName} returned a result that cannot be stored`)])
      expect(seen[0]).toMatch(c.reason)
      const [effect] = await store.listEffects('odd')
      expect(effect!.status).toBe('failed')
      expect(JSON.stringify(effect!.output)).toContain('cannot be stored')
      await store.close()
    })
  }
})
