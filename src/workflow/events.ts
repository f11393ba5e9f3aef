import type { JsonObject } from '../core/codec.js'

/**
 * How a run that did not fail ended: nothing left to do (`idle`), waiting for answers to requests
 * (`paused`), or stopped at handlers' sleeps (`sleeping`) or waits for events (`waiting`).
 */
export type WorkflowRunStatus = 'idle' | 'paused' | 'sleeping' | 'waiting'

/** A run began: fresh, or resumed from `resumedFrom`. */
export interface WorkflowStartedEvent {
  type: 'workflow_started'
  workflowName: string
  runId: string
  /** The checkpoint this run was restored from, or undefined for a fresh run. */
  resumedFrom: string | undefined
  /** Super steps already completed (0 for a fresh run). */
  iteration: number
}

/** A super step is about to deliver its messages. */
export interface SuperstepStartedEvent {
  type: 'superstep_started'
  iteration: number
}

/** An executor is about to handle one delivered message (or response). */
export interface ExecutorInvokedEvent {
  type: 'executor_invoked'
  executorId: string
  iteration: number
}

/** An executor finished handling one delivered message (or response). */
export interface ExecutorCompletedEvent {
  type: 'executor_completed'
  executorId: string
  iteration: number
}

/** A super step completed: state committed, checkpoint written (when the run has storage). */
export interface SuperstepCompletedEvent {
  type: 'superstep_completed'
  iteration: number
  /** The id of the checkpoint written at the end of this super step; undefined without storage. */
  checkpointId: string | undefined
}

/** An executor yielded a workflow output with `ctx.yieldOutput`. */
export interface WorkflowOutputEvent<TOutput = unknown> {
  type: 'output'
  executorId: string
  iteration: number
  data: TOutput
}

/**
 * An executor asked for outside input with `ctx.requestInfo`. The run ends idle with the
 * request pending (it is persisted in the checkpoint); answer it with
 * `workflow.run({ checkpointId, responses: { [requestId]: answer } })`.
 */
export interface RequestInfoEvent<TData = unknown> {
  type: 'request_info'
  requestId: string
  /** The executor that asked; the response is delivered to its `handleResponse`. */
  executorId: string
  /** The super step that asked. */
  iteration: number
  data: TData
  /** A JSON Schema the response must satisfy, checked when it is given. */
  responseSchema?: JsonObject
}

/** The run failed; `run()` throws `error` right after this event. */
export interface WorkflowFailedEvent {
  type: 'workflow_failed'
  error: Error
  iteration: number
  executorId: string | undefined
}

/** The run ended without failing: idle, or idle with requests waiting for answers. */
export interface WorkflowCompletedEvent {
  type: 'workflow_completed'
  runId: string
  status: WorkflowRunStatus
  iteration: number
  /** The run's last checkpoint (the one to resume or answer from); undefined without storage. */
  checkpointId: string | undefined
  pendingRequestIds: string[]
  /** `sleeping` or `waiting`: when the run is due again (the earliest wake time or event deadline), if it has one. */
  wakeAt?: number
  /** `waiting`: the events handlers wait for. */
  waitingFor?: { name: string; match: string; expiresAt?: number }[]
}

/** What `workflow.stream()` yields. */
export type WorkflowEvent<TOutput = unknown> =
  | WorkflowStartedEvent
  | SuperstepStartedEvent
  | ExecutorInvokedEvent
  | ExecutorCompletedEvent
  | SuperstepCompletedEvent
  | WorkflowOutputEvent<TOutput>
  | RequestInfoEvent
  | WorkflowFailedEvent
  | WorkflowCompletedEvent
