import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  CheckpointCorruptionError,
  ConfigMismatchError,
  Executor,
  executor,
  FileStore,
  MemoryStore,
  loadWorkflowCheckpoint,
  WorkflowBuilder,
  WorkflowCheckpointError,
  type CheckpointStorage,
  type ExecutorState,
  type WorkflowCheckpoint,
  type WorkflowContext,
  type WorkflowEvent,
} from '../../src/index.js'
import { collect, JsonTextStorage, squares, squaresWorkflow, StartExecutor, WorkerExecutor } from './helpers.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** The checkpoint of the last completed super step among `events`. */
function lastCheckpointId(events: readonly WorkflowEvent[]): string {
  const completed = events.findLast((e) => e.type === 'superstep_completed')
  if (completed?.checkpointId === undefined) throw new Error('no checkpointed super step')
  return completed.checkpointId
}

/** Every checkpoint of a run, oldest first. */
async function history(storage: CheckpointStorage, runId: string) {
  return (await storage.listCheckpoints({ runId })).reverse()
}

describe('workflow checkpoints', () => {
  let dir = ''
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-workflow-'))
  })
  afterEach(async () => {
    // A FileStore a failed test left open may still be syncing into a run's directory: retry a directory that filled meanwhile.
    await rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 })
  })

  it('a checkpoint has checkpointId, workflowName, graphSignatureHash, lineage, an ISO UTC timestamp, in-flight messages, committed state, executor states, pending requests, iterationCount, metadata and version', async () => {
    const { workflow, storage } = squaresWorkflow()
    const result = await workflow.run({ message: 3 })
    const checkpoints = await Promise.all((await history(storage, result.runId)).map((h) => loadWorkflowCheckpoint(storage, h.id)))
    const second = checkpoints[2]!
    expect(second.checkpointId).toMatch(UUID)
    expect(second.workflowName).toBe('squares')
    expect(second.graphSignatureHash).toBe(workflow.graphSignatureHash)
    expect(second.graphSignatureHash).toMatch(/^[0-9a-f]{64}$/)
    expect(checkpoints.map((c) => c.previousCheckpointId)).toEqual([null, ...checkpoints.slice(0, -1).map((c) => c.checkpointId)])
    expect(second.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    expect(second.messages).toEqual([{ kind: 'message', sourceId: 'worker', targetId: 'worker', data: { remaining: [2, 3] } }])
    expect(second.state).toEqual({})
    expect(second.executorStates).toEqual({ start: {}, worker: { results: { 1: 1 } } })
    expect(second.pendingRequestInfoEvents).toEqual({})
    expect(second.iterationCount).toBe(2)
    expect(second.metadata).toMatchObject({ phase: 'superstep', runId: result.runId, graphSignature: workflow.graphSignature })
    expect(second.version).toBe(1)
  })

  it('onCheckpointSave and onCheckpointRestore are called for every executor', async () => {
    const calls: string[] = []
    const tracked = (id: string) =>
      executor(id, async (n: number, ctx: WorkflowContext<number>) => (n > 0 ? ctx.sendMessage(n - 1) : undefined), {
        onCheckpointSave: () => {
          calls.push(`save ${id}`)
          return { id }
        },
        onCheckpointRestore: (state) => {
          calls.push(`restore ${id} ${JSON.stringify(state)}`)
        },
      })
    const storage = new MemoryStore()
    const build = () => {
      const [a, b] = [tracked('a'), tracked('b')]
      return new WorkflowBuilder({ name: 'hooks', startExecutor: a, store: storage }).addEdge(a, b).build()
    }
    const result = await build().run({ message: 1 })
    expect(calls).toEqual(['save a', 'save b', 'save a', 'save b', 'save a', 'save b'])
    calls.length = 0
    await build().run({ checkpointId: result.checkpointId! })
    expect(calls).toEqual(['restore a {"id":"a"}', 'restore b {"id":"b"}'])
  })

  it('a hook that throws or returns a non-object is wrapped in a checkpoint error; unknown executor ids or bad shapes in a checkpoint are refused on restore', async () => {
    const storage = new MemoryStore()
    const failing = executor('failing', () => {}, { onCheckpointSave: () => Promise.reject(new Error('disk full')) })
    const error = await new WorkflowBuilder({ name: 'bad-hook', startExecutor: failing, store: storage }).build().run({ message: 1 }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(WorkflowCheckpointError)
    expect(error).toMatchObject({ code: 'executor_hook_failed', executorId: 'failing', cause: new Error('disk full') })
    expect((error as Error).message).toMatch(/executor failing's onCheckpointSave threw: disk full/)

    const wrongShape = executor('wrong', () => {}, { onCheckpointSave: () => [1, 2] as unknown as ExecutorState })
    await expect(new WorkflowBuilder({ name: 'wrong', startExecutor: wrongShape, store: storage }).build().run({ message: 1 })).rejects.toThrow(
      /onCheckpointSave returned an array; return a plain object/,
    )

    const throwsOnRestore = () => executor('r', () => {}, { onCheckpointRestore: () => Promise.reject(new Error('nope')) })
    const restoring = new WorkflowBuilder({ name: 'restore', startExecutor: throwsOnRestore(), store: storage }).build()
    const done = await restoring.run({ message: 1 })
    await expect(restoring.run({ checkpointId: done.checkpointId! })).rejects.toMatchObject({ code: 'executor_hook_failed', executorId: 'r' })

    // Tampered checkpoints: state of an executor the graph does not have, and a state that is not an object.
    const { workflow, storage: squaresStorage } = squaresWorkflow()
    const ran = await workflow.run({ message: 2 })
    const record = await squaresStorage.load<WorkflowCheckpoint>(ran.checkpointId!)
    const tamper = async (change: (p: WorkflowCheckpoint) => void) => {
      const payload = structuredClone(record.payload)
      change(payload)
      return squaresStorage.save({ runId: 'tampered', kind: 'workflow', phase: 'superstep', workflowName: 'squares', payload })
    }
    const ghost = await tamper((p) => (p.executorStates.ghost = {}))
    await expect(squaresWorkflow(squaresStorage).workflow.run({ checkpointId: ghost })).rejects.toThrow(CheckpointCorruptionError)
    await expect(squaresWorkflow(squaresStorage).workflow.run({ checkpointId: ghost })).rejects.toThrow(/state of unknown executor ghost/)
    const badShape = await tamper((p) => (p.executorStates.worker = 5 as unknown as ExecutorState))
    await expect(squaresWorkflow(squaresStorage).workflow.run({ checkpointId: badShape })).rejects.toThrow(/an executor state is not an object/)
  })

  it('the graph signature covers the start executor, executor types, edges, and condition and selection names', async () => {
    class OtherWorker extends WorkerExecutor {}
    const base = (options: { worker?: Executor; start?: 'start' | 'worker'; condition?: string; selection?: string; extra?: boolean } = {}) => {
      const start = new StartExecutor('start')
      const worker = options.worker ?? new WorkerExecutor('worker')
      const audit = executor('audit', () => {})
      const builder = new WorkflowBuilder({ name: 'sig', startExecutor: options.start === 'worker' ? worker : start })
      builder.addEdge(start, worker).addEdge(worker, worker, options.condition ? { condition: () => true, conditionName: options.condition } : {})
      if (options.selection) builder.addFanOutEdges(start, [audit], { selection: (_m, t) => t, selectionName: options.selection })
      if (options.extra) builder.addEdge(worker, audit)
      return builder.build().graphSignatureHash
    }
    const hash = base()
    expect(base()).toBe(hash)
    const variants = [
      base({ worker: new OtherWorker('worker') }),
      base({ start: 'worker' }),
      base({ extra: true }),
      base({ condition: 'hasMore' }),
      base({ condition: 'isDone' }),
      base({ selection: 'all' }),
      base({ selection: 'first' }),
    ]
    expect(new Set([hash, ...variants]).size).toBe(variants.length + 1)
  })

  it('resuming under a changed graph is a ConfigMismatchError that says the workflow changed and what', async () => {
    const { workflow, storage } = squaresWorkflow()
    const first = await workflow.run({ message: 3 })
    const start = new StartExecutor('start')
    const worker = new WorkerExecutor('worker')
    const reviewer = executor('reviewer', () => {})
    const changed = new WorkflowBuilder({ name: 'squares', startExecutor: start, store: storage }).addEdge(start, worker).addEdge(worker, worker).addEdge(worker, reviewer).build()
    const error = await changed.run({ checkpointId: first.checkpointId! }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ConfigMismatchError)
    expect((error as Error).message).toMatch(/workflow squares has changed since checkpoint .* \(the graph has changed: executor reviewer was added; edge group single worker → reviewer was added or changed\)/)
    expect(error).toMatchObject({ expected: workflow.graphSignatureHash, actual: changed.graphSignatureHash })

    const otherName = new WorkflowBuilder({ name: 'cubes', startExecutor: start, store: storage }).addEdge(start, worker).addEdge(worker, worker).build()
    await expect(otherName.run({ checkpointId: first.checkpointId! })).rejects.toThrow(/belongs to workflow squares, not cubes/)
  })

  it('a resume restores state, executor states, in-flight messages and pending requests, continues the iteration count and the lineage in the same run', async () => {
    const { workflow, storage } = squaresWorkflow()
    const stopped: WorkflowEvent[] = []
    for await (const event of workflow.stream({ message: 5 })) {
      stopped.push(event)
      if (event.type === 'superstep_completed' && event.iteration === 3) break
    }
    const restoredId = lastCheckpointId(stopped)
    const { workflow: fresh, worker } = squaresWorkflow(storage)
    const events = await collect(fresh.stream({ checkpointId: restoredId }))
    expect(events[0]).toMatchObject({ type: 'workflow_started', resumedFrom: restoredId, iteration: 3 })
    expect(events.filter((e) => e.type === 'superstep_started').map((e) => e.iteration)).toEqual([4, 5, 6])
    expect(worker.handled).toBe(3)
    expect(events.flatMap((e) => (e.type === 'output' ? [e.data] : []))).toEqual([squares(5)])
    const first = await loadWorkflowCheckpoint(storage, events.find((e) => e.type === 'superstep_completed')!.checkpointId!)
    expect(first.previousCheckpointId).toBe(restoredId)
    const record = await storage.load(first.checkpointId)
    const restored = await storage.load(restoredId)
    expect(record.runId).toBe(restored.runId)
    expect(record.parentId).toBe(restoredId)
    expect(record.seq).toBeGreaterThan(restored.seq)
  })

  it('a resume loads from the storage passed to the run, and needs one', async () => {
    const storage = new MemoryStore()
    const { workflow } = squaresWorkflow(storage)
    const first = await workflow.run({ message: 2 })
    const { workflow: bare } = squaresWorkflow(null)
    await expect(bare.run({ checkpointId: first.checkpointId! })).rejects.toThrow(/has no store/)
    const resumed = await bare.run({ checkpointId: first.checkpointId!, store: storage })
    expect(resumed.status).toBe('idle')
    await expect(bare.run({ checkpointId: 'missing-id', store: storage })).rejects.toMatchObject({ code: 'checkpoint_not_found' })
  })

  it('checkpoints belong to the workflow definition: a new instance on a new storage object restores them, and resuming from every checkpoint of a run reproduces the same outputs', async () => {
    const storagePath = join(dir, 'checkpoints')
    const stores: FileStore[] = []
    const open = () => {
      const store = new FileStore({ directory: storagePath })
      stores.push(store)
      return store
    }
    const emitter = () => {
      const start = executor('start', async (n: number, ctx: WorkflowContext<number>) => ctx.sendMessage(n))
      const step = executor('step', async (n: number, ctx: WorkflowContext<number, string>) => {
        await ctx.yieldOutput(`step ${ctx.iteration}: ${n}`)
        ctx.state.set('last', n)
        if (n > 0) await ctx.sendMessage(n - 1)
      })
      return new WorkflowBuilder<number, string>({ name: 'countdown', startExecutor: start, store: open() })
        .addEdge(start, step)
        .addEdge(step, step)
        .build()
    }
    const original = await emitter().run({ message: 3 })
    const outputs = original.getOutputs()
    expect(outputs).toEqual(['step 2: 3', 'step 3: 2', 'step 4: 1', 'step 5: 0'])
    const storage = open()
    const checkpoints = await history(storage, original.runId)
    expect(checkpoints).toHaveLength(6)
    for (const checkpoint of checkpoints) {
      const iteration = checkpoint.metadata.iterationCount as number
      const replay = await emitter().run({ checkpointId: checkpoint.id })
      expect(replay.getOutputs(), `resumed from iteration ${iteration}`).toEqual(outputs.filter((o) => Number(/step (\d+)/.exec(o)![1]) > iteration))
    }
    // Every resume appended to the same run: its latest checkpoint never moved backwards.
    const all = await storage.listCheckpoints({ runId: original.runId })
    expect(all.map((c) => c.seq)).toEqual([...all.map((c) => c.seq)].sort((a, b) => b - a))
    for (const store of stores) await store.close()
  })

  it('the squares example resumed from each of its non-terminal checkpoints prints the same results', async () => {
    const { workflow, storage } = squaresWorkflow()
    const result = await workflow.run({ message: 6 })
    const checkpoints = (await history(storage, result.runId)).slice(0, -1)
    for (const checkpoint of checkpoints) {
      const replay = await squaresWorkflow(storage).workflow.run({ checkpointId: checkpoint.id })
      expect(replay.getOutputs()).toEqual([squares(6)])
    }
  })

  it('a failed checkpoint save fails the run loudly, naming the super step; the last good checkpoint still resumes', async () => {
    const storage = new MemoryStore()
    const { workflow } = squaresWorkflow(storage)
    // The run owns its run id, so its checkpoints go through the fenced `write`.
    const write = storage.write.bind(storage)
    let saves = 0
    storage.write = async (batch) => {
      if (batch.checkpoints?.length && ++saves === 4) throw new Error('disk unplugged')
      return write(batch)
    }
    const events: WorkflowEvent[] = []
    const error = await (async () => {
      for await (const event of workflow.stream({ message: 5 })) events.push(event)
    })().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(WorkflowCheckpointError)
    expect(error).toMatchObject({ code: 'checkpoint_save_failed', superstep: 3 })
    expect((error as Error).message).toBe('workflow squares: the checkpoint of superstep 3 could not be saved: disk unplugged')
    expect(events.at(-1)).toMatchObject({ type: 'workflow_failed', iteration: 3 })
    expect(events.filter((e) => e.type === 'superstep_completed')).toHaveLength(2)
    storage.write = write
    const latest = await storage.getLatest<WorkflowCheckpoint>({ workflowName: 'squares' })
    expect(latest!.payload.iterationCount).toBe(2)
    expect((await squaresWorkflow(storage).workflow.run({ checkpointId: latest!.checkpointId })).getOutputs()).toEqual([squares(5)])
  })

  it('executor state, shared state and messages keep Date, Map, Set, bytes, BigInt and nested objects across a restore in a fresh instance', async () => {
    const storagePath = join(dir, 'rich')
    const rich = () => ({ at: new Date('2024-01-02T03:04:05.678Z'), seen: new Set(['a']), index: new Map([[1, { deep: [1n] }]]), raw: new Uint8Array([1, 2, 255]) })
    type Rich = ReturnType<typeof rich>
    let received: Rich | undefined
    let restored: ExecutorState | undefined
    let stateSeen: unknown
    const stores: FileStore[] = []
    const build = () => {
      const store = new FileStore({ directory: storagePath })
      stores.push(store)
      const start = executor('start', async (_: unknown, ctx: WorkflowContext<Rich>) => {
        ctx.state.set('rich', rich())
        await ctx.sendMessage(rich())
      }, { onCheckpointSave: () => ({ rich: rich() }), onCheckpointRestore: (state) => void (restored = state) })
      const end = executor('end', async (message: Rich, ctx) => {
        received = message
        stateSeen = ctx.state.get('rich')
      })
      return new WorkflowBuilder({ name: 'rich', startExecutor: start, store }).addEdge(start, end).build()
    }
    const stopped: WorkflowEvent[] = []
    for await (const event of build().stream({ message: 1 })) {
      stopped.push(event)
      if (event.type === 'superstep_completed') break
    }
    await build().run({ checkpointId: lastCheckpointId(stopped) })
    for (const store of stores) await store.close()
    expect(received).toEqual(rich())
    expect(received!.raw).toBeInstanceOf(Uint8Array)
    expect(stateSeen).toEqual(rich())
    expect(restored).toEqual({ rich: rich() })
  })

  it('a value that cannot be serialized fails at save with its path named', async () => {
    const holder = executor('holder', async (_: unknown, ctx) => ctx.state.set('client', { connect: () => 1 }))
    const workflow = new WorkflowBuilder({ name: 'unserializable', startExecutor: holder, store: new MemoryStore() }).build()
    const error = await workflow.run({ message: 1 }).catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'checkpoint_save_failed', path: 'payload.state.client.connect', superstep: 1 })
    expect((error as Error).message).toBe('workflow unserializable: the checkpoint of superstep 1 could not be saved: payload.state.client.connect: a function cannot be checkpointed')

    const sender = executor('sender', async (_: unknown, ctx) => ctx.sendMessage({ when: new Date(0), callback: () => 2 }))
    const sink = executor('sink', () => {})
    const sends = new WorkflowBuilder({ name: 'sends', startExecutor: sender, store: new MemoryStore() }).addEdge(sender, sink).build()
    await expect(sends.run({ message: 1 })).rejects.toThrow('payload.messages[0].data.callback: a function cannot be checkpointed')
  })

  it('storage is a trust boundary: a stored value of a type outside the allowlist is a corruption error on resume, and __proto__ never reaches a prototype', async () => {
    const storage = new JsonTextStorage()
    const { workflow } = squaresWorkflow(storage)
    const stopped: WorkflowEvent[] = []
    for await (const event of workflow.stream({ message: 3 })) {
      stopped.push(event)
      if (event.type === 'superstep_completed') break
    }
    const id = lastCheckpointId(stopped)
    const text = storage.rows.get(id)!
    storage.rows.set(id, text.replace('"state":{}', '"state":{"evil":{"~":"Function","v":"process.exit(1)"}}'))
    await expect(squaresWorkflow(storage).workflow.run({ checkpointId: id })).rejects.toThrow(CheckpointCorruptionError)
    storage.rows.set(id, text.replace('"state":{}', '"state":{"__proto__":{"polluted":true}}'))
    const resumed = await squaresWorkflow(storage).workflow.run({ checkpointId: id })
    expect(resumed.getOutputs()).toEqual([squares(3)])
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })
})

describe('a workflow store under its former name', () => {
  it('checkpointStorage still works as a deprecated name of store, when building and when running', async () => {
    const storage = new MemoryStore()
    const build = (options: { store?: MemoryStore; checkpointStorage?: MemoryStore }) => {
      const start = new StartExecutor('start')
      const worker = new WorkerExecutor('worker')
      return new WorkflowBuilder<number, Record<number, number>>({ name: 'squares', startExecutor: start, ...options }).addEdge(start, worker).addEdge(worker, worker).build()
    }
    const built = build({ checkpointStorage: storage })
    expect(built.store).toBe(storage)
    expect(built.checkpointStorage).toBe(storage)
    const first = await built.run({ message: 2 })
    expect((await storage.load(first.checkpointId!)).kind).toBe('workflow')
    const perRun = await build({}).run({ message: 2, checkpointStorage: storage })
    expect((await storage.load(perRun.checkpointId!)).runId).toBe(perRun.runId)
  })
})
