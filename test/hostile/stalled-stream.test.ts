import { createAnthropic } from '@ai-sdk/anthropic'
import { beforeEach, describe, expect, it } from 'vitest'
import { Agent, ModelError, ModelLimitError, Runner, type Model } from '../../src/index.js'
import { AISDKModel } from '../../src/ai-sdk.js'
import { AnthropicModel } from '../../src/anthropic.js'
import { OpenAIChatModel, OpenAIResponsesModel } from '../../src/openai.js'
import { anthropicStream } from '../providers/anthropic-wire.js'
import { SECRET_KEY, useReplayServer } from '../providers/helpers.js'
import { chatStream, responsesStream } from '../providers/openai-wire.js'
import type { Replay } from '../providers/replay-server.js'
import { sqliteStore } from '../runner/helpers.js'

/**
 * Providers that answer and then stall: the headers (and perhaps the first events) arrive, then
 * nothing, or only keep-alive bytes. Every adapter, on its real client library, must end such a
 * call within its bounds, abort the request, and leave no run holding its lease.
 */
const server = useReplayServer()
beforeEach(() => {
  server.requests.length = 0
})

type Bounds = { idleTimeoutMs?: number; totalTimeoutMs?: number }
const common = { apiKey: SECRET_KEY, maxRetries: 0, timeoutMs: 2000 }

/** What a provider sends to keep a connection open: SSE comments and blank lines; Anthropic also sends `ping` events. */
const OPENAI_KEEP_ALIVE = ': keep-alive\n\n\n'
const ANTHROPIC_KEEP_ALIVE = `${OPENAI_KEEP_ALIVE}event: ping\ndata: {"type": "ping"}\n\n`

const adapters: { name: string; build: (bounds: Bounds) => Model; answer: () => Replay; keepAlive: string }[] = [
  { name: 'OpenAIChatModel', build: (b) => new OpenAIChatModel({ model: 'gpt-4.1-mini', baseURL: `${server.url}/v1`, ...common, ...b }), answer: () => chatStream({ text: 'a reply that never ends' }), keepAlive: OPENAI_KEEP_ALIVE },
  { name: 'OpenAIResponsesModel', build: (b) => new OpenAIResponsesModel({ model: 'gpt-5-mini', baseURL: `${server.url}/v1`, ...common, ...b }), answer: () => responsesStream({ text: 'a reply that never ends' }), keepAlive: OPENAI_KEEP_ALIVE },
  { name: 'AnthropicModel', build: (b) => new AnthropicModel({ model: 'claude-haiku-4-5', baseURL: server.url, ...common, ...b }), answer: () => anthropicStream({ blocks: [{ text: 'a reply that never ends' }] }), keepAlive: ANTHROPIC_KEEP_ALIVE },
  {
    name: 'AISDKModel',
    build: (b) => new AISDKModel(createAnthropic({ apiKey: SECRET_KEY, baseURL: `${server.url}/v1` })('claude-haiku-4-5'), { maxRetries: 0, ...b }),
    answer: () => anthropicStream({ blocks: [{ text: 'a reply that never ends' }] }),
    keepAlive: ANTHROPIC_KEEP_ALIVE,
  },
]

/** The part of a streamed answer up to (not including) its `n`th event, so the rest never comes. */
function firstEvents(replay: Replay, n: number): number {
  const text = replay.sse!.map((e) => `${e.event === undefined ? '' : `event: ${e.event}\n`}data: ${typeof e.data === 'string' ? e.data : JSON.stringify(e.data)}\n\n`).join('')
  let at = 0
  for (let i = 0; i < n; i++) at = text.indexOf('\n\n', at) + 2
  return Buffer.byteLength(text.slice(0, at))
}

async function failureOf(model: Model): Promise<unknown> {
  return new Agent({ model }).invoke('hi').then(
    () => undefined,
    (err: unknown) => err,
  )
}

