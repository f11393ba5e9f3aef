import { RESPONSE_SOURCE, type WorkflowMessage } from './checkpoint.js'
import { StepContext } from './context.js'
import { WorkflowError } from './errors.js'
import type { RequestInfoEvent, WorkflowEvent } from './events.js'
import type { WorkflowGraph } from './graph.js'
import type { SharedState, StagedWrites } from './shared-state.js'
import { WorkflowStopSignal, type MessageStop, type WorkflowTime } from './waits.js'

/**
 * One thing handed to an executor in a super step; `stop` when its handler stopped at a sleep or
 * a wait before (a fan-in delivery's `sourceId` is its group's id).
 */
export type Delivery = ({ kind: 'message'; sourceId: string; data: unknown } | { kind: 'response'; data: unknown; request: RequestInfoEvent }) & { stop?: MessageStop }

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
  /** Where handlers stopped (a sleep, a wait for an event); their messages are first in `queue`. */
  stops: MessageStop[]
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
    const stop = message.stop === undefined ? {} : { stop: message.stop }
    if (message.kind === 'response') add(message.targetId, { kind: 'response', data: message.data, request: message.request, ...stop })
    else if (message.fanIn !== undefined) fanIn.set(message.fanIn, [...(fanIn.get(message.fanIn) ?? []), message])
    else add(message.targetId, { kind: 'message', sourceId: message.sourceId, data: message.data, ...stop })
  }
  const held: WorkflowMessage[] = []
  for (const [groupId, waiting] of fanIn) {
    const group = graph.fanIn.get(groupId)
    if (group === undefined) throw new TypeError(`an in-flight message waits in fan-in group ${groupId}, which this workflow does not have`)
    if (group.sources.every((source) => waiting.some((m) => m.sourceId === source))) {
      const data = group.sources.flatMap((source) => waiting.filter((m) => m.sourceId === source).map((m) => m.data))
      add(group.target, { kind: 'message', sourceId: groupId, data })
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
 *
 * A handler that stops (`ctx.sleep`, `ctx.waitForEvent`) has what it sent, asked and staged
 * dropped; its message, with where it stopped, and the executor's deliveries not handled yet
 * go back into the queue, to be handled again when the run goes on.
 */
export async function runSuperstep(params: {
  graph: WorkflowGraph
  runId: string
  iteration: number
  deliveries: Deliveries
  state: SharedState
  signal: AbortSignal
  emit: (event: WorkflowEvent) => void
  time?: WorkflowTime | undefined
}): Promise<StepOutcome> {
  const { graph, iteration, emit } = params
  const contexts = [...params.deliveries.inboxes.keys()].map(
    (executorId) => new StepContext({ graph, runId: params.runId, executorId, iteration, state: params.state, signal: params.signal, emit, time: params.time }),
  )
  const stopped: WorkflowMessage[][] = contexts.map(() => [])
  const stops: MessageStop[] = []
  const settled = await Promise.allSettled(
    contexts.map(async (ctx, n) => {
      const executor = graph.executors.get(ctx.executorId)!
      const inbox = params.deliveries.inboxes.get(ctx.executorId) ?? []
      for (const [index, delivery] of inbox.entries()) {
        emit({ type: 'executor_invoked', executorId: ctx.executorId, iteration })
        const mark = ctx.mark()
        ctx.beginHandler(delivery.stop?.key ?? `${iteration}.${ctx.executorId}.${index}`, delivery.stop?.waits ?? [])
        try {
          if (delivery.kind === 'response') await executor.handleResponse(delivery.data, delivery.request, ctx)
          else await executor.handle(delivery.data, ctx)
        } catch (err) {
          if (!(err instanceof WorkflowStopSignal)) throw err
          ctx.rollback(mark)
          stops.push(err.stop)
          stopped[n] = [{ ...delivery, stop: err.stop }, ...inbox.slice(index + 1)].map((d) => messageOf(ctx.executorId, d))
          return
        }
        emit({ type: 'executor_completed', executorId: ctx.executorId, iteration })
      }
    }),
  )
  const failed = settled.flatMap((result, i) => (result.status === 'rejected' ? [{ executorId: contexts[i]!.executorId, error: result.reason as unknown }] : []))
  const first = failed[0]
  if (first) {
    const others = failed.length > 1 ? ` (${failed.length - 1} more executor(s) failed too: ${failed.slice(1).map((f) => f.executorId).join(', ')})` : ''
    throw new WorkflowError('executor_failed', `workflow ${graph.name}: executor ${first.executorId} failed in superstep ${iteration}: ${errorMessageOf(first.error)}${others}`, {
      cause: first.error,
      workflowName: graph.name,
      runId: params.runId,
      superstep: iteration,
      executorId: first.executorId,
    })
  }
  return {
    queue: [...stopped.flat(), ...params.deliveries.held, ...contexts.flatMap((ctx) => ctx.sent)],
    writes: contexts.map((ctx) => ctx.writes),
    requests: contexts.flatMap((ctx) => ctx.requests),
    stops,
  }
}

/** A delivery put back into the queue, to `targetId` again. */
function messageOf(targetId: string, delivery: Delivery): WorkflowMessage {
  const stop = delivery.stop === undefined ? {} : { stop: delivery.stop }
  if (delivery.kind === 'response') return { kind: 'response', sourceId: RESPONSE_SOURCE, targetId, data: delivery.data, request: delivery.request, ...stop }
  return { kind: 'message', sourceId: delivery.sourceId, targetId, data: delivery.data, ...stop }
}

function errorMessageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
