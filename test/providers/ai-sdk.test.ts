import { createAnthropic } from '@ai-sdk/anthropic'
import type { LanguageModelV2, LanguageModelV2StreamPart, LanguageModelV3StreamPart } from '@ai-sdk/provider'
import { simulateReadableStream } from 'ai'
import { MockLanguageModelV3 } from 'ai/test'
import { beforeEach, describe, expect, it } from 'vitest'
import { Agent, ModelError } from '../../src/index.js'
import { AISDKModel, type LanguageModelV4Slice } from '../../src/ai-sdk.js'
import { anthropicError, anthropicStream } from './anthropic-wire.js'
import { IMAGE_BYTES, SECRET_KEY, useReplayServer, weatherTool } from './helpers.js'

const server = useReplayServer()
beforeEach(() => {
  server.requests.length = 0
})

const viaAnthropic = (options: ConstructorParameters<typeof AISDKModel>[1] = {}) =>
  new AISDKModel(createAnthropic({ apiKey: SECRET_KEY, baseURL: `${server.url}/v1` })('claude-haiku-4-5'), options)
type Body = { messages: { role: string; content: Record<string, unknown>[] }[]; [key: string]: unknown }
const bodyOf = (n: number) => server.requests[n]!.body as Body

describe('AISDKModel over @ai-sdk/anthropic against the replay server', () => {
  it('streams text with usage and cache tokens, and names the model provider:model', async () => {
    server.enqueue(anthropicStream({ blocks: [{ text: 'Hi from the AI SDK ✓' }], usage: { input: 10, cacheRead: 90, cacheWrite: 5, output: 6 } }))
    const model = viaAnthropic()
    expect(model.modelId).toBe('ai-sdk:anthropic.messages:claude-haiku-4-5')
    const result = await new Agent({ model, systemPrompt: 'Short.' }).invoke('hi')
    expect(result.toString()).toBe('Hi from the AI SDK ✓')
    expect(result.metrics.usage).toMatchObject({ inputTokens: 105, outputTokens: 6, cacheReadInputTokens: 90, cacheWriteInputTokens: 5 })
    expect(bodyOf(0)).toMatchObject({ model: 'claude-haiku-4-5', stream: true })
  })

  it('streams several tool calls without duplicating them, and sends results back with the tool name', async () => {
    server.enqueue(
      anthropicStream({ blocks: [{ toolUse: { id: 'toolu_1', name: 'get_weather', json: '{"city":"Nairobi"}' } }, { toolUse: { id: 'toolu_2', name: 'get_weather', json: '{"city":"Hanoi"}' } }] }),
      anthropicStream({ id: 'msg_2', blocks: [{ text: 'Warm in both.' }] }),
    )
    const cities: string[] = []
    const agent = new Agent({ model: viaAnthropic(), tools: [weatherTool(cities)] })
    const result = await agent.invoke('Nairobi and Hanoi?')
    expect(result.toString()).toBe('Warm in both.')
    expect(cities.sort()).toEqual(['Hanoi', 'Nairobi'])
    expect(agent.messages[1]!.content.map((b) => ('toolUse' in b ? b.toolUse : b))).toEqual([
      { toolUseId: 'toolu_1', name: 'get_weather', input: { city: 'Nairobi' } },
      { toolUseId: 'toolu_2', name: 'get_weather', input: { city: 'Hanoi' } },
    ])
    expect(bodyOf(1).messages[2]!.content).toMatchObject([
      { type: 'tool_result', tool_use_id: 'toolu_1' },
      { type: 'tool_result', tool_use_id: 'toolu_2' },
    ])
  })

  it('keeps the thinking signature in provider metadata and sends it back verbatim', async () => {
    const signature = 'ErUBCkYIBxgCIkD+signature+for+the+ai+sdk=='
    server.enqueue(
      anthropicStream({ blocks: [{ thinking: 'Use the tool.', signature }, { toolUse: { id: 'toolu_5', name: 'get_weather', json: '{"city":"Lagos"}' } }] }),
      anthropicStream({ id: 'msg_2', blocks: [{ text: 'Humid.' }] }),
    )
    const agent = new Agent({ model: viaAnthropic({ providerOptions: { anthropic: { thinking: { type: 'enabled', budgetTokens: 1024 } } } }), tools: [weatherTool()] })
    await agent.invoke('Lagos?')
    expect(agent.messages[1]!.content[0]).toEqual({ reasoning: { text: 'Use the tool.' }, providerMetadata: { anthropic: { signature } } })
    expect(bodyOf(0).thinking).toEqual({ type: 'enabled', budget_tokens: 1024 })
    expect(bodyOf(1).messages[1]!.content[0]).toEqual({ type: 'thinking', thinking: 'Use the tool.', signature })
  })

  it('sends images as file parts', async () => {
    server.enqueue(anthropicStream({ blocks: [{ text: 'A logo.' }] }))
    await new Agent({ model: viaAnthropic() }).invoke([{ text: 'What?' }, { image: { mediaType: 'image/png', source: { bytes: IMAGE_BYTES } } }])
    expect(bodyOf(0).messages[0]!.content).toEqual([
      { type: 'text', text: 'What?' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: Buffer.from(IMAGE_BYTES).toString('base64') } },
    ])
  })

  it('retries a 529 the provider marks retryable, honouring retry-after-ms', async () => {
    server.enqueue(anthropicError(529, 'overloaded_error', 'Overloaded', { 'retry-after-ms': '10' }), anthropicStream({ blocks: [{ text: 'ok' }] }))
    expect((await new Agent({ model: viaAnthropic() }).invoke('hi')).toString()).toBe('ok')
    expect(server.requests).toHaveLength(2)
  })

  it('a cut stream is a ModelError and adds no message; a 401 keeps the key out of the error', async () => {
    server.enqueue({ ...anthropicStream({ blocks: [{ text: 'a long answer cut off before its end arrives' }] }), cutAfterBytes: 700 }, anthropicError(401, 'authentication_error', `bad key ${SECRET_KEY}`))
    const agent = new Agent({ model: viaAnthropic({ maxRetries: 0 }) })
    const err = await agent.invoke('hi').catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ModelError)
    expect(agent.messages).toHaveLength(1)
    const denied = (await agent.invoke('again').catch((e: unknown) => e)) as ModelError
    expect(denied.status).toBe(401)
    expect(`${denied.message}`).not.toContain(SECRET_KEY.slice(5))
  })

  it('the abort signal aborts the HTTP request and ends the invocation cancelled', async () => {
    const gone = new Promise<void>((resolve) => (server.onClientGone = resolve))
    server.enqueue({ ...anthropicStream({ blocks: [{ text: 'never finishing' }] }), holdAfterBytes: 400 })
    const controller = new AbortController()
    const running = new Agent({ model: viaAnthropic() }).invoke('hi', { signal: controller.signal })
    while (server.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 5))
    controller.abort()
    expect((await running).stopReason).toBe('cancelled')
    await gone
  })
})

