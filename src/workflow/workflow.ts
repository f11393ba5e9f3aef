import type { WorkflowCheckpoint, WorkflowCheckpointSummary } from './checkpoint.js'
import type { CheckpointStorage, WorkflowStore } from './checkpoint-storage.js'
import { WorkflowError } from './errors.js'
import type { RequestInfoEvent, WorkflowEvent } from './events.js'
import type { Executor } from './executor.js'
import type { GraphSignature, WorkflowGraph } from './graph.js'
import {
  getLatestWorkflowCheckpoint,
  inspectWorkflowCheckpoint,
  listWorkflowCheckpoints,
  pruneWorkflowCheckpoints,
  type ListWorkflowCheckpointsOptions,
  type PruneWorkflowCheckpointsOptions,
} from './management.js'
import type { RunState } from './persistence.js'
import { WorkflowRunResult } from './result.js'
import { planRun, type WorkflowRunOptions } from './run-options.js'
import { DEFAULT_WORKFLOW_LEASE_MS } from './run-lease.js'
import { executeRun } from './runner.js'
import { InvalidArgumentError } from '../core/errors.js'

/**
 * A built workflow (see `WorkflowBuilder`): executors joined by edges, run in super steps.
 * With checkpoint storage it writes a checkpoint at its entry and at the end of every super
 * step, and any process can resume it from one with `run({ checkpointId })`.
 *
 * An instance runs one run at a time, and its executors keep their instance state between
 * runs: build a fresh workflow (and executors) for independent runs.
 *
 * With a store that has leases (every Cairn store), a run owns its run id while it executes, as
 * a `Runner` does: a second execution of the same run — in another process, or another instance —
 * fails with `RunBusyError` naming the owner (or waits, with `waitForOwner`), and an execution
 * that lost its lease has its writes rejected with `LeaseLostError`.
 *
 * @example
 * ```ts
 * const result = await workflow.run({ message: 10 })
 * for await (const event of workflow.stream({ checkpointId })) {
 *   if (event.type === 'superstep_completed') console.log(event.checkpointId)
 * }
 * ```
 */
export class Workflow<TIn = unknown, TOutput = unknown> {
  /** Groups this workflow's checkpoints in the storage (`getLatest({ workflowName })`). */
  readonly name: string
  readonly description: string | undefined
  /** Where the workflow's checkpoints go; without one it does not checkpoint. */
  readonly store: WorkflowStore | undefined
  /** The default super-step limit of a run. */
  readonly maxSupersteps: number
  readonly #graph: WorkflowGraph
  #current: RunState | undefined
  #running = false

  /** @internal Use `WorkflowBuilder.build()`. */
  constructor(params: { graph: WorkflowGraph; description: string | undefined; store: WorkflowStore | undefined; maxSupersteps: number }) {
    this.#graph = params.graph
    this.name = params.graph.name
    this.description = params.description
    this.store = params.store
    this.maxSupersteps = params.maxSupersteps
  }

  /** The id of the executor that receives a fresh run's message. */
  get startExecutorId(): string {
    return this.#graph.startId
  }

