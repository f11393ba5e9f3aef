import { beforeEach, describe, expect, it } from 'vitest'
import { Agent, MemoryStore, ModelError, Runner, tool, type ContentBlock } from '../../src/index.js'
import { OpenAIChatModel, OpenAIResponsesModel } from '../../src/openai.js'
import { IMAGE_BYTES, SECRET_KEY, useReplayServer, weatherTool } from './helpers.js'
import { chatStream, openAIError, responsesStream } from './openai-wire.js'

const server = useReplayServer()
beforeEach(() => {
  server.requests.length = 0
})

const responses = (extra: Partial<ConstructorParameters<typeof OpenAIResponsesModel>[0]> = {}) =>
  new OpenAIResponsesModel({ model: 'gpt-5-mini', apiKey: SECRET_KEY, baseURL: `${server.url}/v1`, maxRetries: 2, ...extra })

type Body = { input: Record<string, unknown>[]; [key: string]: unknown }
const bodyOf = (n: number) => server.requests[n]!.body as Body

describe('OpenAIResponsesModel against the real openai client', () => {
  it('streams a text answer with usage, cached and reasoning tokens included', async () => {
    server.enqueue(responsesStream({ text: 'Hello from the Responses API — ünïcødé ✓', usage: { input: 120, cached: 100, output: 30, reasoning: 12 } }))
    const agent = new Agent({ model: responses(), systemPrompt: 'Be brief.' })
    const result = await agent.invoke('Say hello')
    expect(result.toString()).toBe('Hello from the Responses API — ünïcødé ✓')
    expect(result.stopReason).toBe('end_turn')
    expect(result.metrics.usage).toEqual({ inputTokens: 120, outputTokens: 30, totalTokens: 150, cacheReadInputTokens: 100, reasoningTokens: 12 })
    const body = bodyOf(0)
    expect(server.requests[0]!.path).toBe('/v1/responses')
    expect(body).toMatchObject({ model: 'gpt-5-mini', stream: true, store: false, instructions: 'Be brief.' })
    expect(body.input).toEqual([{ role: 'user', content: [{ type: 'input_text', text: 'Say hello' }] }])
    expect(result.message?.content[0]).toEqual({ text: 'Hello from the Responses API — ünïcødé ✓', providerMetadata: { openai: { itemId: 'msg_0' } } })
  })

  it('streams several tool calls with argument deltas, runs them, and sends the outputs back', async () => {
    server.enqueue(
      responsesStream({ calls: [
        { id: 'fc_1', callId: 'call_a', name: 'get_weather', args: '{"city":"Paris"}' },
        { id: 'fc_2', callId: 'call_b', name: 'get_weather', args: '{"city":"Oslo"}' },
      ] }),
      responsesStream({ id: 'resp_2', text: 'Both sunny.' }),
    )
    const cities: string[] = []
    const agent = new Agent({ model: responses(), tools: [weatherTool(cities)] })
    const result = await agent.invoke('Weather in Paris and Oslo?')
    expect(result.toString()).toBe('Both sunny.')
    expect(cities.sort()).toEqual(['Oslo', 'Paris'])
    expect(agent.messages[1]!.content).toEqual([
      { toolUse: { toolUseId: 'call_a', name: 'get_weather', input: { city: 'Paris' } }, providerMetadata: { openai: { itemId: 'fc_1' } } },
      { toolUse: { toolUseId: 'call_b', name: 'get_weather', input: { city: 'Oslo' } }, providerMetadata: { openai: { itemId: 'fc_2' } } },
    ])
    const second = bodyOf(1)
    expect(second.tools).toEqual([{ type: 'function', name: 'get_weather', description: 'The weather in a city.', parameters: expect.any(Object) as object, strict: false }])
    expect(second.input.slice(1)).toEqual([
      { type: 'function_call', call_id: 'call_a', name: 'get_weather', arguments: '{"city":"Paris"}', id: 'fc_1' },
      { type: 'function_call', call_id: 'call_b', name: 'get_weather', arguments: '{"city":"Oslo"}', id: 'fc_2' },
      { type: 'function_call_output', call_id: 'call_a', output: 'Sunny in Paris' },
      { type: 'function_call_output', call_id: 'call_b', output: 'Sunny in Oslo' },
    ])
  })

  it('keeps reasoning with its encrypted content and sends it back verbatim on the next turn', async () => {
    server.enqueue(
      responsesStream({ reasoning: { id: 'rs_1', summary: ['Need weather.', 'Call the tool.'], encrypted: 'gAAAA-opaque==' }, calls: [{ id: 'fc_1', callId: 'call_a', name: 'get_weather', args: '{"city":"Rome"}' }] }),
      responsesStream({ id: 'resp_2', text: 'Sunny.' }),
    )
    const agent = new Agent({ model: responses({ reasoning: { effort: 'low', summary: 'auto' } }), tools: [weatherTool()] })
    await agent.invoke('Rome?')
    expect(agent.messages[1]!.content[0]).toEqual({
      reasoning: { text: 'Need weather.\n\nCall the tool.', redactedContent: 'gAAAA-opaque==' },
      providerMetadata: { openai: { itemId: 'rs_1', summary: ['Need weather.', 'Call the tool.'] } },
    })
    expect(bodyOf(0).include).toEqual(['reasoning.encrypted_content'])
    expect(bodyOf(1).input[1]).toEqual({
      type: 'reasoning',
      id: 'rs_1',
      summary: [{ type: 'summary_text', text: 'Need weather.' }, { type: 'summary_text', text: 'Call the tool.' }],
      encrypted_content: 'gAAAA-opaque==',
    })
  })

  it('sends images inline as data URLs and by URL', async () => {
    server.enqueue(responsesStream({ text: 'A cat.' }))
    const prompt: ContentBlock[] = [
      { text: 'What is this?' },
      { image: { mediaType: 'image/png', source: { bytes: IMAGE_BYTES } } },
      { image: { mediaType: 'image/jpeg', source: { url: 'https://example.com/cat.jpg' } } },
    ]
    await new Agent({ model: responses() }).invoke(prompt)
    expect(bodyOf(0).input[0]).toEqual({
      role: 'user',
      content: [
        { type: 'input_text', text: 'What is this?' },
        { type: 'input_image', image_url: `data:image/png;base64,${Buffer.from(IMAGE_BYTES).toString('base64')}`, detail: 'auto' },
        { type: 'input_image', image_url: 'https://example.com/cat.jpg', detail: 'auto' },
      ],
    })
  })

  it('retries a 429 through the client, honouring retry-after, and answers', async () => {
    server.enqueue(openAIError(429, 'Rate limit reached', { headers: { 'retry-after-ms': '20' } }), responsesStream({ text: 'ok' }))
    const result = await new Agent({ model: responses() }).invoke('hi')
    expect(result.toString()).toBe('ok')
    expect(server.requests).toHaveLength(2)
  })

  it('retries a connection reset before the first byte', async () => {
    server.enqueue({ json: {}, cutAfterBytes: 0 }, responsesStream({ text: 'after the reset' }))
    expect((await new Agent({ model: responses() }).invoke('hi')).toString()).toBe('after the reset')
    expect(server.requests).toHaveLength(2)
  })

  it('a stream cut in the middle is a ModelError with status and request id, and no message is added', async () => {
    const replay = responsesStream({ id: 'resp_cut', text: 'This answer will never finish arriving at the client' })
    server.enqueue({ ...replay, cutAfterBytes: 900 })
    const agent = new Agent({ model: responses({ maxRetries: 0 }) })
    const err = await agent.invoke('hi').catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ModelError)
    expect(err).toMatchObject({ provider: 'openai', model: 'gpt-5-mini', status: 200, requestId: 'req_resp_cut' })
    expect(agent.messages.map((m) => m.role)).toEqual(['user'])
  })

  it('a body that is not an event stream is a ModelError', async () => {
    server.enqueue({ headers: { 'content-type': 'text/event-stream', 'x-request-id': 'req_bad' }, raw: 'data: {"type":"response.created","response":{"id":\n\n' })
    const err = await new Agent({ model: responses({ maxRetries: 0 }) }).invoke('hi').catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ModelError)
    expect((err as ModelError).requestId).toBe('req_bad')
  })

  it('the abort signal aborts the HTTP request and the invocation ends cancelled', async () => {
    const gone = new Promise<void>((resolve) => (server.onClientGone = resolve))
    server.enqueue({ ...responsesStream({ text: 'slow answer that never ends' }), holdAfterBytes: 300 })
    const controller = new AbortController()
    const agent = new Agent({ model: responses() })
    const running = agent.invoke('hi', { signal: controller.signal })
    while (server.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 5))
    controller.abort()
    const result = await running
    await gone
    expect(result.stopReason).toBe('cancelled')
    expect(agent.messages.map((m) => m.role)).toEqual(['user'])
  })

  it('maps max_output_tokens, content_filter and refusals onto stop reasons', async () => {
    server.enqueue(responsesStream({ text: 'cut sh', incomplete: 'max_output_tokens' }), responsesStream({ text: '', incomplete: 'content_filter' }), responsesStream({ refusal: "I can't help with that." }))
    const model = responses()
    expect((await new Agent({ model }).invoke('a')).stopReason).toBe('max_tokens')
    expect((await new Agent({ model }).invoke('b')).stopReason).toBe('content_filtered')
    const refused = await new Agent({ model }).invoke('c')
    expect(refused.stopReason).toBe('refusal')
    expect(refused.toString()).toBe("I can't help with that.")
  })

  it('never shows the API key in an error', async () => {
    server.enqueue(openAIError(401, `Incorrect API key provided: ${SECRET_KEY}. You can find your API key at the dashboard.`))
    const err = (await new Agent({ model: responses() }).invoke('hi').catch((e: unknown) => e)) as ModelError
    expect(err).toBeInstanceOf(ModelError)
    expect(err.status).toBe(401)
    expect(JSON.stringify({ message: err.message, stack: err.stack })).not.toContain(SECRET_KEY.slice(5))
  })

  it('stateful: chains previous_response_id and sends only the new items', async () => {
    server.enqueue(responsesStream({ id: 'resp_A', calls: [{ id: 'fc_1', callId: 'call_a', name: 'get_weather', args: '{"city":"Lima"}' }] }), responsesStream({ id: 'resp_B', text: 'Sunny.' }))
    const agent = new Agent({ model: responses({ stateful: true }), tools: [weatherTool()] })
    await agent.invoke('Lima?')
    expect(bodyOf(0)).toMatchObject({ store: true })
    expect(bodyOf(0).previous_response_id).toBeUndefined()
    expect(bodyOf(1).previous_response_id).toBe('resp_A')
    expect(bodyOf(1).input).toEqual([{ type: 'function_call_output', call_id: 'call_a', output: 'Sunny in Lima' }])
    expect(agent.providerTokens.sessionToken).toBe('resp_B')
  })

  it('stateful: when the server forgot the previous response, sends the full conversation once and says so', async () => {
    server.enqueue(openAIError(400, "Previous response with id 'resp_old' not found.", { code: 'previous_response_not_found', param: 'previous_response_id' }), responsesStream({ id: 'resp_new', text: 'Fresh start.' }))
    const agent = new Agent({ model: responses({ stateful: true }), messages: [{ role: 'user', content: [{ text: 'earlier' }] }, { role: 'assistant', content: [{ text: 'before' }] }] })
    agent.providerTokens = { sessionToken: 'resp_old' }
    const notices: unknown[] = []
    for await (const event of agent.stream('again')) if (event.type === 'modelEvent' && event.event.type === 'notice') notices.push(event.event.notice)
    expect(notices).toEqual([{ code: 'provider_session_reset', message: expect.stringContaining('resp_old') as string }])
    expect(bodyOf(0).previous_response_id).toBe('resp_old')
    expect(bodyOf(1).previous_response_id).toBeUndefined()
    expect(bodyOf(1).input).toHaveLength(3)
    expect(agent.providerTokens.sessionToken).toBe('resp_new')
  })
})

