import { encodeValue, type JsonValue } from '../core/codec.js'
import { CairnError } from '../core/errors.js'
import type { CheckpointInput, RunRecord, RunStatus, RunStore, UpdateRunInput } from '../store/checkpoint-store.js'
import type { WorkflowStore } from '../workflow/checkpoint-storage.js'
import type { Workflow } from '../workflow/workflow.js'
import type { RunWaits } from '../store/waits/run-waits.js'
import type { WorkflowWaits } from '../workflow/waits.js'
import { jobOf, withJob } from './job.js'

/** How a workflow job ended (a failure is thrown). */
export interface WorkflowJobResult {
  status: Extract<RunStatus, 'completed' | 'paused' | 'sleeping' | 'waiting'>
  workflowRunId: string
  /** The executors' outputs, when they are plain data (else empty). */
  outputs: JsonValue[]
}

/** What a cancelled workflow job's next checkpoint throws (the worker catches it and ends the run `cancelled`). */
export class WorkflowJobCancelled extends Error {
  constructor(runId: string) {
    super(`run ${runId} was cancelled; the workflow stopped at its next checkpoint`)
    this.name = 'WorkflowJobCancelled'
  }
}

/**
 * Drive the workflow of a job run under the worker's fenced view. A workflow picks its own run
 * id for the store (its checkpoints live under it); the job run records that id
 * (`metadata.cairn.workflowRunId`) before the workflow's first checkpoint is written, so a later
 * claim resumes the workflow from its latest checkpoint instead of starting it again.
 * Cancellation is seen at the workflow's next checkpoint.
 */
export async function driveWorkflow(params: {
  store: RunStore
  run: RunRecord
  workflow: Workflow
  input: unknown
  /** Answers to the workflow's pending requests, for a paused run. */
  responses: Record<string, unknown> | undefined
  cancelled: () => boolean
  /** The clock of the executors' sleeps and event deadlines. */
  clock: { now(): number }
}): Promise<WorkflowJobResult> {
  const { store, run, workflow } = params
  const storage = new LinkedWorkflowStorage(store, run.runId, params.cancelled)
  const linked = jobOf((await store.getRun(run.runId)) ?? run)?.workflowRunId
  const latest = linked === undefined ? undefined : await store.getLatest({ runId: linked })
  storage.link = linked
  const responses = params.responses === undefined ? {} : { responses: params.responses }
  const clock = params.clock
  const result = latest
    ? await workflow.run({ checkpointId: latest.id, store: storage, clock, ...responses })
    : await workflow.run({ message: params.input, store: storage, clock })
  const outputs = result.getOutputs()
  return { status: result.status === 'idle' ? 'completed' : result.status, workflowRunId: result.runId, outputs: plainOrEmpty(outputs) }
}

/**
 * The workflow's storage: the fenced view, linking the job run to the workflow's run on its first
 * save. The timer and waits of a workflow stopped at a sleep or a wait are the job run's: it is
 * the run workers queue again when they are due.
 */
class LinkedWorkflowStorage implements WorkflowStore {
  link: string | undefined
  readonly waits: WorkflowStore['waits']
  readonly #store: RunStore
  readonly #jobRunId: string
  readonly #cancelled: () => boolean

  constructor(store: RunStore, jobRunId: string, cancelled: () => boolean) {
    this.#store = store
    this.#jobRunId = jobRunId
    this.#cancelled = cancelled
    this.waits = store.waits && jobWaits(store.waits, jobRunId)
  }

  async save<P>(input: CheckpointInput<P>): Promise<string> {
    if (this.#cancelled()) throw new WorkflowJobCancelled(this.#jobRunId)
    if (input.runId !== this.link) {
      const job = await this.#store.getRun(this.#jobRunId)
      if (!job) throw new CairnError('run_not_found', `run ${this.#jobRunId} disappeared while its workflow ran`)
      await this.#store.updateRun(this.#jobRunId, { metadata: withJob(job, { workflowRunId: input.runId }) })
      this.link = input.runId
    }
    return this.#store.save(input)
  }

  load: WorkflowStore['load'] = (checkpointId) => this.#store.load(checkpointId)
  getLatest: WorkflowStore['getLatest'] = (query) => this.#store.getLatest(query)
  listCheckpoints: WorkflowStore['listCheckpoints'] = (query) => this.#store.listCheckpoints(query)
  updateRun = (runId: string, patch: UpdateRunInput) => this.#store.updateRun(runId, patch)
}

/** The store's waits with the timer and waits of any run set on the job run instead. */
function jobWaits(waits: RunWaits, jobRunId: string): WorkflowWaits {
  return {
    takeEvent: (request) => waits.takeEvent(request),
    setTimer: (_runId, wakeAt) => waits.setTimer(jobRunId, wakeAt),
    setWait: (wait) => waits.setWait({ ...wait, runId: jobRunId }),
    clearRun: () => waits.clearRun(jobRunId),
  }
}

function plainOrEmpty(outputs: unknown[]): JsonValue[] {
  try {
    encodeValue(outputs, 'outputs')
    return outputs as JsonValue[]
  } catch {
    return []
  }
}
