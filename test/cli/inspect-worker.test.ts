import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { inspectorApp } from '../../src/cli/inspect/server.js'
import { Answering } from '../../src/cli/inspect/answers.js'
import { Agent, buildTimeline, CairnClient, formatTimeline, Runner, tool, Worker } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel } from '../../src/testing.js'
import { waitFor } from '../support/wait.js'

const TOKEN = 'b'.repeat(48)
const ORIGIN = 'http://127.0.0.1:4322'

/** An agent that asks before it orders. */
function buyer(): Agent {
  const placeOrder = tool({
    name: 'place_order',
    description: 'Order items (asks first).',
    inputSchema: { type: 'object', properties: { quantity: { type: 'number' } } },
    callback: (input, ctx) => (ctx.interrupt<string>({ name: 'approval', reason: { question: 'Order?', choices: ['approve', 'reject'] } }) === 'approve' ? `ordered ${JSON.stringify(input)}` : 'not ordered'),
  })
  const turn = (request: { messages: { content: object[] }[] }) =>
    request.messages.some((m) => m.content.some((b) => 'toolResult' in b)) ? [{ text: 'done' }] : [{ toolUse: { toolUseId: 'order-1', name: 'place_order', input: { quantity: 2 } } }]
  return new Agent({ name: 'buyer', model: new ScriptedModel([turn, turn, turn]), tools: [placeOrder] })
}

describe('answering a run enqueued for workers from the inspector', () => {
  let dir = ''
  let store: SqliteStore
  let worker: Worker

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-inspect-worker-'))
    store = new SqliteStore({ path: join(dir, 'worker.db') })
    worker = new Worker({ store, agents: { buyer }, pollMs: 20 })
    await worker.start()
  })

  afterAll(async () => {
    await worker.stop()
    await store.close()
    await rm(dir, { recursive: true, force: true })
  })

  it('hands the answer back to the workers, who finish the run with it; the answer is kept with the run', async () => {
    const client = new CairnClient({ store })
    const { runId } = await client.enqueue('buyer', { input: 'Order two.', runId: 'queued-order' })
    expect((await client.result(runId, { timeoutMs: 20_000 })).status).toBe('paused')
    // No --agents: a worker's run needs none.
    const app = inspectorApp(store, TOKEN, new Answering({ store, onError: (err) => { throw err } }))
    const question = await app.request(`${ORIGIN}/api/runs/${runId}`, { headers: { host: '127.0.0.1:4322', 'x-cairn-token': TOKEN } })
    expect(((await question.json()) as { questions: { interruptId: string; tool: string; choices: unknown[] }[] }).questions).toEqual([
      expect.objectContaining({ interruptId: 'order-1:approval', tool: 'place_order', choices: ['approve', 'reject'] }),
    ])
    const answer = await app.request(`${ORIGIN}/api/runs/${runId}/answer`, {
      method: 'POST',
      headers: { host: '127.0.0.1:4322', 'x-cairn-token': TOKEN, origin: ORIGIN, 'content-type': 'application/json' },
      body: JSON.stringify({ responses: { 'order-1:approval': 'approve' }, by: 'Grace' }),
    })
    expect(answer.status).toBe(202)
    expect(await answer.json()).toEqual({ accepted: true, by: 'Grace', via: 'worker' })
    const outcome = await client.result(runId, { timeoutMs: 20_000 })
    expect(outcome.status).toBe('completed')
    const effect = await store.getEffect(runId, 'order-1')
    expect(effect?.output).toMatchObject({ status: 'success', content: [{ text: 'ordered {"quantity":2}' }] })
    const run = (await store.getRun(runId))!
    expect(run.metadata.cairnAnswers).toEqual([{ interruptId: 'order-1:approval', response: 'approve', by: 'Grace', at: expect.any(Number) as number, via: 'inspector' }])
    // The worker that resumed the run recorded who answered, as the inspector names them.
    const timeline = await buildTimeline(store, runId)
    expect(timeline.entries.flatMap((entry) => entry.answers)).toEqual([expect.objectContaining({ interruptId: 'order-1:approval', answer: 'approve', by: 'Grace (inspector)' })])
  })
})

describe('answering a run a Runner paused, from the inspector', () => {
  it('resumes it with the --agents factory, and the timeline names who answered, as after `cairn resume --response`', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-inspect-runner-'))
    const store = new SqliteStore({ path: join(dir, 'runner.db') })
    try {
      expect((await new Runner({ store }).run(buyer(), { input: 'Order two.', runId: 'own-order' })).state).toBe('paused')
      const answering = new Answering({ store, agents: { buyer }, onError: (err) => { throw err } })
      const app = inspectorApp(store, TOKEN, answering)
      const answer = await app.request(`${ORIGIN}/api/runs/own-order/answer`, {
        method: 'POST',
        headers: { host: '127.0.0.1:4322', 'x-cairn-token': TOKEN, origin: ORIGIN, 'content-type': 'application/json' },
        body: JSON.stringify({ responses: { 'order-1:approval': 'approve' }, by: 'Grace' }),
      })
      expect(await answer.json()).toEqual({ accepted: true, by: 'Grace', via: 'inspector' })
      await waitFor(async () => (await store.getRun('own-order'))?.status === 'completed', 'the resumed run to complete')
      await answering.close()
      const timeline = await buildTimeline(store, 'own-order')
      expect(timeline.entries.flatMap((entry) => entry.answers)).toEqual([expect.objectContaining({ interruptId: 'order-1:approval', answer: 'approve', by: 'Grace (inspector)' })])
      expect(formatTimeline(timeline).join('\n')).toContain('answer to order-1:approval: "approve", given by Grace (inspector)')
    } finally {
      await store.close()
      await rm(dir, { recursive: true, force: true })
    }
  })
})
