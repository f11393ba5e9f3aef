import { isPlainObject, type JsonObject } from '../core/codec.js'
import { InvalidArgumentError } from '../core/errors.js'
import { newId } from '../core/ids.js'
import type { WorkflowMessage } from './checkpoint.js'
import { reachableFrom, routeThrough, type EdgeGroup } from './edges.js'
import type { RequestInfoEvent, WorkflowEvent } from './events.js'
import { StagedWrites, type SharedState, type WorkflowState } from './shared-state.js'
import type { JsonValue } from '../core/codec.js'
import type { WaitForEventOptions } from '../tools/tool.js'
import { handlerWaits, type RecordedWait, type WorkflowTime } from './waits.js'

/** Options of `ctx.sendMessage`. */
export interface SendMessageOptions {
  /** Send only along the edge to this executor (it must be one this executor's edges reach). */
  targetId?: string
}

/** Options of `ctx.requestInfo`. */
export interface RequestInfoOptions {
  /** A JSON Schema the answer must satisfy; checked when the answer is given, in any process. */
  responseSchema?: JsonObject
}

/**
 * What an executor can do while it handles a message. `TSend` is the type of the messages it
 * sends, `TOutput` the type of the workflow outputs it yields.
 */
export interface WorkflowContext<TSend = unknown, TOutput = unknown> {
  readonly workflowName: string
  /** The store run (a fresh id per fresh run; a resume continues the checkpoint's run). */
  readonly runId: string
  readonly executorId: string
  /** The super step running (1 for the first). */
  readonly iteration: number
  /** The executors this one's edges reach. */
  readonly targetIds: readonly string[]
  /** Shared state: writes are staged and committed at the end of the super step. */
  readonly state: WorkflowState
  /** Aborted when the caller stops consuming the run's events. */
  readonly signal: AbortSignal
  /** Send a message along this executor's edges; it is delivered in the next super step. */
  sendMessage(message: TSend, options?: SendMessageOptions): Promise<void>
  /** Yield a workflow output: an `output` event now, and in `result.getOutputs()`. */
  yieldOutput(output: TOutput): Promise<void>
  /**
   * Ask for outside input (a human's approval, say). Emits a `request_info` event; the run ends
   * idle with the request pending, and the answer is delivered to this executor's
   * `handleResponse` in a later run. Returns the request id.
   */
  requestInfo(data: unknown, options?: RequestInfoOptions): Promise<string>
  /**
   * Sleep `ms` durably: the handler stops here, the run ends its super step and is stored
   * `sleeping` with its wake time, and goes on at (not before) that time, in any process. When it
   * does, **the handler runs again from its start** with the same message, and this call returns
   * at once: code before it runs again, code after it runs once. Needs a store that keeps waits.
   */
  sleep(ms: number): Promise<void>
  /** {@link WorkflowContext.sleep} until a time (a `Date` or Unix ms). */
  sleepUntil(time: Date | number): Promise<void>
  /**
   * Wait for an external event (`client.send(name, payload, { match })`): returns its payload, or
   * `undefined` once `timeoutMs` passed. An event sent before is taken at once; otherwise the
   * handler stops here and the run is stored `waiting`, as for {@link WorkflowContext.sleep}.
   */
  waitForEvent<T = JsonValue>(name: string, options?: WaitForEventOptions): Promise<T | undefined>
}

/**
 * What a step context reads of its workflow's graph (a `WorkflowGraph` is one): declared here
 * because the graph's executors take contexts, so importing the graph would close a circle.
 */
interface ContextGraph {
  name: string
  bySource: ReadonlyMap<string, readonly EdgeGroup[]>
}

/** The context of one executor in one super step; collects what it sends, asks and stages. */
export class StepContext implements WorkflowContext {
  readonly workflowName: string
  readonly runId: string
  readonly executorId: string
  readonly iteration: number
  readonly targetIds: readonly string[]
  readonly state: WorkflowState
  readonly signal: AbortSignal
  readonly writes = new StagedWrites()
  readonly sent: WorkflowMessage[] = []
  readonly requests: RequestInfoEvent[] = []
  readonly #graph: ContextGraph
  readonly #emit: (event: WorkflowEvent) => void
  readonly #time: WorkflowTime | undefined
  #waits: ReturnType<typeof handlerWaits> | undefined

