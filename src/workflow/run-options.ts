import { isPlainObject } from '../core/codec.js'
import { CairnError, InvalidArgumentError } from '../core/errors.js'
import type { WaitForOwner } from '../runner/run-ownership.js'
import type { WorkflowStore } from './checkpoint-storage.js'

/**
 * How to run a workflow: a fresh run from `message`; a resume from `checkpointId`; answers to
 * pending requests in `responses` (with `checkpointId`: restore that checkpoint, then answer;
 * alone: answer the requests of this instance's last run).
 */
export interface WorkflowRunOptions<TIn = unknown> {
  /** The input of a fresh run, delivered to the start executor. Not with `checkpointId` or `responses`. */
  message?: TIn
  /** Resume from this checkpoint, in this process or a fresh one. */
  checkpointId?: string
  /** Answers to pending requests, by request id. */
  responses?: Record<string, unknown>
  /** A store for this run only, overriding the workflow's (also where `checkpointId` is loaded from). */
  store?: WorkflowStore
  /** @deprecated The former name of `store`. */
  checkpointStorage?: WorkflowStore
  /** Fail when the run would go past this many super steps (counted from the run's start, across resumes). */
  maxSupersteps?: number
  /**
   * Answer, from an older `checkpointId`, a request that a later checkpoint of the same run shows
   * answered already (the run went on with that answer). Refused by default with a
   * `WorkflowError` (code `request_answered`): the answer would start a second branch of the run.
   */
  allowReanswer?: boolean
  /**
   * When another execution (another process, or another instance) owns the run: by default fail
   * at once with `RunBusyError`, naming the owner and when its lease expires; `true` waits until
   * it ends or its lease lapses, `{ timeoutMs }` waits that long at most. Stores with leases only.
   */
  waitForOwner?: WaitForOwner
  /**
   * How long the run's lease lasts without a renewal, in ms (default 60 000). It is renewed in the
   * background while the run executes; a process that dies leaves it to lapse after this long
   * (at once for another process on the same machine). Stores with leases only.
   */
  leaseMs?: number
  /**
   * The clock of the executors' `ctx.sleep` and event timeouts, and of when a stopped run is due
   * (default: the system's). Tests pass one they move by hand.
   */
  clock?: { now(): number }
}

/** What a run does, once its options are checked. */
export type RunPlan =
  | { kind: 'fresh'; message: unknown }
  | { kind: 'resume'; checkpointId: string; responses: Record<string, unknown> | undefined; allowReanswer: boolean }
  | { kind: 'respond'; responses: Record<string, unknown> }

/**
 * Check the run-parameter rules: `message` excludes `checkpointId` and `responses`, and at least
 * one of the three is needed.
 */
export function planRun(options: WorkflowRunOptions): RunPlan {
  if (typeof options !== 'object' || options === null) throw invalid('run needs an options object: { message } or { checkpointId } or { responses }')
  const { message, checkpointId, responses, maxSupersteps } = options
  if (maxSupersteps !== undefined && (!Number.isSafeInteger(maxSupersteps) || maxSupersteps < 1)) {
    throw invalid(`maxSupersteps must be a positive integer, got ${String(maxSupersteps)}`)
  }
  const { leaseMs } = options
  if (leaseMs !== undefined && (typeof leaseMs !== 'number' || !Number.isFinite(leaseMs) || leaseMs <= 0)) {
    throw invalid(`leaseMs must be a positive number of ms, got ${String(leaseMs)}`)
  }
  if (responses !== undefined && (!isPlainObject(responses) || Object.keys(responses).length === 0)) {
    throw invalid('responses must be a non-empty object of answers by request id')
  }
  if (message !== undefined) {
    if (checkpointId !== undefined) throw invalid('pass either message (a fresh run) or checkpointId (a resume), not both')
    if (responses !== undefined) throw invalid('pass either message (a fresh run) or responses (answers to pending requests), not both')
    return { kind: 'fresh', message }
  }
  if (checkpointId !== undefined) {
    if (typeof checkpointId !== 'string' || checkpointId === '') throw invalid('checkpointId must be a non-empty string')
    return { kind: 'resume', checkpointId, responses, allowReanswer: options.allowReanswer === true }
  }
  if (responses !== undefined) return { kind: 'respond', responses }
  throw invalid('run needs message (a fresh run), checkpointId (a resume) or responses (answers to pending requests)')
}

function invalid(message: string): CairnError {
  return new InvalidArgumentError(message)
}
