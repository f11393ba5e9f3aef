import { isPlainObject } from '../core/codec.js'
import { CheckpointCorruptionError, ConfigMismatchError, LeaseLostError } from '../core/errors.js'
import { newId } from '../core/ids.js'
import type { CheckpointRecord } from '../store/checkpoint-store.js'
import {
  headerMetadata,
  readWorkflowCheckpoint,
  WORKFLOW_CHECKPOINT_KIND,
  WORKFLOW_CHECKPOINT_VERSION,
  type WorkflowCheckpoint,
  type WorkflowCheckpointPhase,
  type WorkflowMessage,
} from './checkpoint.js'
import type { WorkflowStore } from './checkpoint-storage.js'
import { WorkflowCheckpointError } from './errors.js'
import type { RequestInfoEvent } from './events.js'
import type { ExecutorState } from './checkpoint-types.js'
import { describeGraphChanges, type WorkflowGraph } from './graph.js'
import { SharedState } from './shared-state.js'

/** A run as the engine holds it between super steps: exactly what a checkpoint captures. */
export interface RunState {
  runId: string
  /** Super steps completed. */
  iteration: number
  /** Messages in flight, to deliver in the next super step. */
  queue: WorkflowMessage[]
  /** Requests waiting for an answer, in the order they were made. */
  pending: Map<string, RequestInfoEvent>
  state: SharedState
  /** The run's latest checkpoint: the parent of the next. */
  lastCheckpointId: string | null
}

/**
 * Write a checkpoint of `run`: collect every executor's state, save, and advance the lineage.
 * Any failure fails loudly with the super step named: durability is the point.
 */
export async function saveCheckpoint(params: { storage: WorkflowStore; graph: WorkflowGraph; run: RunState; phase: WorkflowCheckpointPhase }): Promise<string> {
  const { storage, graph, run, phase } = params
  const executorStates = await collectExecutorStates(graph, run)
  const checkpointId = newId()
  const checkpoint: WorkflowCheckpoint = {
    checkpointId,
    workflowName: graph.name,
    graphSignatureHash: graph.signatureHash,
    previousCheckpointId: run.lastCheckpointId,
    timestamp: new Date().toISOString(),
    messages: [...run.queue],
    state: run.state.toObject(),
    executorStates,
    pendingRequestInfoEvents: Object.fromEntries(run.pending),
    iterationCount: run.iteration,
    metadata: { phase, runId: run.runId, graphSignature: graph.signature },
    version: WORKFLOW_CHECKPOINT_VERSION,
  }
  try {
    await storage.save({
      id: checkpointId,
      runId: run.runId,
      parentId: run.lastCheckpointId,
      kind: WORKFLOW_CHECKPOINT_KIND,
      phase,
      workflowName: graph.name,
      metadata: headerMetadata(checkpoint),
      payload: checkpoint,
    })
  } catch (error) {
    // Another execution owns the run now: say so as it is, this one writes nothing more.
    if (error instanceof LeaseLostError) throw error
    const path = (error as { path?: unknown }).path
    throw new WorkflowCheckpointError('checkpoint_save_failed', `workflow ${graph.name}: ${label(phase, run.iteration)} could not be saved: ${messageOf(error)}`, {
      cause: error,
      workflowName: graph.name,
      runId: run.runId,
      superstep: run.iteration,
      checkpointId,
      path: typeof path === 'string' ? path : undefined,
    })
  }
  run.lastCheckpointId = checkpointId
  return checkpointId
}

/**
 * Load a checkpoint and bring the workflow back to it: check the workflow name and graph
 * signature, restore every executor's state, and return the run it describes.
 */
export async function restoreCheckpoint(params: { storage: WorkflowStore; graph: WorkflowGraph; checkpointId: string }): Promise<RunState> {
  const { storage, graph, checkpointId } = params
  const record = await storage.load(checkpointId)
  const checkpoint = readWorkflowCheckpoint(record)
  assertCompatible(graph, checkpoint)
  assertKnownIds(graph, checkpoint, record)
  await restoreExecutorStates(graph, checkpoint)
  return {
    runId: record.runId,
    iteration: checkpoint.iterationCount,
    queue: checkpoint.messages,
    pending: new Map(Object.entries(checkpoint.pendingRequestInfoEvents)),
    state: new SharedState(checkpoint.state),
    lastCheckpointId: record.id,
  }
}

