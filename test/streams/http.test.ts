import { join } from 'node:path'
import { DefaultChatTransport, readUIMessageStream, type UIMessage } from 'ai'
import { describe, expect, it } from 'vitest'
import { Agent, Runner, tool, type JsonObject, type RunEvent } from '../../src/index.js'
import { runEventsResponse, runUIMessageStreamResponse, uiMessageStreamResponse } from '../../src/http.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel } from '../../src/testing.js'
import { useTempDirs } from '../support/temp-dirs.js'

const tempDir = useTempDirs('cairn-http-')

async function openStore(): Promise<SqliteStore> {
  const dir = await tempDir()
  return new SqliteStore({ path: join(dir, 'cairn.db') })
}

const ANSWER = 'Revenue grew twelve percent in the fourth quarter.'

function researchAgent(): Agent {
  const lookup = tool({
    name: 'lookup',
    description: 'Look a key up.',
    inputSchema: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
    callback: (input) => ({ key: (input as { key: string }).key, value: 12 }),
  })
  const model = new ScriptedModel([[{ toolUse: { toolUseId: 'call-1', name: 'lookup', input: { key: 'q4' } } }], [{ reasoning: { text: 'The lookup says 12.' } }, { text: ANSWER }]])
  return new Agent({ model, tools: [lookup], name: 'analyst' })
}

/** The messages of an SSE body: `id`, `event` and `data` of each, comments counted apart. */
function parseSse(text: string): { messages: { id?: string; event?: string; data?: string }[]; comments: number } {
  const messages: { id?: string; event?: string; data?: string }[] = []
  let comments = 0
  for (const block of text.split('\n\n')) {
    const message: { id?: string; event?: string; data?: string } = {}
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) comments++
      else if (line.startsWith('id: ')) message.id = line.slice(4)
      else if (line.startsWith('event: ')) message.event = line.slice(7)
      else if (line.startsWith('data: ')) message.data = line.slice(6)
    }
    if (message.data !== undefined) messages.push(message)
  }
  return { messages, comments }
}

/** What a `useChat({ resume: true })` client does on mount: GET the stream, read it into a message. */
async function resumeLikeUseChat(handler: (req: Request) => Promise<Response> | Response, chatId: string, onMessage: (message: UIMessage) => void = () => {}): Promise<UIMessage | null> {
  const transport = new DefaultChatTransport({ api: 'http://app.local/api/chat', fetch: async (url, init) => handler(new Request(url, init)) })
  const stream = await transport.reconnectToStream({ chatId })
  if (!stream) return null
  let last: UIMessage | undefined
  for await (const message of readUIMessageStream({ stream })) {
    last = message
    onMessage(message)
  }
  return last ?? null
}