describe('OpenAIResponsesModel stateful under the Runner', () => {
  const approve = tool({
    name: 'approve',
    description: 'Ask a human.',
    inputSchema: { type: 'object', properties: {} },
    callback: async (_input, ctx) => String(ctx.interrupt({ name: 'ok', reason: 'approve?' })),
  })
  const build = () => new Agent({ name: 'a', model: responses({ stateful: true }), tools: [approve] })

  it('a resume sends the stored response id; when the server forgot it, the full conversation goes once and post_llm records the notice', async () => {
    const store = new MemoryStore()
    server.enqueue(responsesStream({ id: 'resp_A', calls: [{ id: 'fc_1', callId: 'call_1', name: 'approve', args: '{}' }] }))
    const paused = await new Runner({ store }).run(build(), { input: 'deploy?', runId: 'stateful' })
    expect(paused.state).toBe('paused')
    server.enqueue(openAIError(400, "Previous response with id 'resp_A' not found.", { code: 'previous_response_not_found' }), responsesStream({ id: 'resp_B', text: 'Deployed.' }))
    const done = await new Runner({ store }).resume(build(), { runId: 'stateful', responses: { 'call_1:ok': 'yes' } })
    expect(done.result?.toString()).toBe('Deployed.')
    expect(bodyOf(1).previous_response_id).toBe('resp_A')
    expect(bodyOf(2).previous_response_id).toBeUndefined()
    expect(bodyOf(2).input.map((item) => item.type ?? item.role)).toEqual(['user', 'function_call', 'function_call_output'])
    const postLlm = (await new Runner({ store }).history('stateful')).filter((c) => c.phase === 'post_llm')
    expect(postLlm.map((c) => c.payload.session_token)).toEqual(['resp_A', 'resp_B'])
    expect(postLlm[1]!.payload.notices).toEqual([{ code: 'provider_session_reset', message: expect.stringContaining('resp_A') as string }])
  })
})

