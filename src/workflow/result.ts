import { InvalidArgumentError } from '../core/errors.js'
import type { RequestInfoEvent, WorkflowCompletedEvent, WorkflowEvent, WorkflowOutputEvent, WorkflowRunStatus } from './events.js'

/**
 * What `workflow.run()` returns: every event of the run, in order, with helpers.
 *
 * @example
 * ```ts
 * const result = await workflow.run({ message: 10 })
 * console.log(result.getOutputs(), result.status)
 * for (const request of result.getPendingRequests()) console.log(request.requestId, request.data)
 * ```
 */
export class WorkflowRunResult<TOutput = unknown> {
  /** Every event the run emitted, in order. */
  readonly events: readonly WorkflowEvent<TOutput>[]
  /** The store run the events belong to. */
  readonly runId: string
  /** `idle` when nothing is left to do, `paused` when requests wait for answers. */
  readonly status: WorkflowRunStatus
  /** The run's last checkpoint (resume or answer from it); undefined without storage. */
  readonly checkpointId: string | undefined
  readonly #completed: WorkflowCompletedEvent

  constructor(events: readonly WorkflowEvent<TOutput>[]) {
    const completed = events.findLast((event): event is WorkflowCompletedEvent => event.type === 'workflow_completed')
    if (completed === undefined) throw new InvalidArgumentError('a workflow run result needs the workflow_completed event')
    this.events = events
    this.#completed = completed
    this.runId = completed.runId
    this.status = completed.status
    this.checkpointId = completed.checkpointId
  }

  /** The outputs executors yielded with `ctx.yieldOutput`, in order. */
  getOutputs(): TOutput[] {
    return this.events.filter((event): event is WorkflowOutputEvent<TOutput> => event.type === 'output').map((event) => event.data)
  }

  /** Every `request_info` event of this run (new requests, and pending ones re-emitted on resume). */
  getRequestInfoEvents(): RequestInfoEvent[] {
    return this.events.filter((event): event is RequestInfoEvent => event.type === 'request_info')
  }

  /** The requests still waiting for an answer when the run ended. */
  getPendingRequests(): RequestInfoEvent[] {
    const pending = new Set(this.#completed.pendingRequestIds)
    const byId = new Map(this.getRequestInfoEvents().map((event) => [event.requestId, event]))
    return [...pending].flatMap((id) => {
      const event = byId.get(id)
      return event ? [event] : []
    })
  }
}
