import { describe, expect, it } from 'vitest'
import { Agent, MemoryStore, Runner, type Model, type RunEvent } from '../../src/index.js'
import { AnthropicModel } from '../../src/anthropic.js'
import { OpenAIChatModel, OpenAIResponsesModel } from '../../src/openai.js'
import { anthropicStream } from '../providers/anthropic-wire.js'
import { SECRET_KEY, useReplayServer } from '../providers/helpers.js'
import { chatStream, responsesStream } from '../providers/openai-wire.js'

const server = useReplayServer()
const ANSWER = 'Revenue grew twelve percent — ünïcødé ✓ — in the fourth quarter.'

async function deltasThrough(model: Model, runId: string): Promise<{ live: RunEvent[]; stored: RunEvent[] }> {
  const store = new MemoryStore()
  const runner = new Runner({ store })
  const live: RunEvent[] = []
  for await (const event of runner.stream(new Agent({ model, name: 'analyst' }), { input: 'Q4?', runId })) live.push(event)
  const stored: RunEvent[] = []
  for await (const { event } of runner.events(runId)) stored.push(event)
  await store.close()
  return { live, stored }
}

const textOf = (events: RunEvent[], type: 'text_delta' | 'reasoning_delta') => events.flatMap((e) => (e.type === type ? [e.text] : [])).join('')

describe('provider adapters stream text and reasoning deltas into run streams', () => {
  it('OpenAI Responses', async () => {
    server.enqueue(responsesStream({ text: ANSWER }))
    const { live, stored } = await deltasThrough(new OpenAIResponsesModel({ model: 'gpt-5-mini', apiKey: SECRET_KEY, baseURL: `${server.url}/v1` }), 'responses')
    expect(live.filter((e) => e.type === 'text_delta').length).toBeGreaterThan(1)
    expect(textOf(live, 'text_delta')).toBe(ANSWER)
    expect(textOf(stored, 'text_delta')).toBe(ANSWER)
  })

  it('OpenAI chat completions', async () => {
    server.enqueue(chatStream({ text: ANSWER }))
    const { live, stored } = await deltasThrough(new OpenAIChatModel({ model: 'gpt-4.1-mini', apiKey: SECRET_KEY, baseURL: `${server.url}/v1` }), 'chat')
    expect(live.filter((e) => e.type === 'text_delta').length).toBeGreaterThan(1)
    expect(textOf(stored, 'text_delta')).toBe(ANSWER)
  })

  it('Anthropic, thinking included', async () => {
    server.enqueue(anthropicStream({ blocks: [{ thinking: 'Twelve is the figure.', signature: 'sig' }, { text: ANSWER }], usage: { input: 10, output: 8 } }))
    const { live, stored } = await deltasThrough(new AnthropicModel({ model: 'claude-haiku-4-5', apiKey: SECRET_KEY, baseURL: server.url }), 'anthropic')
    expect(textOf(live, 'text_delta')).toBe(ANSWER)
    expect(textOf(stored, 'reasoning_delta')).toBe('Twelve is the figure.')
    expect(textOf(stored, 'text_delta')).toBe(ANSWER)
  })
})
