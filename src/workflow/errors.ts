import { CairnError, CheckpointError, type CairnErrorCode } from '../core/errors.js'

/** Where in a workflow run an error happened. */
export interface WorkflowErrorOptions {
  cause?: unknown
  workflowName?: string | undefined
  runId?: string | undefined
  /** The super step that was running (0 for the entry checkpoint). */
  superstep?: number | undefined
  executorId?: string | undefined
  requestId?: string | undefined
}

/**
 * A workflow run cannot go on: an executor failed (`executor_failed`), the run did not finish
 * within `maxSupersteps` (`max_supersteps`), the workflow is already running (`workflow_busy`),
 * a response names a request that is not pending (`unknown_request`) or fails its schema
 * (`invalid_response`), or answers, from an older checkpoint, a request a later checkpoint shows
 * answered (`request_answered`, unless `allowReanswer`).
 *
 * @example
 * ```ts
 * try { await workflow.run({ checkpointId, responses }) } catch (err) {
 *   if (err instanceof WorkflowError && err.code === 'unknown_request') console.log(err.requestId)
 * }
 * ```
 */
export class WorkflowError extends CairnError {
  readonly workflowName: string | undefined
  readonly runId: string | undefined
  readonly superstep: number | undefined
  readonly executorId: string | undefined
  readonly requestId: string | undefined

  constructor(code: CairnErrorCode, message: string, options: WorkflowErrorOptions = {}) {
    super(code, message, { cause: options.cause })
    this.workflowName = options.workflowName
    this.runId = options.runId
    this.superstep = options.superstep
    this.executorId = options.executorId
    this.requestId = options.requestId
  }
}

/**
 * A workflow checkpoint could not be written (`checkpoint_save_failed`: the store failed or a
 * value is not serializable, with its `path`) or an executor's state hook failed
 * (`executor_hook_failed`). The message names the super step.
 */
export class WorkflowCheckpointError extends CheckpointError {
  readonly workflowName: string | undefined
  readonly superstep: number | undefined
  readonly executorId: string | undefined

  constructor(
    code: CairnErrorCode,
    message: string,
    options: WorkflowErrorOptions & { checkpointId?: string | undefined; path?: string | undefined } = {},
  ) {
    super(code, message, { cause: options.cause, runId: options.runId, checkpointId: options.checkpointId, path: options.path })
    this.workflowName = options.workflowName
    this.superstep = options.superstep
    this.executorId = options.executorId
  }
}
