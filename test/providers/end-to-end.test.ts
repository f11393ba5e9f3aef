import { fork, type ChildProcess } from 'node:child_process'
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { Runner } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { anthropicStream } from './anthropic-wire.js'
import { SECRET_KEY, useReplayServer } from './helpers.js'
import { chatStream, responsesStream } from './openai-wire.js'
import type { Replay } from './replay-server.js'

const server = useReplayServer()
const CHILD = fileURLToPath(new URL('./e2e-child.ts', import.meta.url))
let dir = ''
beforeEach(async () => {
  server.requests.length = 0
  dir = await mkdtemp(join(tmpdir(), 'cairn-e2e-'))
})
afterEach(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** The two recorded turns of each adapter: a tool call, then the answer. */
const turns: Record<string, () => Replay[]> = {
  'openai-responses': () => [responsesStream({ id: 'resp_1', calls: [{ id: 'fc_1', callId: 'call_1', name: 'get_weather', args: '{"city":"Turin"}' }] }), responsesStream({ id: 'resp_2', text: 'Sunny in Turin.' })],
  'openai-chat': () => [chatStream({ calls: [{ id: 'call_1', name: 'get_weather', args: '{"city":"Turin"}' }] }), chatStream({ text: 'Sunny in Turin.' })],
  anthropic: () => [anthropicStream({ blocks: [{ toolUse: { id: 'toolu_1', name: 'get_weather', json: '{"city":"Turin"}' } }] }), anthropicStream({ id: 'msg_2', blocks: [{ text: 'Sunny in Turin.' }] })],
  'ai-sdk': () => [anthropicStream({ blocks: [{ toolUse: { id: 'toolu_1', name: 'get_weather', json: '{"city":"Turin"}' } }] }), anthropicStream({ id: 'msg_2', blocks: [{ text: 'Sunny in Turin.' }] })],
}

interface ChildMessage {
  type: 'in-tool' | 'result'
  state?: string
  text?: string
  llmCalls?: number
}

function start(adapter: string, mode: 'run' | 'resume'): { child: ChildProcess; next: () => Promise<ChildMessage>; exit: Promise<NodeJS.Signals | number | null> } {
  const child = fork(CHILD, [adapter, join(dir, 'cairn.db'), server.url, 'e2e', mode, join(dir, 'effects.txt')], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const messages: ChildMessage[] = []
  let wake: (() => void) | undefined
  child.on('message', (m) => {
    messages.push(m as ChildMessage)
    wake?.()
  })
  const exit = new Promise<NodeJS.Signals | number | null>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)))
  const next = async () => {
    while (messages.length === 0) await new Promise<void>((resolve) => (wake = resolve))
    return messages.shift()!
  }
  return { child, next, exit }
}

describe.each(Object.keys(turns))('end to end with the Runner on SQLite: %s', (adapter) => {
  it('a process SIGKILLed after post_llm is resumed by a fresh one without asking the model again for that turn', async () => {
    server.enqueue(...turns[adapter]!())
    const first = start(adapter, 'run')
    expect((await first.next()).type).toBe('in-tool')
    first.child.kill('SIGKILL')
    expect(await first.exit).toBe('SIGKILL')
    expect(server.requests).toHaveLength(1)

    const second = start(adapter, 'resume')
    const result = await second.next()
    await second.exit
    expect(result).toMatchObject({ type: 'result', state: 'completed', text: 'Sunny in Turin.', llmCalls: 1 })
    // One request per turn: the checkpointed tool-call turn was not requested again.
    expect(server.requests).toHaveLength(2)
    expect(JSON.stringify(server.requests[1]!.body)).toContain('Sunny in Turin')
    if (adapter === 'openai-responses') {
      // The fresh process continued the provider session from the runtime snapshot.
      expect((server.requests[1]!.body as { previous_response_id?: string }).previous_response_id).toBe('resp_1')
    }
    expect((await readFile(join(dir, 'effects.txt'), 'utf8')).trim().split('\n')).toEqual(['Turin'])
    const store = new SqliteStore({ path: join(dir, 'cairn.db') })
    const effects = await store.listEffects('e2e')
    // Started by the killed process, run again (idempotent, same key) by the fresh one: one record.
    expect(effects.map((e) => [e.name, e.status])).toEqual([['get_weather', 'succeeded']])
    const phases = (await new Runner({ store }).history('e2e')).map((c) => c.phase)
    expect(phases.filter((p) => p === 'post_llm')).toHaveLength(2)
    await store.close()
    // The API key is nowhere in the store's files.
    for (const file of await readdir(dir)) expect((await readFile(join(dir, file))).includes(SECRET_KEY), file).toBe(false)
  }, 120_000)
})