describe('OpenAIChatModel against the real openai client', () => {
  const chat = (extra = {}) => new OpenAIChatModel({ model: 'gpt-4.1-mini', apiKey: SECRET_KEY, baseURL: `${server.url}/v1`, ...extra })

  it('streams text and usage with cached tokens', async () => {
    server.enqueue(chatStream({ text: 'Plain chat answer.', usage: { prompt: 50, cached: 32, completion: 4 } }))
    const result = await new Agent({ model: chat(), systemPrompt: 'sys' }).invoke('hi')
    expect(result.toString()).toBe('Plain chat answer.')
    expect(result.metrics.usage).toMatchObject({ inputTokens: 50, cacheReadInputTokens: 32, outputTokens: 4 })
    expect(server.requests[0]!.path).toBe('/v1/chat/completions')
    expect((server.requests[0]!.body as { messages: unknown[] }).messages).toEqual([{ role: 'system', content: 'sys' }, { role: 'user', content: [{ type: 'text', text: 'hi' }] }])
  })

  it('streams several tool calls by index and sends tool messages back', async () => {
    server.enqueue(chatStream({ calls: [{ id: 'call_1', name: 'get_weather', args: '{"city":"Kyiv"}' }, { id: 'call_2', name: 'get_weather', args: '{"city":"Baku"}' }] }), chatStream({ text: 'Done.' }))
    const cities: string[] = []
    const result = await new Agent({ model: chat(), tools: [weatherTool(cities)] }).invoke([{ text: 'look' }, { image: { mediaType: 'image/png', source: { bytes: IMAGE_BYTES } } }])
    expect(result.toString()).toBe('Done.')
    expect(cities.sort()).toEqual(['Baku', 'Kyiv'])
    const messages = (server.requests[1]!.body as { messages: Record<string, unknown>[] }).messages
    expect(messages[0]).toEqual({ role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: expect.stringMatching(/^data:image\/png;base64,/) as string } }] })
    expect(messages[1]).toMatchObject({ role: 'assistant', content: null, tool_calls: [{ id: 'call_1', function: { arguments: '{"city":"Kyiv"}' } }, { id: 'call_2' }] })
    expect(messages.slice(2)).toEqual([
      { role: 'tool', tool_call_id: 'call_1', content: 'Sunny in Kyiv' },
      { role: 'tool', tool_call_id: 'call_2', content: 'Sunny in Baku' },
    ])
  })

  it('retries a 503, and maps length and content_filter onto stop reasons', async () => {
    server.enqueue(openAIError(503, 'overloaded', { headers: { 'retry-after': '0.01' } }), chatStream({ text: 'trunc', finish: 'length' }), chatStream({ text: '', finish: 'content_filter' }))
    expect((await new Agent({ model: chat() }).invoke('a')).stopReason).toBe('max_tokens')
    expect(server.requests).toHaveLength(2)
    expect((await new Agent({ model: chat() }).invoke('b')).stopReason).toBe('content_filtered')
  })

  it('sends images inline as data URLs and by URL', async () => {
    server.enqueue(chatStream({ text: 'A cat.' }))
    const prompt: ContentBlock[] = [
      { text: 'What is this?' },
      { image: { mediaType: 'image/png', source: { bytes: IMAGE_BYTES } } },
      { image: { mediaType: 'image/jpeg', source: { url: 'https://example.com/cat.jpg' } } },
    ]
    expect((await new Agent({ model: chat() }).invoke(prompt)).toString()).toBe('A cat.')
    expect((server.requests[0]!.body as { messages: unknown[] }).messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is this?' },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${Buffer.from(IMAGE_BYTES).toString('base64')}` } },
          { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
        ],
      },
    ])
  })

  it('sends an inline document as file data', async () => {
    server.enqueue(chatStream({ text: 'Read it.' }))
    await new Agent({ model: chat() }).invoke([{ text: 'Summarise' }, { document: { mediaType: 'application/pdf', name: 'report.pdf', source: { bytes: IMAGE_BYTES } } }])
    const messages = (server.requests[0]!.body as { messages: { content: unknown[] }[] }).messages
    expect(messages[0]!.content[1]).toEqual({ type: 'file', file: { file_data: `data:application/pdf;base64,${Buffer.from(IMAGE_BYTES).toString('base64')}`, filename: 'report.pdf' } })
  })

  it('refuses a document given by URL with a ModelError naming the block, before any request', async () => {
    const agent = new Agent({ model: chat() })
    const err = await agent.invoke([{ text: 'Summarise' }, { document: { mediaType: 'application/pdf', name: 'report.pdf', source: { url: 'https://example.com/report.pdf' } } }]).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ModelError)
    expect(err).toMatchObject({ code: 'model_error', provider: 'openai', model: 'gpt-4.1-mini', retryable: false })
    const message = (err as ModelError).message
    expect(message).toContain('"report.pdf"')
    expect(message).toContain('inline base64')
    expect(message).toContain('OpenAIResponsesModel')
    expect(server.requests).toHaveLength(0)
    expect(agent.messages.map((m) => m.role)).toEqual(['user'])
  })

  it('retries a 429 through the client, honouring retry-after, and answers', async () => {
    server.enqueue(openAIError(429, 'Rate limit reached', { headers: { 'retry-after-ms': '20' } }), chatStream({ text: 'ok after the limit' }))
    const result = await new Agent({ model: chat({ maxRetries: 2 }) }).invoke('hi')
    expect(result.toString()).toBe('ok after the limit')
    expect(server.requests).toHaveLength(2)
    expect(server.requests.map((r) => r.path)).toEqual(['/v1/chat/completions', '/v1/chat/completions'])
  })

  it('the abort signal aborts the HTTP request and the invocation ends cancelled', async () => {
    const gone = new Promise<void>((resolve) => (server.onClientGone = resolve))
    server.enqueue({ ...chatStream({ text: 'a slow chat answer that never ends' }), holdAfterBytes: 300 })
    const controller = new AbortController()
    const agent = new Agent({ model: chat() })
    const running = agent.invoke('hi', { signal: controller.signal })
    while (server.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 5))
    controller.abort()
    const result = await running
    await gone
    expect(result.stopReason).toBe('cancelled')
    expect(server.requests).toHaveLength(1)
    expect(agent.messages.map((m) => m.role)).toEqual(['user'])
  })

  it('a cut stream is a ModelError and adds no message', async () => {
    server.enqueue({ ...chatStream({ text: 'a long answer that is cut off somewhere in the middle' }), cutAfterBytes: 700 })
    const agent = new Agent({ model: chat({ maxRetries: 0 }) })
    const err = await agent.invoke('hi').catch((e: unknown) => e)
    expect(err).toMatchObject({ name: 'ModelError', provider: 'openai', status: 200, requestId: 'req_chat' })
    expect(agent.messages).toHaveLength(1)
  })
})
