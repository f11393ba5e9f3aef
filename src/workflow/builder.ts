import type { WorkflowStore } from './checkpoint-storage.js'
import { functionName, type EdgeCondition, type EdgeGroup, type FanOutSelection } from './edges.js'
import type { Executor } from './executor.js'
import { createGraph } from './graph.js'
import { Workflow } from './workflow.js'
import { InvalidArgumentError } from '../core/errors.js'

/** The default super-step limit of a run. */
export const DEFAULT_MAX_SUPERSTEPS = 100

/** How to start building a workflow. */
export interface WorkflowBuilderOptions<TIn> {
  /** Receives a fresh run's `message`. */
  startExecutor: Executor<TIn>
  /** Groups the workflow's checkpoints; defaults to the start executor's id. Keep it stable. */
  name?: string
  description?: string
  /** Where checkpoints go (any `CheckpointStore`); without it the workflow does not checkpoint. */
  store?: WorkflowStore
  /** @deprecated The former name of `store`. */
  checkpointStorage?: WorkflowStore
  /** Fail a run that would go past this many super steps (default 100). */
  maxSupersteps?: number
}

/** Options of a direct edge. */
export interface EdgeOptions<M = unknown> {
  /** Send a message along the edge only when this holds. */
  condition?: EdgeCondition<M>
  /** The condition's name in the graph signature (default: the function's name, else its source). */
  conditionName?: string
}

/** Options of a fan-out edge group. */
export interface FanOutOptions<M = unknown> {
  /** Pick the targets of each message (default: all). */
  selection?: FanOutSelection<M>
  selectionName?: string
}

/** One case of a switch-case edge group. */
export interface SwitchCase<M = unknown> {
  condition: EdgeCondition<M>
  target: Executor
  conditionName?: string
}

/**
 * Builds a {@link Workflow}: a start executor, edges between executors, and where checkpoints go.
 *
 * @example
 * ```ts
 * const workflow = new WorkflowBuilder({ name: 'squares', startExecutor: start, checkpointStorage: storage })
 *   .addEdge(start, worker)
 *   .addEdge(worker, worker) // a self-loop
 *   .build()
 * ```
 */
export class WorkflowBuilder<TIn = unknown, TOutput = unknown> {
  readonly #options: WorkflowBuilderOptions<TIn>
  readonly #executors = new Map<string, Executor>()
  readonly #groups: EdgeGroup[] = []

  constructor(options: WorkflowBuilderOptions<TIn>) {
    if (typeof options?.startExecutor?.handle !== 'function') throw new InvalidArgumentError('WorkflowBuilder needs a startExecutor')
    this.#options = options
    this.#add(options.startExecutor)
  }

  /** A direct edge: every message `source` sends goes to `target` (when `condition` holds). */
  addEdge<M = unknown>(source: Executor, target: Executor, options: EdgeOptions<M> = {}): this {
    const [from, to] = [this.#add(source), this.#add(target)]
    const { condition } = options
    const conditional =
      condition === undefined ? {} : { condition: condition as EdgeCondition, conditionName: functionName(condition, options.conditionName, 'condition') }
    return this.#group({ type: 'single', id: `single:${from}->${to}`, source: from, target: to, ...conditional })
  }

  /** A fan-out: each message `source` sends goes to every target (or those `selection` picks). */
  addFanOutEdges<M = unknown>(source: Executor, targets: readonly Executor[], options: FanOutOptions<M> = {}): this {
    const from = this.#add(source)
    const to = this.#targets(targets, 'a fan-out')
    const { selection } = options
    const selected =
      selection === undefined ? {} : { selection: selection as FanOutSelection, selectionName: functionName(selection, options.selectionName, 'selection') }
    return this.#group({ type: 'fan_out', id: `fan_out:${from}->${to.join(',')}`, source: from, targets: to, ...selected })
  }

  /** A fan-in: `target` gets the list of messages (in source order) once every source has sent. */
  addFanInEdges(sources: readonly Executor[], target: Executor): this {
    const from = this.#targets(sources, 'a fan-in')
    const to = this.#add(target)
    return this.#group({ type: 'fan_in', id: `fan_in:${from.join(',')}->${to}`, sources: from, target: to })
  }

  /** A switch: each message goes to the first case whose condition holds, else to `default`. */
  addSwitchCaseEdges<M = unknown>(source: Executor, cases: readonly SwitchCase<M>[], options: { default?: Executor } = {}): this {
    const from = this.#add(source)
    if (cases.length === 0) throw new InvalidArgumentError('a switch-case edge group needs at least one case')
    const routes = cases.map((c) => ({
      condition: c.condition as EdgeCondition,
      conditionName: functionName(c.condition, c.conditionName, 'condition'),
      target: this.#add(c.target),
    }))
    const defaultTarget = options.default === undefined ? undefined : this.#add(options.default)
    const targets = [...routes.map((r) => r.target), ...(defaultTarget === undefined ? [] : [defaultTarget])].join(',')
    const fallback = defaultTarget === undefined ? {} : { defaultTarget }
    return this.#group({ type: 'switch_case', id: `switch_case:${from}->${targets}`, source: from, cases: routes, ...fallback })
  }

  /** Direct edges along a chain: `a → b → c`. */
  addChain(executors: readonly Executor[]): this {
    for (let i = 1; i < executors.length; i++) this.addEdge(executors[i - 1]!, executors[i]!)
    return this
  }

  /** The workflow. Executors join the graph in the order they were first added. */
  build(): Workflow<TIn, TOutput> {
    const { startExecutor, name, description, maxSupersteps } = this.#options
    const store = this.#options.store ?? this.#options.checkpointStorage
    const limit = maxSupersteps ?? DEFAULT_MAX_SUPERSTEPS
    if (!Number.isSafeInteger(limit) || limit < 1) throw new InvalidArgumentError(`maxSupersteps must be a positive integer, got ${String(maxSupersteps)}`)
    if (name !== undefined && (typeof name !== 'string' || name === '')) throw new InvalidArgumentError('a workflow name is a non-empty string')
    const graph = createGraph({ name: name ?? startExecutor.id, start: startExecutor, executors: new Map(this.#executors), groups: [...this.#groups] })
    return new Workflow<TIn, TOutput>({ graph, description, store, maxSupersteps: limit })
  }

  #add(executor: Executor): string {
    if (typeof executor?.handle !== 'function' || typeof executor.id !== 'string') throw new InvalidArgumentError('an edge joins Executor instances')
    const known = this.#executors.get(executor.id)
    if (known !== undefined && known !== executor) throw new InvalidArgumentError(`two different executors have the id ${executor.id}; executor ids must be unique`)
    this.#executors.set(executor.id, executor)
    return executor.id
  }

  #targets(executors: readonly Executor[], what: string): string[] {
    if (executors.length === 0) throw new InvalidArgumentError(`${what} needs at least one executor`)
    const ids = executors.map((e) => this.#add(e))
    if (new Set(ids).size !== ids.length) throw new InvalidArgumentError(`${what} lists an executor twice: ${ids.join(', ')}`)
    return ids
  }

  #group(group: EdgeGroup): this {
    if (this.#groups.some((g) => g.id === group.id)) throw new InvalidArgumentError(`the edge group ${group.id} was added twice; each would deliver every message again`)
    this.#groups.push(group)
    return this
  }
}
