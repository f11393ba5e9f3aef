import { setTimeout as sleep } from 'node:timers/promises'
import type { JsonObject, JsonValue } from '../core/codec.js'
import { CairnError, CheckpointNotFoundError, InvalidArgumentError, RunNotPausedError } from '../core/errors.js'
import type { ContentBlock } from '../model/messages.js'
import type { RunStatus } from '../store/checkpoint-store.js'
import type { CancelOutcome } from '../store/engine/lease-engine.js'
import { JOB_KEY, SETTLED_STATUSES, outcomeOf, withJob, type RunOutcome } from './job.js'
import { requireLeases, type WorkerStore } from './worker-store.js'

/** How long, past the lease of the worker holding a just-paused run, `respond` waits for it to be handed back. */
const HAND_BACK_GRACE_MS = 5000

/** What `CairnClient.enqueue` takes. */
export interface EnqueueOptions {
  /** The agent's input (a prompt or content blocks), or the workflow's message (plain data). */
  input: string | ContentBlock[] | JsonValue
  /** A stable id makes the enqueue idempotent: enqueueing it again changes nothing. Fresh by default. */
  runId?: string
  /** Workers take runs from the queues they serve. Default `default`. */
  queue?: string
  /** Higher runs are claimed first. Default 0. */
  priority?: number
  threadId?: string
  /** Kept with the run (`run.metadata`), alongside the worker layer's own `cairn` key. */
  metadata?: JsonObject
}

/** What `CairnClient.result` takes. */
export interface ResultOptions {
  /** Give up after this long with a `result_timeout` error. Default: wait as long as it takes. */
  timeoutMs?: number
  /** How often to look. Default 200 ms. */
  pollMs?: number
  signal?: AbortSignal
}

/**
 * Enqueue runs for workers, wait for their results, cancel them. Any number of clients and
 * workers, on any machines, share one store (`PostgresStore`; `SqliteStore` on one machine).
 *
 * @example
 * ```ts
 * const client = new CairnClient({ store })
 * const { runId } = await client.enqueue('research', { input: 'Summarize Q4', runId: 'q4-summary' })
 * const outcome = await client.result(runId, { timeoutMs: 60_000 })
 * console.log(outcome.status, outcome.result?.result?.toString())
 * ```
 */
export class CairnClient {
  readonly store: WorkerStore

  constructor(options: { store: WorkerStore }) {
    requireLeases(options?.store)
    this.store = options.store
  }

  /**
   * Queue a run of the agent or workflow registered as `name` on the workers. With a `runId`
   * that was enqueued before, nothing changes (`created: false`): retrying an enqueue is safe.
   */
  async enqueue(name: string, options: EnqueueOptions): Promise<{ runId: string; created: boolean }> {
    if (typeof name !== 'string' || name === '') throw new InvalidArgumentError('enqueue needs the name of an agent or workflow registered on the workers')
    if (options?.input === undefined) throw new InvalidArgumentError(`enqueue('${name}') needs an input: a prompt, content blocks, or a workflow message`)
    const { run, created } = await requireLeases(this.store).enqueue({
      name,
      metadata: { ...(options.metadata ?? {}), [JOB_KEY]: { name, input: options.input as JsonValue } },
      ...(options.runId === undefined ? {} : { runId: options.runId }),
      ...(options.queue === undefined ? {} : { queue: options.queue }),
      ...(options.priority === undefined ? {} : { priority: options.priority }),
      ...(options.threadId === undefined ? {} : { threadId: options.threadId }),
    })
    return { runId: run.runId, created }
  }

  /**
   * Wait until the run settles (`completed`, `failed`, `cancelled`, or `paused` for a human)
   * and return how: an agent's result from its terminal checkpoint, a workflow's outputs, or why
   * it failed.
   */
  async result(runId: string, options: ResultOptions = {}): Promise<RunOutcome> {
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs
    const pollMs = options.pollMs ?? 200
    for (;;) {
      options.signal?.throwIfAborted()
      const run = await this.store.getRun(runId)
      if (!run) throw new CheckpointNotFoundError(`run ${runId} does not exist; enqueue it first`, { runId, code: 'run_not_found' })
      if (SETTLED_STATUSES.includes(run.status)) return outcomeOf(this.store, run)
      const left = deadline - Date.now()
      if (left <= 0) {
        throw new CairnError('result_timeout', `run ${runId} is still ${run.status} after ${options.timeoutMs} ms; wait longer, or check that workers serve its queue`)
      }
      await sleep(Math.min(pollMs, left), undefined, options.signal ? { signal: options.signal } : {})
    }
  }

  /**
   * Answer a `paused` run (an agent's interrupts, a workflow's pending requests, by id; see
   * `outcome.interrupts`) and queue it again: the next worker to claim it resumes it with them.
   *
   * The answers are stored and the run queued in one atomic step of the store, taken only while
   * the run is still paused: of two concurrent `respond` calls exactly one succeeds, and a run
   * cancelled meanwhile stays cancelled. Otherwise it throws {@link RunNotPausedError} with the
   * run's status. A run that has just paused may still be held by its worker for a moment (it is
   * handing the run back); `respond` waits for that.
   *
   * Do not resume a worker's run with a runner of your own: workers would claim it as well.
   */
  async respond(runId: string, responses: Record<string, JsonValue>): Promise<void> {
    if (typeof responses !== 'object' || responses === null || Array.isArray(responses) || Object.keys(responses).length === 0) {
      throw new InvalidArgumentError(`respond('${runId}') needs the answers by interrupt or request id`)
    }
    const leases = requireLeases(this.store)
    let waitUntil: number | undefined
    for (let delayMs = 10; ; delayMs = Math.min(delayMs * 2, 250)) {
      const requeue = await leases.requeuePaused(runId, (run) => withJob(run, { responses }))
      switch (requeue.outcome) {
        case 'queued':
          return
        case 'not_paused':
          throw new RunNotPausedError({ runId, status: requeue.status, message: `run ${runId} is ${requeue.status}, not paused: only a paused run takes responses (${notPausedHint(requeue.status)})` })
        case 'not_enqueued':
          throw new CairnError(
            'invalid_argument',
            `run ${runId} was not enqueued for workers (it was started by a Runner of its own), so no worker would resume it: answer it with runner.resume(agent, { runId: '${runId}', responses })`,
          )
        case 'held':
          // Its worker has paused it and is handing it back; a dead worker's lease lapses instead.
          waitUntil ??= Date.now() + requeue.leaseLeftMs + HAND_BACK_GRACE_MS
          if (Date.now() >= waitUntil) {
            throw new CairnError(
              'invalid_argument',
              `run ${runId} is paused, but worker ${requeue.owner} still holds it and has not handed it back; nothing was changed: call respond again later`,
            )
          }
          await sleep(delayMs)
      }
    }
  }

  /**
   * Cancel a run. A run no worker holds (queued, paused, or whose worker died) is `cancelled`
   * at once; a running one is stopped by its worker at its next checkpoint (`requested`), and its
   * tools' `ctx.signal` fires. A finished run is left as it is (`unchanged`).
   */
  async cancel(runId: string): Promise<CancelOutcome> {
    return requireLeases(this.store).cancel(runId)
  }
}

function notPausedHint(status: RunStatus): string {
  if (status === 'queued' || status === 'running') {
    return `it was answered already, perhaps by another respond(), and is ${status} again; wait with result() until it pauses again`
  }
  return 'it has ended; nothing waits for answers'
}
