import { mkdir, mkdtemp, readFile, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterEach, describe, expect, it } from 'vitest'
import { Agent, buildTimeline, CairnClient, MemoryStore, RecoveryLimitError, tool, Worker, type WorkerEvent, type WorkerOptions } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel } from '../../src/testing.js'
import { jobAgent } from './fixtures/job-agent.js'
import { waitFor } from '../support/wait.js'

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function effectsDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-worker-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  // There before a worker builds its first agent, so a test may count the effects from the start.
  await mkdir(join(dir, 'applied'))
  return dir
}

/** A started worker, stopped after the test; its events are collected. */
async function startWorker(options: Omit<WorkerOptions, 'onEvent'>): Promise<{ worker: Worker; events: WorkerEvent[] }> {
  const events: WorkerEvent[] = []
  const worker = new Worker({ pollMs: 20, ...options, onEvent: (event) => events.push(event) })
  cleanups.push(() => worker.stop({ timeoutMs: 0 }))
  await worker.start()
  return { worker, events }
}


describe('Worker', () => {
  it('workers complete every enqueued run, each effect applied once, and result() returns the answer', async () => {
    const dir = await effectsDir()
    const store = new MemoryStore()
    const client = new CairnClient({ store })
    const agents = { job: () => jobAgent({ effectsDir: dir, cycles: 3 }) }
    await startWorker({ store, agents, concurrency: 3, id: 'a' })
    await startWorker({ store, agents, concurrency: 3, id: 'b' })
    for (let i = 0; i < 20; i++) expect(await client.enqueue('job', { input: 'go', runId: `r${i}` })).toEqual({ runId: `r${i}`, created: true })
    expect(await client.enqueue('job', { input: 'again', runId: 'r0' })).toEqual({ runId: 'r0', created: false })
    for (let i = 0; i < 20; i++) {
      const outcome = await client.result(`r${i}`, { timeoutMs: 10_000 })
      expect(outcome).toMatchObject({ status: 'completed', error: undefined, result: { state: 'completed' } })
      expect(outcome.result?.result?.toString()).toBe('applied 3 effects')
      expect((await store.listEffects(`r${i}`)).map((e) => [e.callId, e.status, e.attempts])).toEqual([
        ['call-0', 'succeeded', 1],
        ['call-1', 'succeeded', 1],
        ['call-2', 'succeeded', 1],
      ])
    }
    expect(await readdir(join(dir, 'applied'))).toHaveLength(60)
    expect((await readFile(join(dir, 'attempts.log'), 'utf8')).trim().split('\n')).toHaveLength(60)
    const run = await store.getRun('r0')
    expect(run).toMatchObject({ status: 'completed', name: 'job-agent', metadata: { cairn: { name: 'job', input: 'go' } } })
    expect((await store.leases!.getLease('r0'))?.owner).toBeNull()
  })

  it('cancel stops a running run at its next boundary, and its tool’s signal fires', async () => {
    const dir = await effectsDir()
    const store = new MemoryStore()
    const client = new CairnClient({ store })
    let toolStarted = false
    let toolAborted = false
    const agents = {
      job: () =>
        jobAgent({
          effectsDir: dir,
          onTool: async (key, signal) => {
            if (!key.endsWith('call-1')) return
            toolStarted = true
            // A long tool call: it ends when the cancel reaches it through its signal.
            await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }))
            toolAborted = true
          },
        }),
    }
    const { events } = await startWorker({ store, agents, leaseMs: 2000, heartbeatMs: 50 })
    await client.enqueue('job', { input: 'go', runId: 'long' })
    await waitFor(() => toolStarted, 'the second tool call to start')
    expect(await client.cancel('long')).toEqual({ outcome: 'requested', status: 'running' })
    const outcome = await client.result('long', { timeoutMs: 10_000 })
    expect(toolAborted).toBe(true)
    expect(outcome).toMatchObject({ status: 'cancelled', result: { state: 'cancelled' } })
    expect(await readdir(join(dir, 'applied'))).toEqual(['long_call-0'])
    expect(events.filter((e) => e.type === 'released')).toMatchObject([{ runId: 'long', reason: 'finished', status: 'cancelled' }])
  })

  it('stop() hands unfinished runs back at their last checkpoint, and another worker finishes them', async () => {
    const dir = await effectsDir()
    const store = new MemoryStore()
    const client = new CairnClient({ store })
    const agents = { job: () => jobAgent({ effectsDir: dir, cycles: 4, toolDelayMs: 60 }) }
    const first = await startWorker({ store, agents, concurrency: 4, id: 'first' })
    for (let i = 0; i < 4; i++) await client.enqueue('job', { input: 'go', runId: `r${i}` })
    await waitFor(async () => (await readdir(join(dir, 'applied')).catch(() => [])).length >= 4, 'the first effects')
    await first.worker.stop({ timeoutMs: 30 })
    expect(first.worker.activeRuns).toEqual([])
    const handedBack = first.events.flatMap((e) => (e.type === 'released' && e.reason === 'suspended' ? [e.runId] : []))
    expect(handedBack.length).toBeGreaterThan(0)
    for (const runId of handedBack) {
      expect(await store.getRun(runId)).toMatchObject({ status: 'running' })
      expect(await store.leases!.getLease(runId)).toMatchObject({ owner: null, recoveries: 0 })
    }

    const second = await startWorker({ store, agents, concurrency: 4, id: 'second' })
    for (let i = 0; i < 4; i++) expect((await client.result(`r${i}`, { timeoutMs: 10_000 })).status).toBe('completed')
    expect(second.events.flatMap((e) => (e.type === 'claimed' ? [e.runId] : [])).sort()).toEqual([...handedBack].sort())
    // Each effect happened once in the outside world (the second worker re-ran interrupted ones under the same key).
    expect((await readdir(join(dir, 'applied'))).sort()).toEqual(
      ['r0', 'r1', 'r2', 'r3'].flatMap((runId) => [0, 1, 2, 3].map((n) => `${runId}_call-${n}`)).sort(),
    )
    for (const runId of handedBack) {
      const owners = (await store.listCheckpoints({ runId })).reverse().map((cp) => (cp.metadata.lease as { owner: string }).owner)
      expect(owners[0]).toBe('first')
      expect(owners.at(-1)).toBe('second')
      expect(owners.indexOf('second')).toBe(owners.lastIndexOf('first') + 1)
    }
  })

  it('a paused run is answered with respond(): the next worker resumes it with the answers', async () => {
    const store = new MemoryStore()
    const client = new CairnClient({ store })
    let payments = 0
    const agents = {
      pay: () => {
        const model = new ScriptedModel([[{ toolUse: { toolUseId: 'p', name: 'pay', input: { amount: 40 } } }], [{ text: 'paid' }]], { select: 'conversation' })
        const pay = tool({
          name: 'pay',
          description: 'Pay, once a human approves.',
          inputSchema: { type: 'object', properties: { amount: { type: 'number' } }, required: ['amount'] },
          callback: (_input, ctx) => {
            const answer = ctx.interrupt<string>({ name: 'approval', reason: 'pay $40?' })
            payments++
            return `payment ${answer}`
          },
        })
        return new Agent({ name: 'payer', model, tools: [pay] })
      },
    }
    await startWorker({ store, agents })
    await client.enqueue('pay', { input: 'pay the invoice', runId: 'invoice' })
    const paused = await client.result('invoice', { timeoutMs: 10_000 })
    expect(paused).toMatchObject({ status: 'paused', interrupts: [{ id: 'p:approval', reason: 'pay $40?' }] })
    await expect(client.respond('nope', { x: 1 })).rejects.toMatchObject({ code: 'run_not_found' })

    await expect(client.respond('invoice', { 'p:approval': 'approved' }, { answeredBy: '' })).rejects.toThrow('answeredBy must be a non-empty string')
    await client.respond('invoice', { 'p:approval': 'approved' }, { answeredBy: 'dana (billing)' })
    const done = await client.result('invoice', { timeoutMs: 10_000 })
    expect(done).toMatchObject({ status: 'completed' })
    expect(done.result?.result?.toString()).toBe('paid')
    expect(payments).toBe(1)
    expect(done.run.metadata.cairn).not.toHaveProperty('responses')
    expect(done.run.metadata.cairn).not.toHaveProperty('answeredBy')
    // Who answered is in the run's timeline, as a runner.resume with answeredBy records it.
    const answers = (await buildTimeline(store, 'invoice')).entries.flatMap((entry) => entry.answers)
    expect(answers).toMatchObject([{ interruptId: 'p:approval', answer: 'approved', by: 'dana (billing)' }])
    await expect(client.respond('invoice', { 'p:approval': 'again' })).rejects.toThrow('is completed, not paused')
  })

  it('a run whose executions keep failing is failed after maxRecoveryAttempts, with the reason recorded', async () => {
    const store = new MemoryStore()
    const client = new CairnClient({ store })
    let builds = 0
    const agents = {
      broken: () => {
        builds++
        throw new Error('the model endpoint is not configured')
      },
    }
    const { events } = await startWorker({ store, agents, maxRecoveryAttempts: 2 })
    await client.enqueue('broken', { input: 'go', runId: 'poison' })
    const outcome = await client.result('poison', { timeoutMs: 10_000 })
    const limit = events.flatMap((event) => (event.type === 'error' && event.error instanceof RecoveryLimitError ? [event.error] : []))
    expect(limit).toHaveLength(1)
    expect(limit[0]).toMatchObject({ runId: 'poison', recoveries: 3, maxRecoveryAttempts: 2, lastError: { message: 'the model endpoint is not configured' } })
    expect(builds).toBe(3)
    expect(outcome.status).toBe('failed')
    expect(outcome.error).toMatchObject({ name: 'RecoveryLimitError', code: 'max_recovery_attempts' })
    expect(outcome.error?.message).toContain('recovered 3 times')
    expect(outcome.error?.message).toContain('the model endpoint is not configured')
    expect(await store.leases!.getLease('poison')).toMatchObject({ owner: null, recoveries: 3, epoch: 4 })
  })

  it('a run of an agent the worker does not have is failed, naming it', async () => {
    const store = new MemoryStore()
    const client = new CairnClient({ store })
    await startWorker({ store, agents: { job: () => jobAgent({ effectsDir: tmpdir() }) }, id: 'w1' })
    await client.enqueue('summarize', { input: 'go', runId: 'r1' })
    const outcome = await client.result('r1', { timeoutMs: 10_000 })
    expect(outcome).toMatchObject({ status: 'failed', error: { code: 'unknown_job' } })
    expect(outcome.error?.message).toContain("no agent or workflow named 'summarize' is registered on worker w1")
  })

  it('result() times out with result_timeout while no worker serves the queue', async () => {
    const store = new MemoryStore()
    const client = new CairnClient({ store })
    await client.enqueue('job', { input: 'go', runId: 'r1', queue: 'nobody' })
    await expect(client.result('r1', { timeoutMs: 50, pollMs: 10 })).rejects.toMatchObject({ code: 'result_timeout' })
    expect(await client.cancel('r1')).toEqual({ outcome: 'cancelled', status: 'cancelled' })
    expect(await client.result('r1')).toMatchObject({ status: 'cancelled', result: undefined })
  })

  it('a worker whose lease was taken over stops the run: its tool’s signal fires and it writes nothing more', async () => {
    const dir = await effectsDir()
    const path = join(dir, 'cairn.db')
    const store = new SqliteStore({ path })
    cleanups.push(() => store.close())
    const client = new CairnClient({ store })
    let signalled = false
    let release: () => void = () => {}
    const agents = {
      job: () => {
        const agent = jobAgent({
          effectsDir: dir,
          onTool: (key) =>
            key.endsWith('call-1')
              ? new Promise<void>((resolve) => {
                  release = resolve
                })
              : undefined,
        })
        const tool = agent.tools.get('apply_effect')!
        const run = tool.run.bind(tool)
        // Watch the tool's signal: the worker aborts it when the lease is lost.
        Object.assign(tool, {
          run: (use: Parameters<typeof run>[0], ctx: Parameters<typeof run>[1]) => {
            ctx.signal.addEventListener('abort', () => {
              signalled = true
              release()
            })
            return run(use, ctx)
          },
        })
        return agent
      },
    }
    const { events } = await startWorker({ store, agents, leaseMs: 1000, heartbeatMs: 50, id: 'zombie' })
    await client.enqueue('job', { input: 'go', runId: 'r1' })
    await waitFor(() => events.some((e) => e.type === 'claimed'), 'the claim')
    await waitFor(async () => (await readFile(join(dir, 'attempts.log'), 'utf8').catch(() => '')).includes('call-1'), 'the second tool call')
    // Another worker takes the run over (as after a lapse): a higher epoch, another owner.
    const db = new Database(path)
    db.prepare("UPDATE runs SET owner = 'thief', lease_epoch = lease_epoch + 1 WHERE run_id = 'r1'").run()
    db.close()
    await waitFor(() => events.some((e) => e.type === 'lost'), 'the worker to notice')
    await waitFor(() => signalled, 'the tool’s signal')
    // A write posted before the takeover may still land (its fence held then); none after it.
    const before = (await store.listCheckpoints({ runId: 'r1' })).length
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(events.find((e) => e.type === 'lost')).toMatchObject({ runId: 'r1', epoch: 1 })
    expect(events.filter((e) => e.type === 'released')).toEqual([])
    expect((await store.listCheckpoints({ runId: 'r1' })).length).toBe(before)
    expect(await store.leases!.getLease('r1')).toMatchObject({ owner: 'thief', epoch: 2 })
    // The aborted call's outcome was never written (its intent may not have landed either).
    expect((await store.getEffect('r1', 'call-1'))?.status).not.toBe('succeeded')
  })
})