describe('a provider stream that stalls', () => {
  for (const adapter of adapters) {
    it(`${adapter.name}: headers and then nothing end in a retryable ModelLimitError naming idleTimeoutMs, and the request is aborted`, async () => {
      const gone = new Promise<void>((resolve) => (server.onClientGone = resolve))
      server.enqueue({ ...adapter.answer(), holdAfterBytes: 0 })
      const err = await failureOf(adapter.build({ idleTimeoutMs: 300 }))
      expect(err).toBeInstanceOf(ModelLimitError)
      expect(err).toMatchObject({ limit: 'idleTimeoutMs', retryable: true, code: 'model_error' })
      expect((err as Error).message).toContain('idleTimeoutMs')
      await gone
    })

    it(`${adapter.name}: keep-alive bytes after the first events do not count as activity`, async () => {
      const gone = new Promise<void>((resolve) => (server.onClientGone = resolve))
      const answer = adapter.answer()
      server.enqueue({ ...answer, holdAfterBytes: firstEvents(answer, 2), trickle: { text: adapter.keepAlive, everyMs: 20 } })
      const err = await failureOf(adapter.build({ idleTimeoutMs: 300 }))
      expect(err).toMatchObject({ name: 'ModelLimitError', limit: 'idleTimeoutMs' })
      await gone
    })
  }

  it('a stream that keeps sending content but never ends is stopped by totalTimeoutMs', async () => {
    const gone = new Promise<void>((resolve) => (server.onClientGone = resolve))
    const answer = chatStream({ text: 'start' })
    const chunk = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4.1-mini', choices: [{ index: 0, delta: { content: 'more ' }, finish_reason: null }] }
    server.enqueue({ ...answer, holdAfterBytes: firstEvents(answer, 2), trickle: { text: `data: ${JSON.stringify(chunk)}\n\n`, everyMs: 20 } })
    const err = await failureOf(adapters[0]!.build({ idleTimeoutMs: 60_000, totalTimeoutMs: 500 }))
    expect(err).toMatchObject({ name: 'ModelLimitError', limit: 'totalTimeoutMs', retryable: true })
    expect((err as Error).message).toContain('totalTimeoutMs')
    await gone
  })

  it('protocol events that carry no content are activity: a stream of them is ended by totalTimeoutMs, not idleTimeoutMs', async () => {
    const gone = new Promise<void>((resolve) => (server.onClientGone = resolve))
    const answer = responsesStream({ text: 'start' })
    const inProgress = { type: 'response.in_progress', sequence_number: 1, response: { id: 'resp_1', object: 'response', created_at: 1, model: 'gpt-5-mini', status: 'in_progress', output: [], usage: null, incomplete_details: null, error: null } }
    server.enqueue({ ...answer, holdAfterBytes: firstEvents(answer, 2), trickle: { text: `event: response.in_progress\ndata: ${JSON.stringify(inProgress)}\n\n`, everyMs: 40 } })
    const err = await failureOf(adapters[1]!.build({ idleTimeoutMs: 400, totalTimeoutMs: 1500 }))
    expect(err).toMatchObject({ name: 'ModelLimitError', limit: 'totalTimeoutMs' })
    await gone
  })

  it('bounds that are not positive numbers are refused when the model is built', () => {
    expect(() => new OpenAIChatModel({ model: 'gpt-4.1-mini', apiKey: SECRET_KEY, idleTimeoutMs: 0 })).toThrow(/idleTimeoutMs must be a positive, finite number/)
    expect(() => new AnthropicModel({ model: 'claude-haiku-4-5', apiKey: SECRET_KEY, totalTimeoutMs: Number.POSITIVE_INFINITY })).toThrow(/totalTimeoutMs/)
  })

  it('a managed run whose provider stalls ends failed, records why, and releases its lease to the next process', async () => {
    const { store, reopen } = await sqliteStore()
    const gone = new Promise<void>((resolve) => (server.onClientGone = resolve))
    server.enqueue({ ...chatStream({ text: 'never' }), holdAfterBytes: 0, trickle: { text: OPENAI_KEEP_ALIVE, everyMs: 20 } })
    // A lease renewed several times while the call waits: the bound, not the lease, ends it.
    const runner = new Runner({ store, leaseMs: 1000 })
    const result = await runner.run(new Agent({ model: adapters[0]!.build({ idleTimeoutMs: 1500 }) }), { input: 'hi', runId: 'stalled' })
    expect(result.state).toBe('failed')
    expect(result.error).toMatchObject({ name: 'ModelLimitError', code: 'model_error' })
    expect(result.error!.message).toContain('idleTimeoutMs')
    await gone
    expect((await store.leases!.getLease('stalled'))?.owner ?? null).toBeNull()
    expect((await store.getRun('stalled'))?.status).toBe('failed')
    // Another process takes the run at once: it finds the recorded failure, not a busy owner.
    const other = reopen()
    const again = await new Runner({ store: other }).resume(new Agent({ model: adapters[0]!.build({}) }), { runId: 'stalled' })
    expect(again).toMatchObject({ state: 'failed', fromTerminalCheckpoint: true })
    expect(server.requests).toHaveLength(1)
    await other.close()
    await store.close()
  })

  it('a ModelLimitError is a ModelError', () => {
    expect(new ModelLimitError('x', { provider: 'p', model: 'm', limit: 'idleTimeoutMs' })).toBeInstanceOf(ModelError)
  })
})
