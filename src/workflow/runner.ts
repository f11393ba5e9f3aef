import { CairnError, InvalidArgumentError } from '../core/errors.js'
import { newId } from '../core/ids.js'
import type { RunStatus } from '../store/checkpoint-store.js'
import { INPUT_SOURCE, type WorkflowCheckpointPhase, type WorkflowMessage } from './checkpoint.js'
import type { WorkflowStore } from './checkpoint-storage.js'
import { refuseAnsweredLater } from './answered-later.js'
import { WorkflowCheckpointError, WorkflowError } from './errors.js'
import { EventChannel, pump } from './event-channel.js'
import type { WorkflowCompletedEvent, WorkflowEvent, WorkflowRunStatus } from './events.js'
import { eventWaitsOf, nextTimeOfStops, stoppedStatusOf, stopsDue, type MessageStop, type WorkflowTime } from './waits.js'
import type { WorkflowGraph } from './graph.js'
import { restoreCheckpoint, saveCheckpoint, type RunState } from './persistence.js'
import { acceptResponses } from './responses.js'
import type { RunPlan } from './run-options.js'
import { SharedState } from './shared-state.js'
import { deliver, runSuperstep } from './superstep.js'
import { loadOpenTelemetry, superstepTracing } from '../observe/telemetry.js'
import type { WaitForOwner } from '../runner/run-ownership.js'
import { ownWorkflowRun } from './run-lease.js'

/** What a run needs besides its plan. */
export interface RunSettings {
  graph: WorkflowGraph
  storage: WorkflowStore | undefined
  maxSupersteps: number
  /** How long the run's lease lasts between renewals (a store with leases only). */
  leaseMs: number
  /** When another execution owns the run: fail at once with `RunBusyError` (default), or wait. */
  waitForOwner: WaitForOwner | undefined
  /** Aborts when the run's lease is lost (set once it is taken). */
  ownerSignal?: AbortSignal
  /** The instance's last run, for `{ responses }` without a checkpoint. */
  current: RunState | undefined
  /** Told the run state as soon as it exists. */
  onRun(run: RunState): void
  /** The clock of the executors' sleeps and event deadlines (default: the system's). */
  clock?: { now(): number } | undefined
  /** The executors' clock and the store's waits (set by `executeRun`). */
  time?: WorkflowTime
}

/**
 * Run a workflow in super steps until no message is left to deliver: write the entry (or
 * responses) checkpoint, then per super step deliver, run the executors concurrently, commit
 * the staged state, collect the requests, write a checkpoint and report it. A failure emits
 * `workflow_failed` and is thrown.
 *
 * With a store that has leases, the execution owns the run from before its first write to its
 * end: the lease is taken (another live owner: `RunBusyError`), every write is fenced by its
 * epoch, it is renewed in the background and released at the end.
 */
export async function* executeRun(settings: RunSettings, plan: RunPlan): AsyncGenerator<WorkflowEvent> {
  const run = await prepare(settings, plan)
  // Taken from the store as given: the owned view below only reads and writes checkpoints.
  const clock = settings.clock ?? { now: () => Date.now() }
  settings = { ...settings, time: { now: () => clock.now(), waits: settings.storage?.waits } }
  const owned = await ownWorkflowRun({ storage: settings.storage, runId: run.runId, workflowName: settings.graph.name, leaseMs: settings.leaseMs, waitForOwner: settings.waitForOwner })
  try {
    // Checked once the run is ours: an owner that just went on from this checkpoint is seen.
    if (plan.kind === 'resume' && plan.responses !== undefined && !plan.allowReanswer) {
      await refuseAnsweredLater({ storage: settings.storage!, workflowName: settings.graph.name, runId: run.runId, checkpointId: plan.checkpointId, requestIds: Object.keys(plan.responses) })
    }
    yield* executeOwned(owned ? { ...settings, storage: owned.storage, ownerSignal: owned.ownership.signal } : settings, plan, run)
  } finally {
    await owned?.ownership.release()
  }
}

