import { createServer, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { Agent, configureLimits, DEFAULT_LIMITS, ModelError, Runner, tool, type Model, type Tool } from '../../src/index.js'
import { AnthropicModel } from '../../src/anthropic.js'
import { OpenAIChatModel } from '../../src/openai.js'
import { ScriptedModel } from '../../src/testing.js'
import { anthropicStream } from '../providers/anthropic-wire.js'
import { SECRET_KEY, useReplayServer } from '../providers/helpers.js'
import { chatStream } from '../providers/openai-wire.js'
import { sqliteStore } from '../runner/helpers.js'

/**
 * Model output Cairn cannot keep: an answer that never stops growing, one larger than a
 * checkpoint may hold, and tool calls that share an id. Each ends as a recorded model failure
 * before anything of the answer is recorded, so a recovery does not ask the model again blindly.
 */
const replay = useReplayServer()
beforeEach(() => {
  replay.requests.length = 0
})
afterEach(() => {
  configureLimits(DEFAULT_LIMITS)
})

function recordingTool(calls: string[]): Tool {
  return tool({
    name: 'save',
    description: 'Save a document.',
    inputSchema: { type: 'object', properties: { doc: { type: 'string' } } },
    callback: async (input) => {
      calls.push(String((input as { doc?: unknown }).doc).slice(0, 10))
      return 'saved'
    },
  })
}

/**
 * A Chat Completions server whose one answer is a tool call with an endless argument, streamed in
 * 64 KiB deltas (up to `maxBytes`) as fast as the client reads them.
 */
async function endlessArgumentServer(maxBytes: number): Promise<{ url: string; sent: () => number; closed: Promise<void>; server: Server }> {
  let sent = 0
  let closed!: () => void
  const done = new Promise<void>((resolve) => (closed = resolve))
  const chunk = (delta: Record<string, unknown>) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4.1-mini', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`
  const piece = chunk({ tool_calls: [{ index: 0, function: { arguments: 'a'.repeat(64 * 1024) } }] })
  const server = createServer((req, res: ServerResponse) => {
    req.resume()
    res.on('close', () => closed())
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write(chunk({ role: 'assistant', content: null }))
    res.write(chunk({ tool_calls: [{ index: 0, id: 'call_big', type: 'function', function: { name: 'save', arguments: '{"doc":"' } }] }))
    const pump = () => {
      while (!res.destroyed && sent < maxBytes) {
        sent += piece.length
        if (!res.write(piece)) return void res.once('drain', pump)
      }
    }
    pump()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, sent: () => sent, closed: done, server }
}

describe('model output Cairn cannot keep', () => {
  it('an endless tool argument is cut at maxOutputChars while it streams: the request is aborted and the run ends failed, recorded', async () => {
    const endless = await endlessArgumentServer(256 * 1024 * 1024)
    const { store } = await sqliteStore()
    const calls: string[] = []
    const model = new OpenAIChatModel({ model: 'gpt-4.1-mini', apiKey: SECRET_KEY, baseURL: endless.url, maxRetries: 0, maxOutputChars: 2 * 1024 * 1024 })
    const result = await new Runner({ store }).run(new Agent({ model, tools: [recordingTool(calls)] }), { input: 'write', runId: 'endless' })
    await endless.closed
    expect(endless.sent()).toBeLessThan(256 * 1024 * 1024)
    expect(result.state).toBe('failed')
    expect(result.error).toMatchObject({ name: 'ModelLimitError', code: 'model_error' })
    expect(result.error!.message).toContain('maxOutputChars')
    expect(calls).toEqual([])
    expect((await store.getRun('endless'))?.status).toBe('failed')
    expect(await store.listEffects('endless')).toEqual([])
    // A recovery finds the recorded failure and asks the model nothing.
    const again = await new Runner({ store }).resume(new Agent({ model, tools: [recordingTool(calls)] }), { runId: 'endless' })
    expect(again).toMatchObject({ state: 'failed', fromTerminalCheckpoint: true })
    await store.close()
    endless.server.closeAllConnections()
    await new Promise((resolve) => endless.server.close(resolve))
  })

  it('a tool argument longer than maxStringLength from any model is a recorded ModelError, and a recovery does not ask the model again', async () => {
    configureLimits({ maxStringLength: 1024 * 1024 })
    const { store } = await sqliteStore()
    const calls: string[] = []
    const model = new ScriptedModel([[{ toolUse: { toolUseId: 't1', name: 'save', input: { doc: 'y'.repeat(2 * 1024 * 1024) } } }], [{ text: 'done' }]], { modelId: 'scripted:big' })
    const result = await new Runner({ store }).run(new Agent({ model, tools: [recordingTool(calls)] }), { input: 'write', runId: 'long-arg' })
    expect(result.state).toBe('failed')
    expect(result.error).toMatchObject({ name: 'ModelError', code: 'model_error' })
    expect(result.error!.message).toContain('maxStringLength')
    expect(calls).toEqual([])
    expect((await store.getRun('long-arg'))?.status).toBe('failed')
    const again = await new Runner({ store }).resume(new Agent({ model, tools: [recordingTool(calls)] }), { runId: 'long-arg' })
    expect(again).toMatchObject({ state: 'failed', fromTerminalCheckpoint: true })
    expect(model.calls).toHaveLength(1)
    await store.close()
  })

  it('a response longer than maxPayloadChars is refused as it streams, with a typed error instead of a RangeError', async () => {
    configureLimits({ maxPayloadChars: 512 * 1024 })
    const model = new ScriptedModel([[{ text: 'z'.repeat(600 * 1024) }]], { modelId: 'scripted:long' })
    const err = await new Agent({ model }).invoke('talk').catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ModelError)
    expect((err as Error).message).toContain('maxPayloadChars')
  })
})

describe('tool calls that share an id', () => {
  const chat = () => new OpenAIChatModel({ model: 'gpt-4.1-mini', apiKey: SECRET_KEY, baseURL: `${replay.url}/v1`, maxRetries: 0 })
  const anthropic = () => new AnthropicModel({ model: 'claude-haiku-4-5', apiKey: SECRET_KEY, baseURL: replay.url, maxRetries: 0 })
  const cases: { name: string; model: () => Model; enqueue: () => void }[] = [
    {
      name: 'OpenAIChatModel',
      model: chat,
      enqueue: () =>
        replay.enqueue(
          chatStream({
            calls: [
              { id: 'call_same', name: 'save', args: '{"doc":"first"}' },
              { id: 'call_same', name: 'save', args: '{"doc":"second"}' },
            ],
          }),
        ),
    },
    {
      name: 'AnthropicModel',
      model: anthropic,
      enqueue: () =>
        replay.enqueue(
          anthropicStream({
            blocks: [{ toolUse: { id: 'toolu_same', name: 'save', json: '{"doc":"first"}' } }, { toolUse: { id: 'toolu_other', name: 'save', json: '{}' } }, { toolUse: { id: 'toolu_same', name: 'save', json: '{"doc":"third"}' } }],
          }),
        ),
    },
  ]
  for (const c of cases) {
    it(`${c.name}: the response is refused as a ModelError naming the ids, before anything is recorded`, async () => {
      const { store } = await sqliteStore()
      const calls: string[] = []
      c.enqueue()
      const runner = new Runner({ store })
      const result = await runner.run(new Agent({ model: c.model(), tools: [recordingTool(calls)] }), { input: 'save twice', runId: 'dup' })
      expect(result.state).toBe('failed')
      expect(result.error).toMatchObject({ name: 'ModelError', code: 'model_error' })
      expect(result.error!.message).toMatch(/same id \((call_same|toolu_same)\)/)
      expect(calls).toEqual([])
      expect(await store.listEffects('dup')).toEqual([])
      expect((await runner.history('dup')).map((c) => c.phase)).not.toContain('post_llm')
      await store.close()
    })
  }
})
