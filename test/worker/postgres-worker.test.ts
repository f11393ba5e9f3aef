import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { Agent, CairnClient, tool, Worker, type WorkerEvent, type WorkerOptions } from '../../src/index.js'
import { ScriptedModel } from '../../src/testing.js'
import { postgresTarget } from '../fixtures/postgres-target.js'
import { jobAgent } from './fixtures/job-agent.js'

// Workers inside this process on the Postgres target (a server, or PGlite).
const target = await postgresTarget()
afterAll(() => target.close())
const noNotifications = target.kind === 'pglite' ? 'PGliteClient connections deliver no notifications: idle workers poll there' : undefined
if (noNotifications) console.info(`skipped: LISTEN/NOTIFY tests (${noNotifications})`)

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function setup() {
  const schema = target.freshSchema()
  const dir = await mkdtemp(join(tmpdir(), 'cairn-pg-worker-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  const open = () => {
    const store = target.openStore(schema, { onWarning: () => {} })
    cleanups.push(() => store.close())
    return store
  }
  const startWorker = async (options: { id: string; pollMs: number; agents?: WorkerOptions['agents'] }) => {
    const events: WorkerEvent[] = []
    const agents = options.agents ?? { job: () => jobAgent({ effectsDir: dir, cycles: 2 }) }
    const worker = new Worker({ store: open(), ...options, agents, onEvent: (e) => events.push(e) })
    cleanups.push(() => worker.stop({ timeoutMs: 0 }))
    await worker.start()
    return { worker, events }
  }
  return { client: new CairnClient({ store: open() }), startWorker, schema }
}

describe('workers on Postgres', () => {
  it('two workers finish every enqueued run', async () => {
    const { client, startWorker } = await setup()
    await startWorker({ id: 'a', pollMs: 50 })
    await startWorker({ id: 'b', pollMs: 50 })
    for (let i = 0; i < 8; i++) await client.enqueue('job', { input: 'go', runId: `r${i}` })
    for (let i = 0; i < 8; i++) expect((await client.result(`r${i}`, { timeoutMs: 20_000 })).status).toBe('completed')
  }, 30_000)

  it.skipIf(noNotifications !== undefined)('an idle worker is woken by NOTIFY when a run is enqueued, not by polling', async () => {
    const { client, startWorker } = await setup()
    const { events } = await startWorker({ id: 'idle', pollMs: 60_000 })
    await new Promise((resolve) => setTimeout(resolve, 300))
    const enqueuedAt = Date.now()
    await client.enqueue('job', { input: 'go', runId: 'r1' })
    expect((await client.result('r1', { timeoutMs: 10_000, pollMs: 20 })).status).toBe('completed')
    expect(events[0]).toMatchObject({ type: 'claimed', runId: 'r1' })
    expect(Date.now() - enqueuedAt).toBeLessThan(5000)
  }, 30_000)

  it.skipIf(noNotifications !== undefined)('an idle worker is woken by NOTIFY when a paused run is answered, not by polling', async () => {
    const { client, startWorker } = await setup()
    // The worker would not look for runs again on its own for ten minutes.
    const { events } = await startWorker({ id: 'idle', pollMs: 600_000, agents: { approve: approvalAgent } })
    await client.enqueue('approve', { input: 'pay the invoice', runId: 'r1' })
    expect(await client.result('r1', { timeoutMs: 20_000, pollMs: 20 })).toMatchObject({ status: 'paused', interrupts: [{ id: 'p:approval' }] })
    await client.respond('r1', { 'p:approval': 'approved' })
    const done = await client.result('r1', { timeoutMs: 20_000, pollMs: 20 })
    expect(done).toMatchObject({ status: 'completed' })
    expect(done.result?.result?.toString()).toBe('paid')
    expect(events.flatMap((e) => (e.type === 'claimed' ? [[e.runId, e.epoch]] : []))).toEqual([
      ['r1', 1],
      ['r1', 2],
    ])
  }, 60_000)

  it.skipIf(noNotifications !== undefined)('the listening connection is re-established when the server ends it', async () => {
    const { client, startWorker, schema } = await setup()
    await startWorker({ id: 'idle', pollMs: 60_000 })
    const listening = `SELECT pid FROM pg_stat_activity WHERE query = 'LISTEN "cairn_wake_${schema}"'`
    await new Promise((resolve) => setTimeout(resolve, 200))
    const [before] = await target.sql(listening)
    expect(before).toBeDefined()
    await target.sql('SELECT pg_terminate_backend($1)', [before!.pid])
    // The listener reconnects (with backoff) and listens again on a new connection.
    for (let i = 0; i < 50 && ((await target.sql(listening))[0]?.pid ?? before!.pid) === before!.pid; i++) await new Promise((resolve) => setTimeout(resolve, 100))
    expect((await target.sql(listening))[0]?.pid).not.toBe(before!.pid)
    await client.enqueue('job', { input: 'go', runId: 'after' })
    expect((await client.result('after', { timeoutMs: 10_000, pollMs: 20 })).status).toBe('completed')
  }, 30_000)
})

/** An agent whose one tool asks a human before it pays, then answers `paid`. */
function approvalAgent(): Agent {
  const model = new ScriptedModel([[{ toolUse: { toolUseId: 'p', name: 'pay', input: { amount: 40 } } }], [{ text: 'paid' }]], { select: 'conversation' })
  const pay = tool({
    name: 'pay',
    description: 'Pay, once a human approves.',
    inputSchema: { type: 'object', properties: { amount: { type: 'number' } }, required: ['amount'] },
    callback: (_input, ctx) => `payment ${ctx.interrupt<string>({ name: 'approval', reason: 'pay $40?' })}`,
  })
  return new Agent({ name: 'payer', model, tools: [pay] })
}
