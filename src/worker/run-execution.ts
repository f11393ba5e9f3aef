import type { JsonValue } from '../core/codec.js'
import { InterruptExpiredError, LeaseLostError, RecoveryLimitError } from '../core/errors.js'
import type { Agent } from '../agent/agent.js'
import type { ContentBlock } from '../model/messages.js'
import { RUNNER_KIND } from '../runner/phases.js'
import type { RunResult } from '../runner/run-result.js'
import { Runner } from '../runner/runner.js'
import type { RunStatus, StoreReader } from '../store/checkpoint-store.js'
import type { FencedStore } from '../store/leases/fenced-store.js'
import type { ClaimedLease, ReleaseOptions, RunLeases } from '../store/leases/run-leases.js'
import type { Workflow } from '../workflow/workflow.js'
import { FailStopStore } from './fail-stop-store.js'
import { describeFailure, isStoreFailure, jobOf, withJob, type RunFailure } from './job.js'
import { driveWorkflow, WorkflowJobCancelled } from './workflow-job.js'
import type { WorkerEvent } from './worker-events.js'
import type { WorkerStore } from './worker-store.js'

/** What an execution needs from its worker. */
export interface ExecutionContext {
  store: WorkerStore
  leases: RunLeases
  owner: string
  agents: ReadonlyMap<string, () => Agent | Promise<Agent>>
  workflows: ReadonlyMap<string, () => Workflow | Promise<Workflow>>
  maxRecoveryAttempts: number
  durability: 'sync' | 'async'
  /** The clock of sleeps, deadlines and event timeouts. */
  clock: { now(): number }
  emit: (event: WorkerEvent) => void
}

/** Why an execution is being stopped from outside. */
class StopReason extends Error {}

const RELEASE_ATTEMPTS = 5

/**
 * One claimed run, executed by one worker under one lease: a fenced view of the store, an
 * `AbortSignal` that fires when the lease is lost, the run is cancelled or the worker stops, and
 * the runner driving the agent from the run's latest checkpoint (or from the start).
 */
export class RunExecution {
  readonly runId: string
  readonly claimed: ClaimedLease
  /** Real time until which the lease is known to hold (from the last claim or heartbeat sent). */
  confirmedUntil: number
  readonly #ctx: ExecutionContext
  readonly #controller = new AbortController()
  readonly #view: FencedStore
  /** What the runner and workflows write through: the fenced view, stopped at the first store failure. */
  readonly #store: FailStopStore
  #suspended = false
  #cancelled = false