async function* executeOwned(settings: RunSettings, plan: RunPlan, run: RunState): AsyncGenerator<WorkflowEvent> {
  const { graph } = settings
  settings.onRun(run)
  const resumedFrom = plan.kind === 'resume' ? plan.checkpointId : undefined
  yield { type: 'workflow_started', workflowName: graph.name, runId: run.runId, resumedFrom, iteration: run.iteration }
  // A span per super step when OpenTelemetry is installed (nothing is loaded otherwise).
  const api = await loadOpenTelemetry()
  const trace = api ? superstepTracing(api, { workflowName: graph.name, runId: run.runId }) : undefined
  try {
    yield* begin(settings, run, plan)
    // Stopped at sleeps or waits none of which is due yet (woken early): it stays as it is.
    let stops = stopsIn(run.queue)
    const wasStopped = stops.length > 0
    const due = stops.length === 0 || plan.kind !== 'resume' || plan.responses !== undefined || (await stopsDue(run.runId, stops, settings.time))
    while (due && deliver(graph, run.queue).inboxes.size > 0) {
      for await (const event of superstep(settings, run)) {
        trace?.(event as { type: string })
        yield event
      }
      stops = stopsIn(run.queue)
      if (stops.length > 0) break
    }
    yield await finish(settings, run, stops, wasStopped)
  } catch (error) {
    // Best effort: the run's own error is the one to report, not a second store failure.
    await setRunStatus(settings.storage, run, 'failed').catch(() => undefined)
    const err = error instanceof Error ? error : new Error(String(error))
    const where = error instanceof WorkflowError || error instanceof WorkflowCheckpointError ? error : undefined
    trace?.({ type: 'workflow_failed' })
    yield { type: 'workflow_failed', error: err, iteration: where?.superstep ?? run.iteration, executorId: where?.executorId }
    throw error
  }
}

/**
 * The run's end: stopped at sleeps or waits (its timer and waits recorded first, so a run stored
 * sleeping or waiting always has them), paused for requests, or idle.
 */
async function finish(settings: RunSettings, run: RunState, stops: readonly MessageStop[], wasStopped: boolean): Promise<WorkflowCompletedEvent> {
  const end = { type: 'workflow_completed' as const, runId: run.runId, iteration: run.iteration, checkpointId: run.lastCheckpointId ?? undefined, pendingRequestIds: [...run.pending.keys()] }
  if (stops.length > 0) {
    const status = stoppedStatusOf(stops)
    const wakeAt = nextTimeOfStops(stops)
    const events = eventWaitsOf(run.runId, stops)
    const waits = settings.time?.waits
    if (waits) {
      await waits.clearRun(run.runId)
      for (const wait of events) await waits.setWait({ runId: run.runId, waitId: wait.waitId, name: wait.name, match: wait.match })
      if (wakeAt !== undefined) await waits.setTimer(run.runId, wakeAt)
    }
    await setRunStatus(settings.storage, run, status)
    const waitingFor = events.map(({ name, match, expiresAt }) => ({ name, match, ...(expiresAt === undefined ? {} : { expiresAt }) }))
    return { ...end, status, ...(wakeAt === undefined ? {} : { wakeAt }), ...(status === 'waiting' ? { waitingFor } : {}) }
  }
  if (wasStopped) await settings.time?.waits?.clearRun(run.runId)
  const status: WorkflowRunStatus = run.pending.size > 0 ? 'paused' : 'idle'
  await setRunStatus(settings.storage, run, status === 'idle' ? 'completed' : 'paused')
  return { ...end, status }
}

/** Where the queue's messages' handlers stopped. */
function stopsIn(queue: readonly WorkflowMessage[]): MessageStop[] {
  return queue.flatMap((message) => (message.stop === undefined ? [] : [message.stop]))
}

