import { statSync } from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { Agent, configureLimits, DEFAULT_LIMITS, Runner, tool, type Message } from '../../src/index.js'
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
