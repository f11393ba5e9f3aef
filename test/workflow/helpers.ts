import {
  CheckpointNotFoundError,
  deserialize,
  Executor,
  serialize,
  type CheckpointInfo,
  type CheckpointInput,
  type CheckpointRecord,
  type LatestQuery,
  type ListCheckpointsQuery,
  MemoryStore,
  WorkflowBuilder,
  type CheckpointStorage,
  type Workflow,
  type WorkflowContext,
  type WorkflowEvent,
} from '../../src/index.js'

/** The squares task: numbers still to square. */
export interface Task {
  remaining: number[]
}

/** The squares start executor: turns a limit into a task. */
export class StartExecutor extends Executor<number> {
  async handle(limit: number, ctx: WorkflowContext<Task>): Promise<void> {
    await ctx.sendMessage({ remaining: Array.from({ length: limit }, (_, i) => i + 1) })
  }
}

/** The squares worker: squares one number per super step, through a self-loop. */
export class WorkerExecutor extends Executor<Task> {
  #results: Record<number, number> = {}
  handled = 0

  async handle(task: Task, ctx: WorkflowContext<Task, Record<number, number>>): Promise<void> {
    this.handled++
    const num = task.remaining.shift()!
    this.#results[num] = num * num
    if (task.remaining.length === 0) await ctx.yieldOutput(this.#results)
    else await ctx.sendMessage(task)
  }

  override async onCheckpointSave(): Promise<{ results: Record<number, number> }> {
    return { results: this.#results }
  }

  override async onCheckpointRestore(state: { results?: Record<number, number> }): Promise<void> {
    this.#results = state.results ?? {}
  }
}

/** The squares example, built fresh (new executors) each time; `null` builds it without storage. */
export function squaresWorkflow(storage: CheckpointStorage | null = new MemoryStore()): {
  workflow: Workflow<number, Record<number, number>>
  worker: WorkerExecutor
  storage: CheckpointStorage
} {
  const start = new StartExecutor('start')
  const worker = new WorkerExecutor('worker')
  const workflow = new WorkflowBuilder<number, Record<number, number>>({
    name: 'squares',
    startExecutor: start,
    ...(storage === null ? {} : { store: storage }),
  })
    .addEdge(start, worker)
    .addEdge(worker, worker)
    .build()
  return { workflow, worker, storage: storage ?? new MemoryStore() }
}

/** The squares 1..n as the worker reports them. */
export function squares(n: number): Record<number, number> {
  return Object.fromEntries(Array.from({ length: n }, (_, i) => [i + 1, (i + 1) ** 2]))
}

/** Collect a stream's events. */
export async function collect<T>(events: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const event of events) out.push(event)
  return out
}

/** The `type`s of events, in order. */
export function types(events: readonly WorkflowEvent[]): string[] {
  return events.map((event) => event.type)
}

/**
 * A custom checkpoint storage with only the five methods the engine needs, keeping each record
 * as JSON text (through the codec), the way a database column would.
 */
export class JsonTextStorage implements CheckpointStorage {
  readonly rows = new Map<string, string>()
  #seq = 0

  async save<P>(input: CheckpointInput<P>): Promise<string> {
    const id = input.id ?? `cp-${++this.#seq}`
    const record: CheckpointRecord<P> = {
      id,
      checkpointId: id,
      runId: input.runId,
      parentId: input.parentId ?? null,
      seq: ++this.#seq,
      kind: input.kind,
      phase: input.phase,
      schemaVersion: input.schemaVersion ?? 1,
      createdAt: input.createdAt ?? Date.now(),
      workflowName: input.workflowName ?? null,
      terminal: input.terminal ?? false,
      metadata: input.metadata ?? {},
      payload: input.payload,
    }
    this.rows.set(id, serialize(record, 'record'))
    return id
  }

  async load<P = unknown>(checkpointId: string): Promise<CheckpointRecord<P>> {
    const text = this.rows.get(checkpointId)
    if (text === undefined) throw new CheckpointNotFoundError(`checkpoint ${checkpointId} does not exist`, { checkpointId })
    return deserialize(text, { checkpointId }) as CheckpointRecord<P>
  }

  async listCheckpoints(query: ListCheckpointsQuery = {}): Promise<CheckpointInfo[]> {
    const all = [...this.rows.keys()].map((id) => deserialize(this.rows.get(id)!) as CheckpointRecord)
    return all
      .filter((r) => (query.workflowName === undefined || r.workflowName === query.workflowName) && (query.runId === undefined || r.runId === query.runId))
      .sort((a, b) => b.seq - a.seq)
      .slice(0, query.limit ?? Number.MAX_SAFE_INTEGER)
      .map(({ payload: _payload, ...info }) => info)
  }

  async delete(checkpointId: string): Promise<boolean> {
    return this.rows.delete(checkpointId)
  }

  async getLatest<P = unknown>(query: LatestQuery): Promise<CheckpointRecord<P> | undefined> {
    const [newest] = await this.listCheckpoints(query.runId === undefined ? { workflowName: query.workflowName } : { runId: query.runId })
    return newest && this.load<P>(newest.id)
  }
}

/** A promise with its resolve function. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((r) => (resolve = r))
  return { promise, resolve }
}