function assertCompatible(graph: WorkflowGraph, checkpoint: WorkflowCheckpoint): void {
  if (checkpoint.workflowName !== graph.name) {
    throw new ConfigMismatchError({
      message: `checkpoint ${checkpoint.checkpointId} belongs to workflow ${checkpoint.workflowName}, not ${graph.name}; resume it with the workflow that wrote it`,
      expected: checkpoint.workflowName,
      actual: graph.name,
    })
  }
  if (checkpoint.graphSignatureHash === graph.signatureHash) return
  const changes = describeGraphChanges(checkpoint.metadata.graphSignature, graph.signature)
  throw new ConfigMismatchError({
    message: `workflow ${graph.name} has changed since checkpoint ${checkpoint.checkpointId} was written (the graph has changed: ${changes.join('; ') || 'its signature differs'}); rebuild the original workflow to resume this checkpoint, or start a new run`,
    expected: checkpoint.graphSignatureHash,
    actual: graph.signatureHash,
  })
}

function assertKnownIds(graph: WorkflowGraph, checkpoint: WorkflowCheckpoint, record: CheckpointRecord): void {
  const problems = [
    ...Object.keys(checkpoint.executorStates).filter((id) => !graph.executors.has(id)).map((id) => `state of unknown executor ${id}`),
    ...checkpoint.messages.filter((m) => !graph.executors.has(m.targetId)).map((m) => `a message to unknown executor ${m.targetId}`),
    ...checkpoint.messages.flatMap((m) => (m.kind === 'message' && m.fanIn !== undefined && !graph.fanIn.has(m.fanIn) ? [`a message in unknown fan-in group ${m.fanIn}`] : [])),
    ...Object.values(checkpoint.pendingRequestInfoEvents).filter((r) => !graph.executors.has(r.executorId)).map((r) => `a request from unknown executor ${r.executorId}`),
  ]
  if (problems.length > 0) {
    throw new CheckpointCorruptionError(`workflow checkpoint ${record.id} of run ${record.runId} does not fit workflow ${graph.name}: it holds ${problems.join(', ')}`, {
      runId: record.runId,
      checkpointId: record.id,
    })
  }
}

async function collectExecutorStates(graph: WorkflowGraph, run: RunState): Promise<Record<string, ExecutorState>> {
  const states: Record<string, ExecutorState> = {}
  for (const [id, executor] of graph.executors) {
    let state: unknown
    try {
      state = await executor.onCheckpointSave()
    } catch (error) {
      throw hookError({ graph, run, executorId: id, hook: 'onCheckpointSave', problem: `threw: ${messageOf(error)}`, cause: error })
    }
    if (!isPlainObject(state)) {
      throw hookError({ graph, run, executorId: id, hook: 'onCheckpointSave', problem: `returned ${describe(state)}; return a plain object` })
    }
    states[id] = state
  }
  return states
}

async function restoreExecutorStates(graph: WorkflowGraph, checkpoint: WorkflowCheckpoint): Promise<void> {
  for (const [id, executor] of graph.executors) {
    try {
      await executor.onCheckpointRestore(checkpoint.executorStates[id] ?? {})
    } catch (error) {
      const where = `restoring checkpoint ${checkpoint.checkpointId} (superstep ${checkpoint.iterationCount})`
      throw new WorkflowCheckpointError('executor_hook_failed', `workflow ${graph.name}: executor ${id}'s onCheckpointRestore failed while ${where}: ${messageOf(error)}`, {
        cause: error,
        workflowName: graph.name,
        runId: checkpoint.metadata.runId,
        superstep: checkpoint.iterationCount,
        executorId: id,
        checkpointId: checkpoint.checkpointId,
      })
    }
  }
}

function hookError(p: { graph: WorkflowGraph; run: RunState; executorId: string; hook: string; problem: string; cause?: unknown }): WorkflowCheckpointError {
  return new WorkflowCheckpointError('executor_hook_failed', `workflow ${p.graph.name}: executor ${p.executorId}'s ${p.hook} ${p.problem} (checkpoint after superstep ${p.run.iteration})`, {
    cause: p.cause,
    workflowName: p.graph.name,
    runId: p.run.runId,
    superstep: p.run.iteration,
    executorId: p.executorId,
  })
}

function label(phase: WorkflowCheckpointPhase, iteration: number): string {
  switch (phase) {
    case 'entry':
      return 'the entry checkpoint (superstep 0)'
    case 'responses':
      return `the checkpoint recording responses after superstep ${iteration}`
    case 'superstep':
      return `the checkpoint of superstep ${iteration}`
  }
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return String(value)
  if (Array.isArray(value)) return 'an array'
  return typeof value === 'object' ? `an instance of ${value.constructor?.name ?? 'a class'}` : `a ${typeof value}`
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