  /** The executors, in the order they joined the graph. */
  get executors(): Executor[] {
    return [...this.#graph.executors.values()]
  }

  /** What the graph signature covers; see {@link GraphSignature}. */
  get graphSignature(): GraphSignature {
    return structuredClone(this.#graph.signature)
  }

  /** SHA-256 of the graph signature, stored in every checkpoint. */
  get graphSignatureHash(): string {
    return this.#graph.signatureHash
  }

  /** Requests of this instance's last run still waiting for an answer. */
  get pendingRequests(): RequestInfoEvent[] {
    return [...(this.#current?.pending.values() ?? [])]
  }

  /** Run to the end (idle, or idle with pending requests) and return every event. Drains {@link stream}. */
  async run(options: WorkflowRunOptions<TIn>): Promise<WorkflowRunResult<TOutput>> {
    const events = this.stream(options)
    for (;;) {
      const next = await events.next()
      if (next.done) return next.value
    }
  }

  /**
   * Run, yielding events as they happen: `superstep_completed` carries the id of the checkpoint
   * it wrote. Stopping early (a `break`) abandons the run; resume it from its latest checkpoint.
   */
  async *stream(options: WorkflowRunOptions<TIn>): AsyncGenerator<WorkflowEvent<TOutput>, WorkflowRunResult<TOutput>> {
    const plan = planRun(options)
    if (this.#running) {
      throw new WorkflowError('workflow_busy', `workflow ${this.name} is already running; wait for its run to end, or build another instance`, { workflowName: this.name })
    }
    this.#running = true
    const events: WorkflowEvent<TOutput>[] = []
    let started = false
    let finished = false
    try {
      const settings = {
        graph: this.#graph,
        storage: options.store ?? options.checkpointStorage ?? this.store,
        maxSupersteps: options.maxSupersteps ?? this.maxSupersteps,
        leaseMs: options.leaseMs ?? DEFAULT_WORKFLOW_LEASE_MS,
        waitForOwner: options.waitForOwner,
        clock: options.clock,
        current: this.#current,
        onRun: (run: RunState) => {
          started = true
          this.#current = run
        },
      }
      for await (const event of executeRun(settings, plan)) {
        events.push(event as WorkflowEvent<TOutput>)
        yield event as WorkflowEvent<TOutput>
      }
      finished = true
    } finally {
      // A failed or abandoned run cannot be continued in memory; its checkpoints remain.
      if (started && !finished) this.#current = undefined
      this.#running = false
    }
    return new WorkflowRunResult(events)
  }

  /** This workflow's checkpoints in its storage, newest first, without loading payloads. */
  async listCheckpoints(options: Omit<ListWorkflowCheckpointsOptions, 'workflowName'> = {}): Promise<WorkflowCheckpointSummary[]> {
    return listWorkflowCheckpoints(this.#storage(), { ...options, workflowName: this.name })
  }

  /** Name, iteration, graph hash, message count, state keys and pending request count of a checkpoint. */
  async inspectCheckpoint(checkpointId: string): Promise<WorkflowCheckpointSummary> {
    return inspectWorkflowCheckpoint(this.#storage(), checkpointId)
  }

  /** This workflow's newest checkpoint, or undefined. */
  async getLatestCheckpoint(): Promise<(WorkflowCheckpoint & { runId: string }) | undefined> {
    return getLatestWorkflowCheckpoint(this.#storage(), { workflowName: this.name })
  }

  /** Delete one checkpoint; false when there was none. */
  async deleteCheckpoint(checkpointId: string): Promise<boolean> {
    return this.#admin('deleteCheckpoint').delete(checkpointId)
  }

  /** Apply a retention policy to this workflow's checkpoints; returns how many were deleted. */
  async pruneCheckpoints(options: Omit<PruneWorkflowCheckpointsOptions, 'workflowName'> = {}): Promise<number> {
    return pruneWorkflowCheckpoints(this.#admin('pruneCheckpoints'), { ...options, workflowName: this.name })
  }

  /** @deprecated The former name of `store`. */
  get checkpointStorage(): WorkflowStore | undefined {
    return this.store
  }

  #storage(): WorkflowStore {
    if (this.store === undefined) throw new InvalidArgumentError(`workflow ${this.name} was built without a store`)
    return this.store
  }

  /** The store, when it can delete checkpoints (a `CheckpointStore` can; a worker's fenced view cannot). */
  #admin(method: string): CheckpointStorage {
    const store = this.#storage()
    if (typeof (store as Partial<CheckpointStorage>).delete !== 'function') {
      throw new InvalidArgumentError(`workflow ${this.name}: ${method} needs a store that deletes checkpoints (a CheckpointStore); this one only reads and writes them`)
    }
    return store as CheckpointStorage
  }
}
