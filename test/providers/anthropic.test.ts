import { beforeEach, describe, expect, it } from 'vitest'
import { Agent, ModelError } from '../../src/index.js'
import { AnthropicModel } from '../../src/anthropic.js'
import { anthropicError, anthropicStream } from './anthropic-wire.js'
import { IMAGE_BYTES, SECRET_KEY, useReplayServer, weatherTool } from './helpers.js'

const server = useReplayServer()
beforeEach(() => {
  server.requests.length = 0
})

const model = (extra: Partial<ConstructorParameters<typeof AnthropicModel>[0]> = {}) =>
  new AnthropicModel({ model: 'claude-haiku-4-5', apiKey: SECRET_KEY, baseURL: server.url, maxRetries: 2, ...extra })
type Body = { messages: { role: string; content: Record<string, unknown>[] }[]; [key: string]: unknown }
const bodyOf = (n: number) => server.requests[n]!.body as Body

describe('AnthropicModel against the real @anthropic-ai/sdk client', () => {
  it('streams text with usage, cache reads and writes counted in the input', async () => {
    server.enqueue(anthropicStream({ blocks: [{ text: 'Bonjour — ça va? ✓' }], usage: { input: 10, cacheRead: 300, cacheWrite: 50, output: 8 } }))
    const result = await new Agent({ model: model({ cache: { system: true } }), systemPrompt: 'Be brief.' }).invoke('hi')
    expect(result.toString()).toBe('Bonjour — ça va? ✓')
    expect(result.metrics.usage).toEqual({ inputTokens: 360, outputTokens: 8, totalTokens: 368, cacheReadInputTokens: 300, cacheWriteInputTokens: 50 })
    expect(server.requests[0]!.path).toBe('/v1/messages')
    expect(Object.values(server.requests[0]!.headers).join(' ')).toContain(SECRET_KEY)
    expect(bodyOf(0)).toMatchObject({ model: 'claude-haiku-4-5', max_tokens: 4096, stream: true, system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }] })
  })

  it('streams several tool uses with input_json_delta and sends tool results back', async () => {
    server.enqueue(
      anthropicStream({ blocks: [{ text: 'Checking.' }, { toolUse: { id: 'toolu_1', name: 'get_weather', json: '{"city": "Quito"}' } }, { toolUse: { id: 'toolu_2', name: 'get_weather', json: '{"city":"Accra"}' } }] }),
      anthropicStream({ id: 'msg_02', blocks: [{ text: 'Both warm.' }] }),
    )
    const cities: string[] = []
    const agent = new Agent({ model: model({ cache: { tools: true } }), tools: [weatherTool(cities)] })
    const result = await agent.invoke('Quito and Accra?')
    expect(result.toString()).toBe('Both warm.')
    expect(cities.sort()).toEqual(['Accra', 'Quito'])
    expect(bodyOf(1).tools).toEqual([{ name: 'get_weather', description: 'The weather in a city.', input_schema: expect.any(Object) as object, cache_control: { type: 'ephemeral' } }])
    expect(bodyOf(1).messages.slice(1)).toEqual([
      { role: 'assistant', content: [{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Quito' } }, { type: 'tool_use', id: 'toolu_2', name: 'get_weather', input: { city: 'Accra' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'Sunny in Quito' }, { type: 'tool_result', tool_use_id: 'toolu_2', content: 'Sunny in Accra' }] },
    ])
  })

  it('keeps thinking with its signature and redacted thinking, and sends both back verbatim', async () => {
    const signature = 'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds/3vBUK+n0+Zc1X+M='
    server.enqueue(
      anthropicStream({ blocks: [{ thinking: 'The user wants weather; call the tool.', signature }, { redacted: 'EmwKAhgBEgy3va3pzix/LafPsn4a' }, { toolUse: { id: 'toolu_9', name: 'get_weather', json: '{"city":"Pune"}' } }] }),
      anthropicStream({ id: 'msg_02', blocks: [{ text: 'Hot.' }] }),
    )
    const agent = new Agent({ model: model({ thinking: { type: 'enabled', budget_tokens: 1024 } }), tools: [weatherTool()] })
    await agent.invoke('Pune?')
    expect(agent.messages[1]!.content.slice(0, 2)).toEqual([
      { reasoning: { text: 'The user wants weather; call the tool.', signature } },
      { reasoning: { text: '', redactedContent: 'EmwKAhgBEgy3va3pzix/LafPsn4a' } },
    ])
    expect(bodyOf(0).thinking).toEqual({ type: 'enabled', budget_tokens: 1024 })
    expect(bodyOf(1).messages[1]!.content.slice(0, 2)).toEqual([
      { type: 'thinking', thinking: 'The user wants weather; call the tool.', signature },
      { type: 'redacted_thinking', data: 'EmwKAhgBEgy3va3pzix/LafPsn4a' },
    ])
  })

  it('sends images and documents as base64 or URL sources, with cache markers from block metadata', async () => {
    server.enqueue(anthropicStream({ blocks: [{ text: 'A chart.' }] }))
    await new Agent({ model: model() }).invoke([
      { text: 'Describe.', providerMetadata: { anthropic: { cacheControl: { type: 'ephemeral' } } } },
      { image: { mediaType: 'image/png', source: { bytes: IMAGE_BYTES } } },
      { image: { mediaType: 'image/jpeg', source: { url: 'https://example.com/a.jpg' } } },
      { document: { mediaType: 'application/pdf', source: { bytes: IMAGE_BYTES }, name: 'report' } },
    ])
    expect(bodyOf(0).messages[0]!.content).toEqual([
      { type: 'text', text: 'Describe.', cache_control: { type: 'ephemeral' } },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: Buffer.from(IMAGE_BYTES).toString('base64') } },
      { type: 'image', source: { type: 'url', url: 'https://example.com/a.jpg' } },
      { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: Buffer.from(IMAGE_BYTES).toString('base64') }, title: 'report' },
    ])
  })

  it('retries 529 overloaded and 429 through the client, honouring retry-after', async () => {
    server.enqueue(
      anthropicError(529, 'overloaded_error', 'Overloaded', { 'retry-after-ms': '10' }),
      anthropicError(429, 'rate_limit_error', 'Slow down', { 'retry-after': '0.01' }),
      anthropicStream({ blocks: [{ text: 'finally' }] }),
    )
    const result = await new Agent({ model: model() }).invoke('hi')
    expect(result.toString()).toBe('finally')
    expect(server.requests).toHaveLength(3)
  })

  it('a cut stream, or an error event in the stream, is a ModelError and adds no message', async () => {
    server.enqueue({ ...anthropicStream({ id: 'msg_cut', blocks: [{ text: 'This will be cut off before it completes, mid event.' }] }), cutAfterBytes: 800 })
    const agent = new Agent({ model: model({ maxRetries: 0 }) })
    const err = await agent.invoke('hi').catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ModelError)
    expect(err).toMatchObject({ provider: 'anthropic', model: 'claude-haiku-4-5', status: 200, requestId: 'req_msg_cut' })
    expect(agent.messages).toHaveLength(1)
    const broken = anthropicStream({ id: 'msg_err', blocks: [{ text: 'partial' }] })
    broken.sse = [...broken.sse!.slice(0, 4), { event: 'error', data: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } }]
    server.enqueue(broken)
    const err2 = await agent.invoke('again').catch((e: unknown) => e)
    expect(err2).toBeInstanceOf(ModelError)
    expect(agent.messages.map((m) => m.role)).toEqual(['user', 'user'])
  })

  it('the abort signal aborts the HTTP request and the invocation ends cancelled', async () => {
    const gone = new Promise<void>((resolve) => (server.onClientGone = resolve))
    server.enqueue({ ...anthropicStream({ blocks: [{ text: 'never finishing' }] }), holdAfterBytes: 400 })
    const controller = new AbortController()
    const running = new Agent({ model: model() }).invoke('hi', { signal: controller.signal })
    while (server.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 5))
    controller.abort()
    expect((await running).stopReason).toBe('cancelled')
    await gone
  })

  it('maps max_tokens and refusal onto stop reasons, and keeps the key out of errors', async () => {
    server.enqueue(anthropicStream({ blocks: [{ text: 'trunc' }], stop: 'max_tokens' }), anthropicStream({ blocks: [{ text: 'No.' }], stop: 'refusal' }), anthropicError(401, 'authentication_error', `invalid x-api-key ${SECRET_KEY}`))
    expect((await new Agent({ model: model() }).invoke('a')).stopReason).toBe('max_tokens')
    expect((await new Agent({ model: model() }).invoke('b')).stopReason).toBe('refusal')
    const err = (await new Agent({ model: model() }).invoke('c').catch((e: unknown) => e)) as ModelError
    expect(err.status).toBe(401)
    expect(err.requestId).toBe('req_err_401')
    expect(`${err.message}\n${err.stack}`).not.toContain(SECRET_KEY.slice(5))
  })
})
