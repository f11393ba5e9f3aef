import type { WorkflowMessage } from './checkpoint.js'
import { StepContext } from './context.js'
import { WorkflowError } from './errors.js'
import type { RequestInfoEvent, WorkflowEvent } from './events.js'
import type { WorkflowGraph } from './graph.js'
import type { SharedState, StagedWrites } from './shared-state.js'

/** One thing handed to an executor in a super step. */
export type Delivery = { kind: 'message'; data: unknown } | { kind: 'response'; data: unknown; request: RequestInfoEvent }

/** What a super step's delivery phase produced. */
export interface Deliveries {
  /** Per executor, in graph order; each inbox in delivery order. */
  inboxes: Map<string, Delivery[]>
  /** Fan-in messages still waiting for a group's other sources. */
  held: WorkflowMessage[]
}

/** What a completed super step produced, to commit and checkpoint. */
export interface StepOutcome {
  /** The messages in flight for the next super step: held fan-in messages, then what was sent, in executor order. */
  queue: WorkflowMessage[]
  writes: StagedWrites[]
  requests: RequestInfoEvent[]
}

/**
 * Sort in-flight messages into inboxes. A fan-in group delivers the list of its messages (in
 * source order) once every source has sent; until then they wait.
 */
export function deliver(graph: WorkflowGraph, queue: readonly WorkflowMessage[]): Deliveries {
  const unordered = new Map<string, Delivery[]>()
  const add = (target: string, delivery: Delivery) => unordered.set(target, [...(unordered.get(target) ?? []), delivery])
  const fanIn = new Map<string, WorkflowMessage[]>()
  for (const message of queue) {
    if (message.kind === 'response') add(message.targetId, { kind: 'response', data: message.data, request: message.request })
    else if (message.fanIn !== undefined) fanIn.set(message.fanIn, [...(fanIn.get(message.fanIn) ?? []), message])
    else add(message.targetId, { kind: 'message', data: message.data })
  }
  const held: WorkflowMessage[] = []
  for (const [groupId, waiting] of fanIn) {
    const group = graph.fanIn.get(groupId)
    if (group === undefined) throw new TypeError(`an in-flight message waits in fan-in group ${groupId}, which this workflow does not have`)
    if (group.sources.every((source) => waiting.some((m) => m.sourceId === source))) {
      const data = group.sources.flatMap((source) => waiting.filter((m) => m.sourceId === source).map((m) => m.data))
      add(group.target, { kind: 'message', data })
    } else {
      held.push(...waiting)
    }
  }
  const inboxes = new Map<string, Delivery[]>()
  for (const id of graph.order) {
    const inbox = unordered.get(id)
    if (inbox) inboxes.set(id, inbox)
  }
  return { inboxes, held }
}

/**
 * Run one super step: every executor with deliveries runs concurrently, handling its own
 * deliveries in order. Events go to `emit` as they happen. If an executor fails, the others are
 * awaited and the step fails with nothing committed.
 */
export async function runSuperstep(params: {
  graph: WorkflowGraph
  runId: string
  iteration: number
  deliveries: Deliveries
  state: SharedState
  signal: AbortSignal
  emit: (event: WorkflowEvent) => void
}): Promise<StepOutcome> {
  const { graph, iteration, emit } = params
  const contexts = [...params.deliveries.inboxes.keys()].map(
    (executorId) => new StepContext({ graph, runId: params.runId, executorId, iteration, state: params.state, signal: params.signal, emit }),
  )
  const settled = await Promise.allSettled(
    contexts.map(async (ctx) => {
      const executor = graph.executors.get(ctx.executorId)!
      for (const delivery of params.deliveries.inboxes.get(ctx.executorId) ?? []) {
        emit({ type: 'executor_invoked', executorId: ctx.executorId, iteration })
        if (delivery.kind === 'response') await executor.handleResponse(delivery.data, delivery.request, ctx)
        else await executor.handle(delivery.data, ctx)
        emit({ type: 'executor_completed', executorId: ctx.executorId, iteration })
      }
    }),
  )
  const failed = settled.flatMap((result, i) => (result.status === 'rejected' ? [{ executorId: contexts[i]!.executorId, error: result.reason as unknown }] : []))
  const first = failed[0]
  if (first) {
    const others = failed.length > 1 ? ` (${failed.length - 1} more executor(s) failed too: ${failed.slice(1).map((f) => f.executorId).join(', ')})` : ''
    throw new WorkflowError('executor_failed', `workflow ${graph.name}: executor ${first.executorId} failed in superstep ${iteration}: ${messageOf(first.error)}${others}`, {
      cause: first.error,
      workflowName: graph.name,
      runId: params.runId,
      superstep: iteration,
      executorId: first.executorId,
    })
  }
  return {
    queue: [...params.deliveries.held, ...contexts.flatMap((ctx) => ctx.sent)],
    writes: contexts.map((ctx) => ctx.writes),
    requests: contexts.flatMap((ctx) => ctx.requests),
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