  constructor(params: {
    graph: ContextGraph
    runId: string
    executorId: string
    iteration: number
    state: SharedState
    signal: AbortSignal
    emit: (event: WorkflowEvent) => void
    time?: WorkflowTime | undefined
  }) {
    this.#graph = params.graph
    this.#emit = params.emit
    this.#time = params.time
    this.workflowName = params.graph.name
    this.runId = params.runId
    this.executorId = params.executorId
    this.iteration = params.iteration
    this.targetIds = reachableFrom(params.graph.bySource, params.executorId)
    this.state = params.state.view(this.writes)
    this.signal = params.signal
  }

  /** Before each handler call: the waits of the message it handles (`key` names them in the store; `recorded`, where it stopped before). */
  beginHandler(key: string, recorded: readonly RecordedWait[]): void {
    this.#waits = handlerWaits({ runId: this.runId, executorId: this.executorId, key, recorded, time: this.#time })
  }

  sleep(ms: number): Promise<void> {
    return this.#handlerWaits().sleep(ms)
  }

  sleepUntil(time: Date | number): Promise<void> {
    return this.#handlerWaits().sleepUntil(time)
  }

  waitForEvent<T = JsonValue>(name: string, options?: WaitForEventOptions): Promise<T | undefined> {
    return this.#handlerWaits().waitForEvent<T>(name, options)
  }

  /** What the handler about to run has sent, asked and staged so far: {@link StepContext.rollback} goes back to it. */
  mark(): { sent: number; requests: number; writes: ReturnType<StagedWrites['snapshot']> } {
    return { sent: this.sent.length, requests: this.requests.length, writes: this.writes.snapshot() }
  }

  /** Drop what a handler that stopped sent, asked and staged (it runs again from its start). */
  rollback(mark: ReturnType<StepContext['mark']>): void {
    this.sent.splice(mark.sent)
    this.requests.splice(mark.requests)
    this.writes.restore(mark.writes)
  }

  #handlerWaits(): ReturnType<typeof handlerWaits> {
    if (!this.#waits) throw new InvalidArgumentError(`executor ${this.executorId}: ctx.sleep and ctx.waitForEvent are for the handler's own call`)
    return this.#waits
  }

  async sendMessage(message: unknown, options: SendMessageOptions = {}): Promise<void> {
    const { targetId } = options
    if (this.targetIds.length === 0) {
      throw new InvalidArgumentError(`executor ${this.executorId} has no outgoing edges, so sendMessage has nowhere to go; add an edge, or use yieldOutput`)
    }
    if (targetId !== undefined && !this.targetIds.includes(targetId)) {
      throw new InvalidArgumentError(`executor ${this.executorId} has no edge to ${targetId}; its edges reach ${this.targetIds.join(', ')}`)
    }
    for (const group of this.#graph.bySource.get(this.executorId) ?? []) {
      for (const target of await routeThrough(group, message)) {
        if (targetId !== undefined && target !== targetId) continue
        const fanIn = group.type === 'fan_in' ? { fanIn: group.id } : {}
        this.sent.push({ kind: 'message', sourceId: this.executorId, targetId: target, data: message, ...fanIn })
      }
    }
  }

  async yieldOutput(output: unknown): Promise<void> {
    this.#emit({ type: 'output', executorId: this.executorId, iteration: this.iteration, data: output })
  }

  async requestInfo(data: unknown, options: RequestInfoOptions = {}): Promise<string> {
    const { responseSchema } = options
    if (responseSchema !== undefined && !isPlainObject(responseSchema)) {
      throw new InvalidArgumentError('responseSchema must be a JSON Schema object (it is persisted with the request)')
    }
    const request: RequestInfoEvent = {
      type: 'request_info',
      requestId: newId(),
      executorId: this.executorId,
      iteration: this.iteration,
      data,
      ...(responseSchema === undefined ? {} : { responseSchema }),
    }
    this.requests.push(request)
    this.#emit(request)
    return request.requestId
  }
}
