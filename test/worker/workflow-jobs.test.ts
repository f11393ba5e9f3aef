import { afterEach, describe, expect, it } from 'vitest'
import { CairnClient, Executor, MemoryStore, Worker, WorkflowBuilder, executor, type WorkerEvent, type WorkerOptions, type WorkflowContext } from '../../src/index.js'

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function startWorker(options: Omit<WorkerOptions, 'onEvent'>): Promise<{ worker: Worker; events: WorkerEvent[] }> {
  const events: WorkerEvent[] = []
  const worker = new Worker({ pollMs: 20, ...options, onEvent: (event) => events.push(event) })
  cleanups.push(() => worker.stop({ timeoutMs: 0 }))
  await worker.start()
  return { worker, events }
}

/** Calls of each executor, across every workflow instance (a resumed run must not start over). */
const calls = { start: 0, square: 0 }

/** Squares 1..n, one number per super step (each `stepMs` long); `failAt` makes that number's step throw. */
function squaresWorkflow(options: { stepMs?: number; failAt?: number } = {}) {
  class Start extends Executor<number> {
    async handle(limit: number, ctx: WorkflowContext<number[]>): Promise<void> {
      calls.start++
      await ctx.sendMessage(Array.from({ length: limit }, (_, i) => i + 1))
    }
  }
  class Square extends Executor<number[]> {
    #results: Record<number, number> = {}
    async handle(remaining: number[], ctx: WorkflowContext<number[], Record<number, number>>): Promise<void> {
      calls.square++
      await new Promise((resolve) => setTimeout(resolve, options.stepMs ?? 0))
      const [n, ...rest] = remaining
      if (n === options.failAt) throw new Error(`cannot square ${n}`)
      this.#results[n!] = n! * n!
      if (rest.length === 0) await ctx.yieldOutput(this.#results)
      else await ctx.sendMessage(rest)
    }
    override async onCheckpointSave() {
      return { results: this.#results }
    }
    override async onCheckpointRestore(state: { results?: Record<number, number> }) {
      this.#results = state.results ?? {}
    }
  }
  const start = new Start('start')
  const square = new Square('square')
  return new WorkflowBuilder<number, Record<number, number>>({ name: 'squares', startExecutor: start }).addEdge(start, square).addEdge(square, square).build()
}

describe('Worker running workflows', () => {
  it('runs an enqueued workflow; the outcome carries its outputs and the run holding its checkpoints', async () => {
    const store = new MemoryStore()
    const client = new CairnClient({ store })
    await startWorker({ store, workflows: { squares: () => squaresWorkflow() } })
    await client.enqueue('squares', { input: 4, runId: 'sq' })
    const outcome = await client.result('sq', { timeoutMs: 10_000 })
    expect(outcome).toMatchObject({ status: 'completed', error: undefined, result: undefined })
    expect(outcome.workflow?.outputs).toEqual([{ 1: 1, 2: 4, 3: 9, 4: 16 }])
    const checkpoints = await store.listCheckpoints({ runId: outcome.workflow!.runId })
    expect(checkpoints.map((cp) => cp.phase).reverse()).toEqual(['entry', 'superstep', 'superstep', 'superstep', 'superstep', 'superstep'])
    expect(await store.getRun(outcome.workflow!.runId)).toMatchObject({ status: 'completed' })
  })

  it('a workflow handed back mid-run is resumed by another worker from its latest checkpoint, not started over', async () => {
    const store = new MemoryStore()
    const client = new CairnClient({ store })
    calls.start = 0
    calls.square = 0
    const first = await startWorker({ store, workflows: { squares: () => squaresWorkflow({ stepMs: 40 }) }, id: 'first' })
    await client.enqueue('squares', { input: 8, runId: 'sq' })
    while (calls.square < 3) await new Promise((resolve) => setTimeout(resolve, 10))
    await first.worker.stop({ timeoutMs: 0 })
    expect(first.events.find((e) => e.type === 'released')).toMatchObject({ runId: 'sq', reason: 'suspended' })
    const squaredBefore = calls.square

    await startWorker({ store, workflows: { squares: () => squaresWorkflow({ stepMs: 1 }) }, id: 'second' })
    const outcome = await client.result('sq', { timeoutMs: 10_000 })
    expect(outcome.status).toBe('completed')
    expect(outcome.workflow?.outputs).toEqual([Object.fromEntries(Array.from({ length: 8 }, (_, i) => [i + 1, (i + 1) ** 2]))])
    expect(calls.start).toBe(1)
    // Only the step cut short ran again: 8 steps in all, plus at most one repeated.
    expect(calls.square - squaredBefore).toBeLessThanOrEqual(8 - squaredBefore + 1)
    const owners = (await store.listCheckpoints({ runId: outcome.workflow!.runId })).map((cp) => (cp.metadata.lease as { owner: string }).owner)
    expect(new Set(owners)).toEqual(new Set(['first', 'second']))
  })

  it('a workflow that fails fails its run with the workflow’s error, without retrying it', async () => {
    const store = new MemoryStore()
    const client = new CairnClient({ store })
    const { events } = await startWorker({ store, workflows: { squares: () => squaresWorkflow({ failAt: 2 }) } })
    await client.enqueue('squares', { input: 3, runId: 'sq' })
    const outcome = await client.result('sq', { timeoutMs: 10_000 })
    expect(outcome).toMatchObject({ status: 'failed', error: { code: 'executor_failed' } })
    expect(outcome.error?.message).toContain('cannot square 2')
    expect(events.filter((e) => e.type === 'claimed')).toHaveLength(1)
  })

  it('a cancelled workflow stops at its next checkpoint', async () => {
    const store = new MemoryStore()
    const client = new CairnClient({ store })
    calls.square = 0
    await startWorker({ store, workflows: { squares: () => squaresWorkflow({ stepMs: 30 }) }, leaseMs: 2000, heartbeatMs: 20 })
    await client.enqueue('squares', { input: 50, runId: 'sq' })
    while (calls.square < 2) await new Promise((resolve) => setTimeout(resolve, 10))
    expect(await client.cancel('sq')).toMatchObject({ outcome: 'requested' })
    expect(await client.result('sq', { timeoutMs: 10_000 })).toMatchObject({ status: 'cancelled' })
    expect(calls.square).toBeLessThan(10)
  })

  it('a workflow waiting for a human is answered with respond() and finished by the next worker', async () => {
    const store = new MemoryStore()
    const client = new CairnClient({ store })
    const approval = () => {
      const review = executor('review', async (text: string, ctx) => void (await ctx.requestInfo({ question: 'Publish?', draft: text })), {
        handleResponse: async (response, _request, ctx: WorkflowContext<never, string>) => void (await ctx.yieldOutput(`published: ${String(response)}`)),
      })
      return new WorkflowBuilder<string, string>({ name: 'approval', startExecutor: review }).build()
    }
    await startWorker({ store, workflows: { approval } })
    await client.enqueue('approval', { input: 'a draft', runId: 'post' })
    const paused = await client.result('post', { timeoutMs: 10_000 })
    expect(paused.status).toBe('paused')
    const [request] = paused.workflow?.pendingRequests ?? []
    expect(request).toMatchObject({ data: { question: 'Publish?', draft: 'a draft' } })
    await client.respond('post', { [request!.requestId]: 'yes' })
    const done = await client.result('post', { timeoutMs: 10_000 })
    expect(done).toMatchObject({ status: 'completed', workflow: { runId: paused.workflow!.runId, outputs: ['published: yes'] } })
  })

  it('refuses a name given to both an agent and a workflow', () => {
    const store = new MemoryStore()
    expect(() => new Worker({ store, agents: { squares: () => undefined as never }, workflows: { squares: () => squaresWorkflow() } })).toThrow('names both an agent and a workflow')
  })
})