/** The run a plan starts from: fresh, restored from a checkpoint, or this instance's last. */
async function prepare(settings: RunSettings, plan: RunPlan): Promise<RunState> {
  const { graph, storage } = settings
  let run: RunState
  if (plan.kind === 'fresh') {
    const input = { kind: 'message' as const, sourceId: INPUT_SOURCE, targetId: graph.startId, data: plan.message }
    return { runId: newId(), iteration: 0, queue: [input], pending: new Map(), state: new SharedState(), lastCheckpointId: null }
  }
  if (plan.kind === 'resume') {
    if (storage === undefined) {
      throw new InvalidArgumentError(`cannot resume workflow ${graph.name} from checkpoint ${plan.checkpointId}: it has no store; build it with one ({ store }) or pass store to run`)
    }
    run = await restoreCheckpoint({ storage, graph, checkpointId: plan.checkpointId })
  } else {
    if (settings.current === undefined) {
      throw new InvalidArgumentError(`workflow ${graph.name} has no run waiting for responses in this process; pass the checkpointId to answer from, with the responses`)
    }
    run = settings.current
  }
  if (plan.responses !== undefined) acceptResponses({ workflowName: graph.name, runId: run.runId, pending: run.pending, responses: plan.responses })
  return run
}

/** Before the first super step: the entry checkpoint; or re-emit what is still pending and record the responses. */
async function* begin(settings: RunSettings, run: RunState, plan: RunPlan): AsyncGenerator<WorkflowEvent> {
  if (plan.kind === 'fresh') {
    await checkpoint(settings, run, 'entry')
    return
  }
  await setRunStatus(settings.storage, run, 'running')
  const responses = plan.responses ?? {}
  for (const request of run.pending.values()) if (!(request.requestId in responses)) yield request
  if (plan.responses === undefined) return
  const messages = acceptResponses({ workflowName: settings.graph.name, runId: run.runId, pending: run.pending, responses })
  run.queue = [...run.queue, ...messages]
  for (const requestId of Object.keys(responses)) run.pending.delete(requestId)
  await checkpoint(settings, run, 'responses')
}

async function* superstep(settings: RunSettings, run: RunState): AsyncGenerator<WorkflowEvent> {
  const { graph } = settings
  const iteration = run.iteration + 1
  if (iteration > settings.maxSupersteps) {
    throw new WorkflowError(
      'max_supersteps',
      `workflow ${graph.name} exceeded maxSupersteps (${settings.maxSupersteps}): messages are still in flight after superstep ${run.iteration}; raise maxSupersteps, or look for a cycle that never ends`,
      { workflowName: graph.name, runId: run.runId, superstep: run.iteration },
    )
  }
  yield { type: 'superstep_started', iteration }
  const channel = new EventChannel<WorkflowEvent>()
  const abort = new AbortController()
  const step = runSuperstep({
    graph,
    runId: run.runId,
    iteration,
    deliveries: deliver(graph, run.queue),
    state: run.state,
    signal: settings.ownerSignal ? AbortSignal.any([abort.signal, settings.ownerSignal]) : abort.signal,
    emit: (event) => channel.push(event),
    time: settings.time,
  })
  yield* pump(channel, step, () => abort.abort(new CairnError('invalid_argument', 'the caller stopped consuming the workflow run')))
  const outcome = await step
  run.state.commit(outcome.writes)
  run.queue = outcome.queue
  for (const request of outcome.requests) run.pending.set(request.requestId, request)
  run.iteration = iteration
  const checkpointId = await checkpoint(settings, run, 'superstep')
  yield { type: 'superstep_completed', iteration, checkpointId }
}

async function checkpoint(settings: RunSettings, run: RunState, phase: WorkflowCheckpointPhase): Promise<string | undefined> {
  if (settings.storage === undefined) return undefined
  return saveCheckpoint({ storage: settings.storage, graph: settings.graph, run, phase })
}

async function setRunStatus(storage: WorkflowStore | undefined, run: RunState, status: RunStatus): Promise<void> {
  if (storage?.updateRun === undefined || run.lastCheckpointId === null) return
  await storage.updateRun(run.runId, { status })
}
