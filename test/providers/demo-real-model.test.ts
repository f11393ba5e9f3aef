import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { anthropicStream } from './anthropic-wire.js'
import { SECRET_KEY, useReplayServer } from './helpers.js'
import { responsesStream } from './openai-wire.js'
import type { Replay } from './replay-server.js'
import { runScript } from '../support/child.js'

const server = useReplayServer()
let dir = ''
beforeEach(async () => {
  server.requests.length = 0
  dir = await mkdtemp(join(tmpdir(), 'cairn-demo-real-'))
})
afterEach(async () => {
  await rm(dir, { recursive: true, force: true })
})

const SEARCH = '{"query":"durable execution for AI agents"}'
const cases: [string, () => Record<string, string>, () => Replay[]][] = [
  [
    'openai:gpt-5-mini',
    () => ({ OPENAI_API_KEY: SECRET_KEY, OPENAI_BASE_URL: `${server.url}/v1` }),
    () => [responsesStream({ calls: [{ id: 'fc_1', callId: 'call_1', name: 'search_web', args: SEARCH }] }), responsesStream({ id: 'resp_2', text: 'Durable agents checkpoint every boundary.' })],
  ],
  [
    'anthropic:claude-sonnet-4-6',
    () => ({ ANTHROPIC_API_KEY: SECRET_KEY, ANTHROPIC_BASE_URL: server.url }),
    () => [anthropicStream({ blocks: [{ toolUse: { id: 'toolu_1', name: 'search_web', json: SEARCH } }] }), anthropicStream({ id: 'msg_2', blocks: [{ text: 'Durable agents checkpoint every boundary.' }] })],
  ],
]

describe.each(cases)('npm run demo with CAIRN_MODEL=%s against the replay server', (model, env, turns) => {
  it('runs on the provider, is killed after its first tool batch, resumes, and asks the model once per turn', async () => {
    server.enqueue(...turns())
    const { code, stdout, stderr } = await runScript(['examples/research-demo.ts', '--dir', dir], { env: { ...process.env, CAIRN_MODEL: model, ...env() } })
    expect(code, `${stdout}\n${stderr}`).toBe(0)
    expect(stdout).toContain(`Its model is ${model}`)
    expect(stdout).toMatch(/KILLED: process 1/)
    expect(stdout).toContain('RUN STATE: completed')
    expect(server.requests).toHaveLength(2)
    expect(JSON.stringify(server.requests[0]!.body)).toContain('search_web')
    expect(`${stdout}${stderr}`).not.toContain(SECRET_KEY)
  }, 120_000)
})
