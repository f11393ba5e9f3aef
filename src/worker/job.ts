import type { JsonObject, JsonValue } from '../core/codec.js'
import { CairnError } from '../core/errors.js'
import type { Interrupt } from '../agent/interrupts.js'
import { RUNNER_KIND } from '../runner/phases.js'
import { resultFromTerminal, type RunResult } from '../runner/run-result.js'
import type { CheckpointRecord, RunRecord, RunStatus, StoreReader } from '../store/checkpoint-store.js'
import { readWorkflowCheckpoint, WORKFLOW_CHECKPOINT_KIND } from '../workflow/checkpoint.js'
import type { RequestInfoEvent } from '../workflow/events.js'

/** The key of run metadata under which the worker layer keeps what it needs. */
export const JOB_KEY = 'cairn'

/** What an enqueued run carries for the worker that claims it (in `metadata.cairn`). */
export interface JobSpec {
  /** The registered agent or workflow the worker builds for the run. */
  name: string
  /** The run's input: the agent's prompt (or content blocks), the workflow's message. */
  input: JsonValue
  /** Why the worker layer failed the run itself (too many recoveries, an unknown name, a workflow error). */
  failure?: RunFailure
  /** The error that ended the last execution that did not finish the run. */
  lastError?: RunFailure
  /** A workflow job: the store run the workflow writes its checkpoints to. */
  workflowRunId?: string
  /** A finished workflow job: what its executors yielded. */
  outputs?: JsonValue[]
  /** Answers to a paused run's interrupts or requests (`CairnClient.respond`), applied by the next worker. */
  responses?: Record<string, JsonValue>
  /** Who gave `responses` (`respond`'s `answeredBy`), for the run's timeline. */
  answeredBy?: string
}

/** An error as the worker layer records it. */
export interface RunFailure {
  name: string
  message: string
  code?: string
}

/** The statuses after which `CairnClient.result` returns. */
export const SETTLED_STATUSES: readonly RunStatus[] = ['completed', 'failed', 'cancelled', 'paused']

/** How a run settled, as `CairnClient.result` reports it. */
export interface RunOutcome {
  runId: string
  status: RunStatus
  run: RunRecord
  /** An agent run's result, rebuilt from its terminal checkpoint (absent if it never got one). */
  result: RunResult | undefined
  /**
   * A workflow run: the store run holding its checkpoints, the outputs its executors yielded, and
   * (when `paused`) the requests waiting for answers (`CairnClient.respond`, by `requestId`).
   */
  workflow: { runId: string; outputs: JsonValue[]; pendingRequests: RequestInfoEvent[] } | undefined
  /** Why it failed: the run's own error, or the worker layer's reason. */
  error: RunFailure | undefined
  /** For a `paused` agent run: what it waits for (answer with `runner.resume(agent, { runId, responses })`). */
  interrupts: Interrupt[]
}

/** The job of a run, when it has one. */
export function jobOf(run: RunRecord): JobSpec | undefined {
  const job = run.metadata[JOB_KEY]
  if (typeof job !== 'object' || job === null || Array.isArray(job)) return undefined
  const spec = job as Partial<JobSpec>
  return typeof spec.name === 'string' ? (spec as JobSpec) : undefined
}

/** Run metadata with `fields` set on the job, and the keys in `drop` removed from it. */
export function withJob(run: RunRecord, fields: Partial<JobSpec>, drop: readonly (keyof JobSpec)[] = []): JsonObject {
  const job = { ...((jobOf(run) ?? {}) as JsonObject), ...(fields as JsonObject) }
  for (const key of drop) delete job[key]
  return { ...run.metadata, [JOB_KEY]: job }
}

/** An error as the worker layer records it. */
export function describeFailure(err: unknown): RunFailure {
  if (!(err instanceof Error)) return { name: 'Error', message: String(err) }
  const code = (err as { code?: unknown }).code
  return { name: err.name, message: err.message, ...(typeof code === 'string' ? { code } : {}) }
}

/**
 * Whether an error came from the store rather than the run's own logic: a failed or refused
 * write (the database was away, the lease was lost), possibly wrapped by the layer above.
 */
export function isStoreFailure(err: unknown): boolean {
  for (let cause = err, depth = 0; cause instanceof Error && depth < 8; cause = cause.cause, depth++) {
    if (cause instanceof CairnError && (cause.code === 'store_failure' || cause.code === 'store_closed' || cause.code === 'lease_lost')) return true
  }
  return false
}

/** Read how a settled run ended. */
export async function outcomeOf(store: StoreReader, run: RunRecord): Promise<RunOutcome> {
  const job = jobOf(run)
  const latest = await store.getLatest<Record<string, unknown>>({ runId: run.runId })
  const runner = latest?.kind === RUNNER_KIND ? latest : undefined
  const result = runner?.phase === 'run_terminal' ? resultFromTerminal(runner, run.threadId ?? run.runId) : undefined
  return {
    runId: run.runId,
    status: run.status,
    run,
    result,
    workflow:
      job?.workflowRunId === undefined
        ? undefined
        : { runId: job.workflowRunId, outputs: job.outputs ?? [], pendingRequests: run.status === 'paused' ? await pendingRequestsOf(store, job.workflowRunId) : [] },
    error: result?.error ?? job?.failure,
    interrupts: run.status === 'paused' ? interruptsOf(runner) : [],
  }
}

async function pendingRequestsOf(store: StoreReader, workflowRunId: string): Promise<RequestInfoEvent[]> {
  const latest = await store.getLatest({ runId: workflowRunId })
  if (latest?.kind !== WORKFLOW_CHECKPOINT_KIND) return []
  return Object.values(readWorkflowCheckpoint(latest).pendingRequestInfoEvents)
}

/** What a stopped agent run waits for: the interrupts of its latest runner checkpoint, when it is `run_paused`. */
export async function pendingInterruptsOf(store: StoreReader, runId: string): Promise<Interrupt[]> {
  const latest = await store.getLatest<Record<string, unknown>>({ runId })
  return latest?.kind === RUNNER_KIND ? interruptsOf(latest) : []
}

function interruptsOf(record: CheckpointRecord<Record<string, unknown>> | undefined): Interrupt[] {
  const interrupts = record?.phase === 'run_paused' ? record.payload.interrupts : undefined
  return Array.isArray(interrupts) ? (interrupts as Interrupt[]) : []
}