describe('run streams over HTTP', () => {
  it('serves a run as SSE with cursors as ids, resumes after Last-Event-ID or ?after=, and answers 204 after the end', async () => {
    const store = await openStore()
    await new Runner({ store }).run(researchAgent(), { input: 'Q4?', runId: 'q4' })
    const log = await store.events!.read('q4')
    const whole = parseSse(await (await runEventsResponse(new Request('http://app.local/events?runId=q4'), { store, runId: 'q4' })).text())
    const events = whole.messages.filter((m) => m.event === undefined)
    expect(events.map((m) => m.id)).toEqual(log.map((e) => e.cursor))
    expect(events.map((m) => JSON.parse(m.data!) as JsonObject)).toEqual(log.map((e) => e.event))
    expect(whole.messages[whole.messages.length - 1]!.event).toBe('end')

    const middle = log[4]!.cursor
    const byHeader = parseSse(await (await runEventsResponse(new Request('http://app.local/events', { headers: { 'Last-Event-ID': middle } }), { store, runId: 'q4' })).text())
    expect(byHeader.messages.filter((m) => m.id).map((m) => m.id)).toEqual(log.slice(5).map((e) => e.cursor))
    const byQuery = parseSse(await (await runEventsResponse(new Request(`http://app.local/events?after=${middle}`), { store, runId: 'q4' })).text())
    expect(byQuery.messages.filter((m) => m.id).map((m) => m.id)).toEqual(log.slice(5).map((e) => e.cursor))

    const after = await runEventsResponse(new Request('http://app.local/events', { headers: { 'Last-Event-ID': log[log.length - 1]!.cursor } }), { store, runId: 'q4' })
    expect(after.status).toBe(204)
    await store.close()
  })

  it('sends heartbeat comments on a quiet run and ends the response at its lifetime', async () => {
    const store = await openStore()
    await store.createRun({ runId: 'quiet', status: 'queued' })
    const response = await runEventsResponse(new Request('http://app.local/events'), { store, runId: 'quiet', heartbeatMs: 20, maxDurationMs: 300 })
    const parsed = parseSse(await response.text())
    expect(parsed.comments).toBeGreaterThan(0)
    expect(parsed.messages).toEqual([])
    await store.close()
  })

  it('gives the AI SDK a UI message stream it reads into the whole message: tool call, reasoning, answer', async () => {
    const store = await openStore()
    await new Runner({ store }).run(researchAgent(), { input: 'Q4?', runId: 'q4' })
    const message = await resumeLikeUseChat((req) => uiMessageStreamResponse(req, { store, runId: 'q4' }), 'q4')
    const response = uiMessageStreamResponse(new Request('http://app.local/x'), { store, runId: 'q4' })
    expect(response.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1')
    await response.body?.cancel()
    expect(message).not.toBeNull()
    const parts = message!.parts
    const toolPart = parts.find((p) => p.type === 'tool-lookup') as { state: string; input: unknown; output: unknown } | undefined
    expect(toolPart).toMatchObject({ state: 'output-available', input: { key: 'q4' }, output: { key: 'q4', value: 12 } })
    expect(parts.filter((p) => p.type === 'reasoning').map((p) => (p as { text: string }).text)).toEqual(['The lookup says 12.'])
    expect(parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text)).toEqual([ANSWER])
    // Nothing to resume once the run finished: a useChat client mounting now gets no stream.
    expect(await resumeLikeUseChat((req) => runUIMessageStreamResponse(req, { store, runId: 'q4' }), 'q4')).toBeNull()
    await store.close()
  })

  it('a client that resumes after a crash gets the answer once; one connected through the crash is told which parts are void', async () => {
    const store = await openStore()
    await store.createRun({ runId: 'crashed', status: 'running' })
    const log = store.events!
    const ev = (event: RunEvent) => event as unknown as JsonObject
    await log.append('crashed', [
      ev({ type: 'run_started', runId: 'crashed', agentName: 'a', model: 'm', resumed: false, step: 0 }),
      ev({ type: 'model_call_started', runId: 'crashed', step: 0, model: 'm' }),
      ev({ type: 'text_delta', runId: 'crashed', step: 0, text: 'Revenue gr' }),
    ])
    const crashAndResume = async () => {
      await log.append('crashed', [
        ev({ type: 'model_call_voided', runId: 'crashed', step: 0 }),
        ev({ type: 'run_started', runId: 'crashed', agentName: 'a', model: 'm', resumed: true, step: 0 }),
        ev({ type: 'model_call_started', runId: 'crashed', step: 0, model: 'm' }),
        ev({ type: 'text_delta', runId: 'crashed', step: 0, text: ANSWER }),
        ev({ type: 'model_call_finished', runId: 'crashed', step: 0, model: 'm', stopReason: 'end_turn', usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 }, toolCalls: 0 }),
      ])
      // Mounted after the crash (a page reload), while the run still runs.
      const reloaded = await runUIMessageStreamResponse(new Request('http://app.local/x'), { store, runId: 'crashed' })
      expect(reloaded.status).toBe(200)
      await log.append('crashed', [ev({ type: 'run_finished', runId: 'crashed', state: 'completed', text: ANSWER })])
      await store.updateRun('crashed', { status: 'completed' })
      return reloaded
    }
    // Connected before the crash: once it shows the partial turn, the process dies and another resumes.
    let reloading: Promise<Response> | undefined
    const live = await runUIMessageStreamResponse(new Request('http://app.local/x'), { store, runId: 'crashed' })
    const connected = await readMessage(live, (message) => {
      if (!reloading && message.parts.some((p) => p.type === 'text' && p.text === 'Revenue gr')) reloading = crashAndResume()
    })
    const voided = connected.parts.find((p) => p.type === 'data-cairn-voided') as { data: { step: number; partIds: string[] } } | undefined
    expect(voided?.data.step).toBe(0)
    const texts = connected.parts.filter((p) => p.type === 'text') as { text: string }[]
    expect(texts.map((p) => p.text)).toEqual(['Revenue gr', ANSWER])
    expect(voided!.data.partIds).toHaveLength(1)
    // What a page shows: the text parts not listed as void.
    const partId = (part: UIMessage['parts'][number]) => ('providerMetadata' in part ? (part.providerMetadata?.cairn?.partId as string | undefined) ?? '' : '')
    const shown = connected.parts.filter((p) => p.type === 'text' && !voided!.data.partIds.includes(partId(p))) as { text: string }[]
    expect(shown.map((p) => p.text).join('')).toBe(ANSWER)

    const afterReload = await readMessage(await reloading!)
    expect(afterReload.parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text)).toEqual([ANSWER])
    await store.close()
  })
})

/** Read a UI message stream response as `useChat` does; `onMessage` sees each state of the message. */
async function readMessage(response: Response, onMessage: (message: UIMessage) => void = () => {}): Promise<UIMessage> {
  const message = await resumeLikeUseChat(() => response, 'any', onMessage)
  if (!message) throw new Error('no stream')
  return message
}
