import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { Agent, Runner, tool, type ContentBlock, type Message, type RuntimeSnapshot } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel } from '../../src/testing.js'
import { useTempDirs } from '../support/temp-dirs.js'

const tempDir = useTempDirs('cairn-messages-')

async function tempDb(): Promise<string> {
  const dir = await tempDir()
  return join(dir, 'cairn.db')
}

const approve = tool({
  name: 'approve',
  description: 'Ask a human.',
  inputSchema: { type: 'object', properties: { what: { type: 'string' } }, required: ['what'] },
  callback: async (input, ctx) => `approved: ${String(ctx.interrupt({ name: 'approval', reason: (input as { what: string }).what }))}`,
})

const prices = { inputPerMillion: 2, outputPerMillion: 10, cacheReadPerMillion: 0.5, cacheWritePerMillion: 2.5 }

describe('the message model and run accounting', () => {
  it('sums usage and cost across a resume in a fresh runner and reports them in the result', async () => {
    const path = await tempDb()
    const turns = [
      { content: [{ toolUse: { toolUseId: 'c1', name: 'approve', input: { what: 'x' } } }], usage: { inputTokens: 1000, outputTokens: 100, totalTokens: 1100, cacheReadInputTokens: 600, cacheWriteInputTokens: 200, reasoningTokens: 40 } },
      { content: [{ text: 'ok' }], usage: { inputTokens: 2000, outputTokens: 50, totalTokens: 2050, cacheReadInputTokens: 1000 } },
    ]
    const build = () => {
      const model = Object.assign(new ScriptedModel(turns, { select: 'conversation' }), { prices })
      return { model, agent: new Agent({ name: 'a', model, tools: [approve] }) }
    }
    const first = build()
    const paused = await new Runner({ store: new SqliteStore({ path }) }).run(first.agent, { input: 'go', runId: 'cost' })
    expect(paused.state).toBe('paused')
    const cost1 = (200 * 2 + 600 * 0.5 + 200 * 2.5 + 100 * 10) / 1e6
    expect(paused.totalCostUsd).toBeCloseTo(cost1, 12)
    const second = build()
    const store = new SqliteStore({ path })
    const done = await new Runner({ store }).resume(second.agent, { runId: 'cost', responses: { 'c1:approval': 'yes' } })
    expect(second.model.calls).toHaveLength(1)
    const cost2 = (1000 * 2 + 1000 * 0.5 + 50 * 10) / 1e6
    expect(done.totalCostUsd).toBeCloseTo(cost1 + cost2, 12)
    expect(done.usage).toEqual({ inputTokens: 3000, outputTokens: 150, totalTokens: 3150, cacheReadInputTokens: 1600, cacheWriteInputTokens: 200, reasoningTokens: 40 })
    // The terminal checkpoint keeps them: a finished run reports the same figures.
    const again = await new Runner({ store }).resume(build().agent, { runId: 'cost' })
    expect(again.fromTerminalCheckpoint).toBe(true)
    expect(again.totalCostUsd).toBeCloseTo(cost1 + cost2, 12)
    expect(again.usage.cacheReadInputTokens).toBe(1600)
    await store.close()
  })

  it('round-trips reasoning, image, document blocks and provider metadata through a SQLite checkpoint', async () => {
    const path = await tempDb()
    const bytes = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0, 255])
    const input: ContentBlock[] = [
      { text: 'What is in these?', providerMetadata: { anthropic: { cacheControl: { type: 'ephemeral' } } } },
      { image: { mediaType: 'image/png', source: { bytes } } },
      { image: { mediaType: 'image/jpeg', source: { url: 'https://example.com/cat.jpg' } } },
      { document: { mediaType: 'application/pdf', source: { bytes }, name: 'report' } },
    ]
    const reply: ContentBlock[] = [
      { reasoning: { text: 'Looking closely.', signature: 'sig-abc==' } },
      { reasoning: { text: '', redactedContent: 'opaque-redacted' } },
      { toolUse: { toolUseId: 'c1', name: 'approve', input: { what: 'describe' } }, providerMetadata: { openai: { itemId: 'fc_1' } } },
    ]
    const build = () => {
      const model = new ScriptedModel([reply, [{ text: 'A cat.' }]], { select: 'conversation' })
      return { model, agent: new Agent({ name: 'a', model, tools: [approve] }) }
    }
    await new Runner({ store: new SqliteStore({ path }) }).run(build().agent, { input, runId: 'blocks' })
    const second = build()
    const store = new SqliteStore({ path })
    await new Runner({ store }).resume(second.agent, { runId: 'blocks', responses: { 'c1:approval': 'yes' } })
    const sent = second.model.calls[0]!.messages
    expect(sent[0]!.content).toEqual(input)
    expect((sent[0]!.content[1] as { image: { source: { bytes: Uint8Array } } }).image.source.bytes).toBeInstanceOf(Uint8Array)
    expect(sent[1]).toEqual({ role: 'assistant', content: reply } satisfies Message)
    const history = await new Runner({ store }).history('blocks')
    const postLlm = history.find((c) => c.phase === 'post_llm')!
    expect((postLlm.payload.runtime as RuntimeSnapshot).messages[1]!.content[0]).toEqual(reply[0])
    await store.close()
  })

  it('a conversation-selected script answers a fresh process by the assistant turns already held', async () => {
    const turns: ContentBlock[][] = [[{ text: 'one' }], [{ text: 'two' }]]
    const model = new ScriptedModel(turns, { select: 'conversation' })
    const agent = new Agent({ model, messages: [{ role: 'user', content: [{ text: 'a' }] }, { role: 'assistant', content: [{ text: 'one' }] }] })
    const result = await agent.invoke('b')
    expect(result.toString()).toBe('two')
    expect(model.calls).toHaveLength(1)
  })
})