describe('Worker on a signed and encrypted store', () => {
  it('runs enqueued runs on a SqliteStore with keys: records are signed and encrypted, and unreadable without the key', async () => {
    const dir = await effectsDir()
    const keys = [{ id: 'worker-key', secret: Buffer.alloc(32, 7).toString('base64') }]
    const path = join(dir, 'signed.db')
    const store = new SqliteStore({ path, keys, encrypt: true })
    cleanups.push(() => store.close())
    const client = new CairnClient({ store })
    await startWorker({ store, agents: { job: () => jobAgent({ effectsDir: dir, cycles: 2 }) }, id: 'keyed' })
    await client.enqueue('job', { input: 'go', runId: 'signed-run' })
    const outcome = await client.result('signed-run', { timeoutMs: 10_000 })
    expect(outcome.result?.result?.toString()).toBe('applied 2 effects')
    expect((await store.listEffects('signed-run')).map((e) => e.status)).toEqual(['succeeded', 'succeeded'])
    // The final answer is nowhere in the clear; a handle without the key is refused.
    for (const file of [path, `${path}-wal`]) expect((await readFile(file).catch(() => Buffer.alloc(0))).includes('applied 2 effects'), file).toBe(false)
    const plain = new SqliteStore({ path })
    cleanups.push(() => plain.close())
    await expect(plain.getLatest({ runId: 'signed-run' })).rejects.toMatchObject({ code: 'checkpoint_integrity' })
  })
})
