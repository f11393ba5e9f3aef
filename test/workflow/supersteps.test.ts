import { describe, expect, it } from 'vitest'
import {
  executor,
  MemoryStore,
  loadWorkflowCheckpoint,
  WorkflowBuilder,
  WorkflowError,
  type WorkflowCheckpoint,
  type WorkflowContext,
  type WorkflowEvent,
} from '../../src/index.js'
import { collect, deferred, squares, squaresWorkflow, types } from './helpers.js'

describe('super steps', () => {
  it('runs the squares example to its output: messages sent in one super step are delivered in the next', async () => {
    const { workflow, worker } = squaresWorkflow()
    const result = await workflow.run({ message: 10 })
    expect(result.getOutputs()).toEqual([squares(10)])
    expect(result.status).toBe('idle')
    // start in superstep 1, then the worker once per super step through its self-loop.
    const invoked = result.events.filter((e) => e.type === 'executor_invoked')
    expect(invoked.map((e) => `${e.iteration}:${e.executorId}`)).toEqual(['1:start', ...Array.from({ length: 10 }, (_, i) => `${i + 2}:worker`)])
    expect(worker.handled).toBe(10)
  })

  it('emits workflow_started, superstep and executor events, output and workflow_completed in order', async () => {
    const { workflow } = squaresWorkflow()
    const events = await collect(workflow.stream({ message: 2 }))
    expect(types(events)).toEqual([
      'workflow_started',
      ...['superstep_started', 'executor_invoked', 'executor_completed', 'superstep_completed'],
      ...['superstep_started', 'executor_invoked', 'executor_completed', 'superstep_completed'],
      ...['superstep_started', 'executor_invoked', 'output', 'executor_completed', 'superstep_completed'],
      'workflow_completed',
    ])
  })

  it('checkpoints at the end of every super step, with build-time storage or a per-run storage that overrides it for that run only', async () => {
    const built = new MemoryStore()
    const perRun = new MemoryStore()
    const { workflow } = squaresWorkflow(built)
    const first = await workflow.run({ message: 3, store: perRun })
    expect(await perRun.listCheckpoints({ workflowName: 'squares' })).toHaveLength(5)
    expect(await built.listCheckpoints({ workflowName: 'squares' })).toHaveLength(0)
    const second = await workflow.run({ message: 3 })
    expect(await built.listCheckpoints({ workflowName: 'squares' })).toHaveLength(5)
    expect(await perRun.listCheckpoints({ workflowName: 'squares' })).toHaveLength(5)
    expect(second.runId).not.toBe(first.runId)

    // A workflow built without storage does not checkpoint, unless a run is given one.
    const { workflow: bare } = squaresWorkflow(null)
    const unsaved = await bare.run({ message: 2 })
    expect(unsaved.events.filter((e) => e.type === 'superstep_completed').map((e) => e.checkpointId)).toEqual([undefined, undefined, undefined])
    const extra = new MemoryStore()
    await bare.run({ message: 2, store: extra })
    expect(await extra.listCheckpoints({ workflowName: 'squares' })).toHaveLength(4)
  })

  it("a super step's checkpoint holds its committed state writes and the requests it raised", async () => {
    const storage = new MemoryStore()
    const asker = executor('asker', async (topic: string, ctx) => {
      ctx.state.set('topic', topic)
      await ctx.requestInfo({ question: `approve ${topic}?` })
    })
    const workflow = new WorkflowBuilder({ name: 'ask', startExecutor: asker, store: storage }).build()
    const events = await collect(workflow.stream({ message: 'release' }))
    const completed = events.find((e) => e.type === 'superstep_completed')!
    // The request event comes before the super step's completion, whose checkpoint holds it.
    expect(types(events).indexOf('request_info')).toBeLessThan(types(events).indexOf('superstep_completed'))
    const checkpoint = await loadWorkflowCheckpoint(storage, completed.checkpointId!)
    expect(checkpoint.state).toEqual({ topic: 'release' })
    expect(Object.values(checkpoint.pendingRequestInfoEvents).map((r) => r.data)).toEqual([{ question: 'approve release?' }])
  })

  it('one checkpoint per super step plus the entry one, with contiguous iterations; the entry records the raw input before any executor ran', async () => {
    const storage = new MemoryStore()
    const { workflow, worker } = squaresWorkflow(storage)
    const handledAtSave: number[] = []
    // The run owns its run id, so its checkpoints go through the fenced `write`.
    const write = storage.write.bind(storage)
    storage.write = async (batch) => {
      if (batch.checkpoints?.length) handledAtSave.push(worker.handled)
      return write(batch)
    }
    const result = await workflow.run({ message: 4 })
    const supersteps = result.events.filter((e) => e.type === 'superstep_completed').length
    const history = (await storage.listCheckpoints({ runId: result.runId })).reverse()
    expect(supersteps).toBe(5)
    expect(history).toHaveLength(supersteps + 1)
    expect(history.map((h) => h.metadata.iterationCount)).toEqual([0, 1, 2, 3, 4, 5])
    expect(history.map((h) => h.phase)).toEqual(['entry', 'superstep', 'superstep', 'superstep', 'superstep', 'superstep'])
    expect(handledAtSave[0]).toBe(0)
    const entry = await loadWorkflowCheckpoint(storage, history[0]!.id)
    expect(entry.iterationCount).toBe(0)
    expect(entry.previousCheckpointId).toBeNull()
    expect(entry.messages).toEqual([{ kind: 'message', sourceId: '$input', targetId: 'start', data: 4 }])
  })

  it('state writes are staged (visible to the writer at once, to others after the super step) and only committed state is checkpointed', async () => {
    const storage = new MemoryStore()
    const seen: Record<string, unknown> = {}
    const gate = deferred()
    const start = executor('start', async (_: unknown, ctx) => {
      await ctx.sendMessage('go')
    })
    const writer = executor('writer', async (_: unknown, ctx) => {
      ctx.state.set('count', 1)
      seen.writerOwn = ctx.state.get('count')
      gate.resolve()
    })
    const reader = executor('reader', async (_: unknown, ctx: WorkflowContext) => {
      await gate.promise
      seen.readerSameStep = ctx.state.get('count')
      seen.readerKeys = ctx.state.keys()
      await ctx.sendMessage('again')
    })
    const later = executor('later', async (_: unknown, ctx) => {
      seen.nextStep = ctx.state.get('count')
    })
    const workflow = new WorkflowBuilder({ name: 'staged', startExecutor: start, store: storage })
      .addFanOutEdges(start, [writer, reader])
      .addEdge(reader, later)
      .build()
    const events = await collect(workflow.stream({ message: 'x' }))
    expect(seen).toEqual({ writerOwn: 1, readerSameStep: undefined, readerKeys: [], nextStep: 1 })
    const ids = events.flatMap((e) => (e.type === 'superstep_completed' ? [e.checkpointId!] : []))
    const states = await Promise.all(ids.map(async (id) => (await loadWorkflowCheckpoint(storage, id)).state))
    expect(states).toEqual([{}, { count: 1 }, { count: 1 }])
  })

  it('writes of a super step that fails are never committed', async () => {
    const storage = new MemoryStore()
    let fail = true
    const start = executor('start', async (_: unknown, ctx) => {
      ctx.state.set('step', 'start')
      await ctx.sendMessage('next')
    })
    const flaky = executor('flaky', async (_: unknown, ctx) => {
      ctx.state.set('step', 'flaky')
      if (fail) throw new Error('boom')
    })
    const build = () => new WorkflowBuilder({ name: 'flaky', startExecutor: start, store: storage }).addEdge(start, flaky).build()
    await expect(build().run({ message: 1 })).rejects.toThrow(/executor flaky failed in superstep 2: boom/)
    const latest = await storage.getLatest<WorkflowCheckpoint>({ workflowName: 'flaky' })
    expect(latest!.payload.iterationCount).toBe(1)
    expect(latest!.payload.state).toEqual({ step: 'start' })
    fail = false
    await build().run({ checkpointId: latest!.checkpointId })
    expect((await storage.getLatest<WorkflowCheckpoint>({ workflowName: 'flaky' }))!.payload.state).toEqual({ step: 'flaky' })
  })

  it('superstep_started and superstep_completed are emitted, and each completed event carries the id of the checkpoint it wrote', async () => {
    const { workflow, storage } = squaresWorkflow()
    const events = await collect(workflow.stream({ message: 3 }))
    const started = events.filter((e) => e.type === 'superstep_started').map((e) => e.iteration)
    const completed = events.filter((e): e is Extract<WorkflowEvent, { type: 'superstep_completed' }> => e.type === 'superstep_completed')
    expect(started).toEqual([1, 2, 3, 4])
    expect(completed.map((e) => e.iteration)).toEqual([1, 2, 3, 4])
    for (const event of completed) {
      const checkpoint = await loadWorkflowCheckpoint(storage, event.checkpointId!)
      expect(checkpoint.iterationCount).toBe(event.iteration)
      expect(checkpoint.checkpointId).toBe(event.checkpointId)
    }
  })

  it('runs the executors of one super step concurrently', async () => {
    const order: string[] = []
    const bothStarted = { a: deferred(), b: deferred() }
    const start = executor('start', async (_: unknown, ctx) => ctx.sendMessage('go'))
    const a = executor('a', async () => {
      order.push('a started')
      bothStarted.a.resolve()
      await bothStarted.b.promise
      order.push('a done')
    })
    const b = executor('b', async () => {
      order.push('b started')
      bothStarted.b.resolve()
      await bothStarted.a.promise
      order.push('b done')
    })
    await new WorkflowBuilder({ name: 'parallel', startExecutor: start }).addFanOutEdges(start, [a, b]).build().run({ message: 1 })
    expect(order.slice(0, 2).sort()).toEqual(['a started', 'b started'])
  })

  it('fails a run that exceeds maxSupersteps with an error that says so, after the last allowed checkpoint', async () => {
    const storage = new MemoryStore()
    const loop = executor('loop', async (n: number, ctx: WorkflowContext<number>) => ctx.sendMessage(n + 1))
    const workflow = new WorkflowBuilder({ name: 'forever', startExecutor: loop, store: storage, maxSupersteps: 5 }).addEdge(loop, loop).build()
    const events: WorkflowEvent[] = []
    const error = await (async () => {
      for await (const event of workflow.stream({ message: 0 })) events.push(event)
    })().catch((err: unknown) => err)
    expect(error).toBeInstanceOf(WorkflowError)
    expect((error as WorkflowError).code).toBe('max_supersteps')
    expect((error as Error).message).toMatch(/exceeded maxSupersteps \(5\)/)
    expect(events.at(-1)).toMatchObject({ type: 'workflow_failed', error })
    expect((await storage.getLatest<WorkflowCheckpoint>({ workflowName: 'forever' }))!.payload.iterationCount).toBe(5)
    // A run may raise the limit: resuming goes on from iteration 5.
    const more = await workflow.run({ checkpointId: (await storage.getLatest({ workflowName: 'forever' }))!.checkpointId, maxSupersteps: 6 }).catch((e: unknown) => e)
    expect((more as Error).message).toMatch(/exceeded maxSupersteps \(6\): messages are still in flight after superstep 6/)
  })

  it('fails loudly when an executor throws: workflow_failed, then an error naming the executor and super step', async () => {
    const start = executor('start', async (_: unknown, ctx) => ctx.sendMessage(1))
    const bad = executor('bad', async () => {
      throw new Error('no luck')
    })
    const workflow = new WorkflowBuilder({ name: 'failing', startExecutor: start }).addEdge(start, bad).build()
    const events: WorkflowEvent[] = []
    const error = await (async () => {
      for await (const event of workflow.stream({ message: 1 })) events.push(event)
    })().catch((err: unknown) => err as WorkflowError)
    expect(error).toMatchObject({ code: 'executor_failed', executorId: 'bad', superstep: 2 })
    expect((error as Error).message).toBe('workflow failing: executor bad failed in superstep 2: no luck')
    expect(events.at(-1)).toMatchObject({ type: 'workflow_failed', executorId: 'bad', iteration: 2 })
  })

  it('runs one run at a time per instance', async () => {
    const gate = deferred()
    const slow = executor('slow', async () => gate.promise)
    const workflow = new WorkflowBuilder({ name: 'slow', startExecutor: slow }).build()
    const first = workflow.run({ message: 1 })
    await new Promise((resolve) => setTimeout(resolve, 10))
    await expect(workflow.run({ message: 2 })).rejects.toMatchObject({ code: 'workflow_busy' })
    gate.resolve()
    await first
    await expect(workflow.run({ message: 3 })).resolves.toBeDefined()
  })

  it('aborts ctx.signal and waits for the running executors when the caller stops consuming mid-step', async () => {
    const gate = deferred()
    let aborted = false
    const start = executor('start', async (_: unknown, ctx) => {
      await ctx.yieldOutput('early')
      ctx.signal.addEventListener('abort', () => {
        aborted = true
        gate.resolve()
      })
      await gate.promise
    })
    const workflow = new WorkflowBuilder({ name: 'abandoned', startExecutor: start }).build()
    for await (const event of workflow.stream({ message: 1 })) if (event.type === 'output') break
    expect(aborted).toBe(true)
    await expect(workflow.run({ message: 2 })).resolves.toBeDefined()
  })
})