  constructor(ctx: ExecutionContext, claimed: ClaimedLease, claimSentAt: number, leaseMs: number) {
    this.#ctx = ctx
    this.claimed = claimed
    this.runId = claimed.run.runId
    this.confirmedUntil = claimSentAt + leaseMs
    this.#view = ctx.store.fenced(claimed.fence, {
      onLost: (error) => this.#controller.abort(error),
      onCancelRequested: () => this.cancel(),
    })
    this.#store = new FailStopStore(this.#view)
  }

  get epoch(): number {
    return this.claimed.fence.epoch
  }

  /** The lease is gone (a heartbeat found it taken, or it lapsed unrenewed): stop writing, abort. */
  lose(message: string): void {
    this.#view.seal(message)
  }

  /** A cancel was requested: the agent stops at its next boundary and the run ends `cancelled`. */
  cancel(): void {
    this.#cancelled = true
    if (!this.#controller.signal.aborted) this.#controller.abort(new StopReason(`run ${this.runId} was cancelled`))
  }

  /** The worker is stopping: write nothing more, abort, and give the run back for another worker. */
  suspend(message: string): void {
    this.#suspended = true
    this.#view.seal(message)
  }

  /** Execute the run to its end (or until stopped); never rejects. */
  async execute(): Promise<void> {
    const { run, fence, lease } = this.claimed
    this.#ctx.emit({ type: 'claimed', runId: this.runId, owner: fence.owner, epoch: fence.epoch, recoveries: lease.recoveries })
    try {
      // Its row was put back over a cancel or a completion (its log says so): nothing of it runs.
      if (this.claimed.refused) {
        await this.#failRun(this.claimed.refused)
        return
      }
      if (lease.recoveries > this.#ctx.maxRecoveryAttempts) {
        const last = jobOf(run)?.lastError
        await this.#failRun(new RecoveryLimitError({ runId: this.runId, recoveries: lease.recoveries, maxRecoveryAttempts: this.#ctx.maxRecoveryAttempts, lastError: last }))
        return
      }
      const job = jobOf(run)
      const agent = job && this.#ctx.agents.get(job.name)
      const workflow = job && this.#ctx.workflows.get(job.name)
      if (!job || (!agent && !workflow)) {
        const what = job ? `no agent or workflow named '${job.name}' is registered on worker ${fence.owner}` : 'it was not enqueued with a job'
        await this.#failRun({ name: 'UnknownJobError', code: 'unknown_job', message: `run ${this.runId} cannot be executed: ${what}` })
        return
      }
      if (lease.cancelRequested) this.cancel()
      const { responses, answeredBy } = await this.#takeResponses()
      if (agent) {
        const result = await this.#drive(await agent(), job.input as string | ContentBlock[], responses, answeredBy)
        // Belt and braces: an execution the store failed under hands the run back, never releases it with a status.
        if (this.#store.failure) throw this.#store.failure
        await this.#release({ status: statusOf(result) }, 'finished')
      } else {
        await this.#driveWorkflow(await workflow!(), job.input, responses)
      }
    } catch (err) {
      await this.#settleFailure(err)
    }
  }

  /**
   * The answers `CairnClient.respond` left for a paused run, removed from the job before they are
   * used: if this execution dies, the run pauses again and asks again, rather than applying them twice.
   */
  async #takeResponses(): Promise<{ responses: Record<string, JsonValue> | undefined; answeredBy: string | undefined }> {
    const run = this.claimed.run
    const job = jobOf(run)
    const responses = job?.responses
    if (responses !== undefined) await this.#view.updateRun(this.runId, { metadata: withJob(run, {}, ['responses', 'answeredBy']) })
    return { responses, answeredBy: typeof job?.answeredBy === 'string' ? job.answeredBy : undefined }
  }

  async #driveWorkflow(workflow: Workflow, input: unknown, responses: Record<string, JsonValue> | undefined): Promise<void> {
    try {
      const result = await driveWorkflow({ store: this.#store, run: this.claimed.run, workflow, input, responses, cancelled: () => this.#cancelled, clock: this.#ctx.clock })
      const metadata = withJob(await this.#currentRun(), { workflowRunId: result.workflowRunId, outputs: result.outputs })
      await this.#release({ status: result.status, metadata }, 'finished')
    } catch (err) {
      if (this.#view.lost || this.#store.failure || isStoreFailure(err)) throw err
      if (this.#cancelled && causedBy(err, WorkflowJobCancelled)) {
        await this.#release({ status: 'cancelled' }, 'finished')
        return
      }
      // The workflow itself failed (an executor threw, too many super steps): running it again would fail again.
      await this.#failRun(describeFailure(err))
    }
  }

  async #drive(agent: Agent, input: string | ContentBlock[], responses: Record<string, JsonValue> | undefined, answeredBy: string | undefined): Promise<RunResult> {
    const signal = this.#controller.signal
    const threadId = this.claimed.run.threadId ?? this.runId
    const lease = { fence: this.claimed.fence }
    const runner = new Runner({ store: this.#store, durability: this.#ctx.durability, clock: this.#ctx.clock })
    if (await hasRunnerSnapshot(this.#view, this.runId)) {
      try {
        return await runner.resume(agent, { runId: this.runId, threadId, signal, lease, ...(responses === undefined ? {} : { responses, ...(answeredBy === undefined ? {} : { answeredBy }) }) })
      } catch (err) {
        // The answers came after their deadline (respond() checks, but the deadline may pass before
        // a worker gets the run): they are dropped, and the run goes on as its onExpiry says.
        if (!(err instanceof InterruptExpiredError) || responses === undefined) throw err
        this.#ctx.emit({ type: 'error', runId: this.runId, error: err })
        return runner.resume(agent, { runId: this.runId, threadId, signal, lease })
      }
    }
    // Never started, or stopped before its first runtime snapshot: start over. The runner adopts
    // the queued run (a run without a checkpoint), keeping its metadata, which holds the job.
    return runner.run(agent, { runId: this.runId, input, threadId, signal, lease })
  }

  async #settleFailure(err: unknown): Promise<void> {
    const lost = this.#view.lost
    if (lost && !this.#suspended) {
      this.#ctx.emit({ type: 'lost', runId: this.runId, epoch: this.epoch, reason: lost.message, rejectedWrites: this.#view.rejectedWrites })
      return
    }
    if (this.#suspended) {
      await this.#release({}, 'suspended')
      return
    }
    // The execution failed without finishing the run (the store failed under the runner, which
    // then could not record the run as failed: see FailStopStore; the agent could not be
    // restored): give the run back, counted, with the error on record. After maxRecoveryAttempts
    // such hand-backs the next claim fails the run, naming this error.
    this.#ctx.emit({ type: 'error', runId: this.runId, error: err as Error })
    const run = await this.#currentRun()
    await this.#release({ failed: true, metadata: withJob(run, { lastError: describeFailure(err) }) }, 'failed_attempt')
  }

  async #failRun(cause: RunFailure | Error): Promise<void> {
    const failure = cause instanceof Error ? describeFailure(cause) : cause
    this.#ctx.emit({ type: 'error', runId: this.runId, error: cause instanceof Error ? cause : Object.assign(new Error(failure.message), { name: failure.name }) })
    await this.#release({ status: 'failed', metadata: withJob(await this.#currentRun(), { failure }) }, 'failed_by_worker')
  }

  /** The run as stored now (its metadata may have changed since the claim), else as claimed. */
  async #currentRun() {
    return (await this.#ctx.store.getRun(this.runId).catch(() => undefined)) ?? this.claimed.run
  }

  /** Give the run back, retrying a store that is briefly away; a stale fence means it is gone anyway. */
  async #release(options: ReleaseOptions, reason: 'finished' | 'suspended' | 'failed_attempt' | 'failed_by_worker'): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#ctx.leases.release(this.claimed.fence, options)
        this.#ctx.emit({ type: 'released', runId: this.runId, epoch: this.epoch, reason, status: options.status })
        return
      } catch (err) {
        if (err instanceof LeaseLostError) {
          this.#ctx.emit({ type: 'lost', runId: this.runId, epoch: this.epoch, reason: err.message, rejectedWrites: this.#view.rejectedWrites })
          return
        }
        if (attempt >= RELEASE_ATTEMPTS || Date.now() > this.confirmedUntil) {
          // Its lease lapses on its own and another claim counts the recovery.
          this.#ctx.emit({ type: 'error', runId: this.runId, error: err as Error })
          return
        }
        await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt))
      }
    }
  }
}

/** Whether the run has a runner checkpoint to resume from (a runtime snapshot, or its end). */
async function hasRunnerSnapshot(store: StoreReader, runId: string): Promise<boolean> {
  let before: string | undefined
  for (;;) {
    const page = await store.listCheckpoints({ runId, limit: 32, ...(before === undefined ? {} : { before }) })
    if (page.some((info) => info.kind === RUNNER_KIND && (info.metadata.snapshot === true || info.phase === 'run_terminal'))) return true
    if (page.length < 32) return false
    before = page[page.length - 1]?.id
  }
}

function causedBy(err: unknown, type: new (...args: never[]) => Error): boolean {
  let cause: unknown = err
  for (let depth = 0; cause instanceof Error && depth < 8; depth++) {
    if (cause instanceof type) return true
    cause = (cause as { cause?: unknown }).cause
  }
  return false
}

function statusOf(result: RunResult): RunStatus {
  return result.state
}