describe('AISDKModel on the AI SDK mock and each specification version', () => {
  const usage = { inputTokens: { total: 30, noCache: 20, cacheRead: 10, cacheWrite: 0 }, outputTokens: { total: 12, text: 4, reasoning: 8 } }
  const v3Parts: LanguageModelV3StreamPart[] = [
    { type: 'stream-start', warnings: [] },
    { type: 'reasoning-start', id: 'r1' },
    { type: 'reasoning-delta', id: 'r1', delta: 'thinking…' },
    { type: 'reasoning-end', id: 'r1', providerMetadata: { test: { sig: 'abc' } } },
    { type: 'tool-input-start', id: 'call-1', toolName: 'get_weather' },
    { type: 'tool-input-delta', id: 'call-1', delta: '{"city":' },
    { type: 'tool-input-delta', id: 'call-1', delta: '"Bern"}' },
    { type: 'tool-input-end', id: 'call-1' },
    { type: 'tool-call', toolCallId: 'call-1', toolName: 'get_weather', input: '{"city":"Bern"}' },
    { type: 'tool-call', toolCallId: 'call-2', toolName: 'get_weather', input: '{"city":"Graz"}' },
    { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
  ]

  it('MockLanguageModelV3: tool calls arriving streamed and whole are taken once; a stop with calls is tool_use', async () => {
    const mock = new MockLanguageModelV3({
      doStream: [
        { stream: simulateReadableStream({ chunks: v3Parts }) },
        { stream: simulateReadableStream({ chunks: [{ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 'Cold.' }, { type: 'text-end', id: 't' }, { type: 'finish', finishReason: { unified: 'stop', raw: undefined }, usage }] as LanguageModelV3StreamPart[] }) },
      ],
    })
    const cities: string[] = []
    const agent = new Agent({ model: new AISDKModel(mock), tools: [weatherTool(cities)] })
    const result = await agent.invoke('Bern and Graz?')
    expect(result.toString()).toBe('Cold.')
    expect(cities.sort()).toEqual(['Bern', 'Graz'])
    expect(agent.messages[1]!.content).toEqual([
      { reasoning: { text: 'thinking…' }, providerMetadata: { test: { sig: 'abc' } } },
      { toolUse: { toolUseId: 'call-1', name: 'get_weather', input: { city: 'Bern' } } },
      { toolUse: { toolUseId: 'call-2', name: 'get_weather', input: { city: 'Graz' } } },
    ])
    expect(result.metrics.usage).toMatchObject({ inputTokens: 60, cacheReadInputTokens: 20, reasoningTokens: 16 })
    const prompt = mock.doStreamCalls[1]!.prompt
    expect(prompt[1]).toEqual({
      role: 'assistant',
      content: [
        { type: 'reasoning', text: 'thinking…', providerOptions: { test: { sig: 'abc' } } },
        { type: 'tool-call', toolCallId: 'call-1', toolName: 'get_weather', input: { city: 'Bern' } },
        { type: 'tool-call', toolCallId: 'call-2', toolName: 'get_weather', input: { city: 'Graz' } },
      ],
    })
    expect(prompt[2]).toEqual({
      role: 'tool',
      content: [
        { type: 'tool-result', toolCallId: 'call-1', toolName: 'get_weather', output: { type: 'text', value: 'Sunny in Bern' } },
        { type: 'tool-result', toolCallId: 'call-2', toolName: 'get_weather', output: { type: 'text', value: 'Sunny in Graz' } },
      ],
    })
  })

  it('MockLanguageModelV3: length and content-filter are stop reasons, an error part is a ModelError', async () => {
    const finish = (unified: 'length' | 'content-filter'): LanguageModelV3StreamPart[] => [
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: 'x' },
      { type: 'finish', finishReason: { unified, raw: undefined }, usage: { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } } },
    ]
    const mock = new MockLanguageModelV3({
      doStream: [
        { stream: simulateReadableStream({ chunks: finish('length') }) },
        { stream: simulateReadableStream({ chunks: finish('content-filter') }) },
        { stream: simulateReadableStream({ chunks: [{ type: 'text-start', id: 't' }, { type: 'error', error: new Error('overloaded mid-stream') }] as LanguageModelV3StreamPart[] }) },
      ],
    })
    const model = new AISDKModel(mock)
    expect((await new Agent({ model }).invoke('a')).stopReason).toBe('max_tokens')
    expect((await new Agent({ model }).invoke('b')).stopReason).toBe('content_filtered')
    const agent = new Agent({ model })
    await expect(agent.invoke('c')).rejects.toBeInstanceOf(ModelError)
    expect(agent.messages).toHaveLength(1)
  })

  it('LanguageModelV2: string finish reasons and flat usage; files as raw data', async () => {
    const calls: unknown[] = []
    const parts: LanguageModelV2StreamPart[] = [
      { type: 'stream-start', warnings: [] },
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: 'v2 says hi' },
      { type: 'text-end', id: 't' },
      { type: 'finish', finishReason: 'stop', usage: { inputTokens: 7, outputTokens: 3, totalTokens: 10, cachedInputTokens: 2, reasoningTokens: 1 } },
    ]
    const v2: LanguageModelV2 = {
      specificationVersion: 'v2',
      provider: 'legacy',
      modelId: 'old-1',
      supportedUrls: {},
      doGenerate: () => Promise.reject(new Error('not used')),
      doStream: async (options) => {
        calls.push(options.prompt)
        return { stream: simulateReadableStream({ chunks: parts }) }
      },
    }
    const result = await new Agent({ model: new AISDKModel(v2) }).invoke([{ text: 'look' }, { image: { mediaType: 'image/png', source: { bytes: IMAGE_BYTES } } }])
    expect(result.toString()).toBe('v2 says hi')
    expect(result.metrics.usage).toEqual({ inputTokens: 7, outputTokens: 3, totalTokens: 10, cacheReadInputTokens: 2, reasoningTokens: 1 })
    expect((calls[0] as { content: unknown[] }[])[0]!.content[1]).toEqual({ type: 'file', mediaType: 'image/png', data: IMAGE_BYTES })
  })

  it('LanguageModelV4: files as tagged data, and the v4 interrupted finish passes through', async () => {
    const calls: unknown[] = []
    const v4: LanguageModelV4Slice = {
      specificationVersion: 'v4',
      provider: 'next',
      modelId: 'new-1',
      doStream: async (options) => {
        calls.push(options.prompt)
        const chunks = [
          { type: 'text-start', id: 't' },
          { type: 'text-delta', id: 't', delta: 'v4' },
          { type: 'finish', finishReason: { unified: 'interrupted', raw: undefined }, usage: { inputTokens: { total: 2, noCache: 2, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } } },
        ] as unknown as LanguageModelV3StreamPart[]
        return { stream: simulateReadableStream({ chunks }) }
      },
    }
    const model = new AISDKModel(v4)
    expect(model.modelId).toBe('ai-sdk:next:new-1')
    const result = await new Agent({ model }).invoke([{ image: { mediaType: 'image/png', source: { url: 'https://example.com/x.png' } } }])
    expect(result.stopReason).toBe('interrupted')
    expect((calls[0] as { content: unknown[] }[])[0]!.content[0]).toEqual({ type: 'file', mediaType: 'image/png', data: { type: 'url', url: new URL('https://example.com/x.png') } })
    expect(() => new AISDKModel({ specificationVersion: 'v1' } as never)).toThrow(/v2, v3 or v4/)
  })
})
