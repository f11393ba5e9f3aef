import type { WorkflowContext } from './context.js'
import { WorkflowError } from './errors.js'
import type { RequestInfoEvent } from './events.js'
import type { ExecutorState } from './checkpoint-types.js'
import { InvalidArgumentError } from '../core/errors.js'

export type { ExecutorState } from './checkpoint-types.js'

/**
 * A node of a workflow. Each super step, every executor that has messages runs: `handle` is
 * called once per delivered message, in delivery order. Executors of one super step run
 * concurrently; what they send is delivered in the next.
 *
 * Override `onCheckpointSave`/`onCheckpointRestore` to keep instance state across a crash, and
 * `handleResponse` to receive answers to `ctx.requestInfo`.
 *
 * @example
 * ```ts
 * class WorkerExecutor extends Executor<Task> {
 *   #results: Record<number, number> = {}
 *   async handle(task: Task, ctx: WorkflowContext<Task, Record<number, number>>) {
 *     const n = task.remaining.shift()!
 *     this.#results[n] = n * n
 *     if (task.remaining.length === 0) await ctx.yieldOutput(this.#results)
 *     else await ctx.sendMessage(task)
 *   }
 *   async onCheckpointSave() { return { results: this.#results } }
 *   async onCheckpointRestore(state: { results?: Record<number, number> }) { this.#results = state.results ?? {} }
 * }
 * const worker = new WorkerExecutor('worker')
 * ```
 */
export abstract class Executor<TIn = unknown> {
  /** Unique within a workflow; names the executor in checkpoints, events and errors. */
  readonly id: string

  constructor(id: string) {
    assertExecutorId(id)
    this.id = id
  }

  /** Handle one message delivered to this executor. */
  abstract handle(message: TIn, ctx: WorkflowContext): void | Promise<void>

  /** State to persist in each checkpoint. Called for every executor at every checkpoint. */
  onCheckpointSave(): ExecutorState | Promise<ExecutorState> {
    return {}
  }

  /** Restore what `onCheckpointSave` returned. Called for every executor when a run is restored. */
  onCheckpointRestore(_state: ExecutorState): void | Promise<void> {}

  /**
   * Handle the answer to a request this executor made with `ctx.requestInfo`, delivered in the
   * super step after the response was given (in this process or a fresh one).
   */
  handleResponse(_response: unknown, request: RequestInfoEvent, _ctx: WorkflowContext): void | Promise<void> {
    throw new WorkflowError(
      'executor_failed',
      `executor ${this.id} received the response to request ${request.requestId} but does not implement handleResponse`,
      { executorId: this.id, requestId: request.requestId },
    )
  }

  /**
   * What identifies this executor's kind in the workflow's graph signature: the class name by
   * default. A checkpoint written by a workflow whose executors differ is refused on resume.
   */
  signature(): string {
    return this.constructor.name
  }
}

/** The handler of a function executor. */
export type ExecutorFunction<TIn = unknown, TSend = unknown, TOutput = unknown> = (
  message: TIn,
  ctx: WorkflowContext<TSend, TOutput>,
) => void | Promise<void>

/** Optional hooks of a function executor. */
export interface FunctionExecutorOptions {
  handleResponse?: (response: unknown, request: RequestInfoEvent, ctx: WorkflowContext) => void | Promise<void>
  onCheckpointSave?: () => ExecutorState | Promise<ExecutorState>
  onCheckpointRestore?: (state: ExecutorState) => void | Promise<void>
}

/** An executor made from a function (see {@link executor}). */
export class FunctionExecutor<TIn = unknown> extends Executor<TIn> {
  readonly #fn: ExecutorFunction<TIn>
  readonly #options: FunctionExecutorOptions

  constructor(id: string, fn: ExecutorFunction<TIn>, options: FunctionExecutorOptions = {}) {
    super(id)
    if (typeof fn !== 'function') throw new InvalidArgumentError(`executor ${id} needs a handler function`)
    this.#fn = fn
    this.#options = options
  }

  override handle(message: TIn, ctx: WorkflowContext): void | Promise<void> {
    return this.#fn(message, ctx)
  }

  override onCheckpointSave(): ExecutorState | Promise<ExecutorState> {
    return this.#options.onCheckpointSave?.() ?? {}
  }

  override onCheckpointRestore(state: ExecutorState): void | Promise<void> {
    return this.#options.onCheckpointRestore?.(state)
  }

  override handleResponse(response: unknown, request: RequestInfoEvent, ctx: WorkflowContext): void | Promise<void> {
    if (!this.#options.handleResponse) return super.handleResponse(response, request, ctx)
    return this.#options.handleResponse(response, request, ctx)
  }
}

/**
 * A plain function as an executor.
 *
 * @example
 * ```ts
 * const start = executor('start', async (limit: number, ctx: WorkflowContext<Task>) => {
 *   await ctx.sendMessage({ remaining: Array.from({ length: limit }, (_, i) => i + 1) })
 * })
 * ```
 */
export function executor<TIn = unknown, TSend = unknown, TOutput = unknown>(
  id: string,
  fn: ExecutorFunction<TIn, TSend, TOutput>,
  options: FunctionExecutorOptions = {},
): FunctionExecutor<TIn> {
  return new FunctionExecutor<TIn>(id, fn, options)
}

/** Executor ids are non-empty strings; ids starting with `$` are reserved for the engine. */
function assertExecutorId(id: unknown): asserts id is string {
  if (typeof id !== 'string' || id === '') throw new InvalidArgumentError(`an executor id is a non-empty string, got ${JSON.stringify(id)}`)
  if (id.startsWith('$')) throw new InvalidArgumentError(`executor id ${JSON.stringify(id)} is reserved: ids starting with $ name the workflow's own sources`)
}
