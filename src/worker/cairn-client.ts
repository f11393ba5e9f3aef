import { setTimeout as sleep } from 'node:timers/promises'
import type { JsonObject, JsonValue } from '../core/codec.js'
import { serialize } from '../core/codec.js'
import { CairnError, CheckpointNotFoundError, InterruptExpiredError, InvalidArgumentError, RunNotPausedError } from '../core/errors.js'
import { newId } from '../core/ids.js'
import type { RunWaits } from '../store/waits/run-waits.js'
import { scheduleBodyOf, scheduleInfoOf, type ScheduleInfo, type ScheduleOptions } from './schedules.js'
import { wakeWaitsFor } from './time-sweep.js'
import type { ContentBlock } from '../model/messages.js'
import type { RunStatus } from '../store/checkpoint-store.js'
import type { CancelOutcome } from '../store/engine/lease-engine.js'
import { JOB_KEY, SETTLED_STATUSES, outcomeOf, pendingInterruptsOf, withJob, type RunOutcome } from './job.js'
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

/** What `CairnClient.send` takes. */
export interface SendOptions {
  /** Delivered only to a wait with this `match` (`ctx.waitForEvent(name, { match })`). Default: none. */
  match?: string
  /** Sending again with the same key delivers the event once. Default: a fresh key (every send is new). */
  idempotencyKey?: string
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

  readonly #clock: { now(): number }

  /** `clock`: the one of the workers (for deadlines and schedules); default `Date.now`. */
  constructor(options: { store: WorkerStore; clock?: { now(): number } }) {
    requireLeases(options?.store)
    this.store = options.store
    this.#clock = options.clock ?? { now: () => Date.now() }
  }

  /**
   * Send an event to the runs that wait for it (`ctx.waitForEvent(name, { match })`). It is kept
   * in the store until a wait takes it, so an event sent before the run gets to its wait is not
   * lost; each event is taken by one wait. With an `idempotencyKey` sent before, nothing is sent
   * again (`sent: false`). A run waiting for it is queued again at once; `woken` names the runs
   * waiting for it, queued by this call or by a worker that saw the event first. Workers resume them.
   */
  async send(name: string, payload: JsonValue, options: SendOptions = {}): Promise<{ eventId: string; sent: boolean; woken: string[] }> {
    if (typeof name !== 'string' || name === '') throw new InvalidArgumentError('send needs the name of the event runs wait for')
    const match = options.match ?? ''
    if (typeof match !== 'string') throw new InvalidArgumentError(`send('${name}'): match must be a string, got ${typeof match}`)
    const eventId = options.idempotencyKey ?? newId()
    if (typeof eventId !== 'string' || eventId === '') throw new InvalidArgumentError(`send('${name}'): idempotencyKey must be a non-empty string`)
    const waits = this.#waits('send')
    const sent = await waits.sendEvent({ eventId, name, match, payload: serialize(payload, 'payload'), sentAt: this.#clock.now() })
    const woken = await wakeWaitsFor({ waits, leases: requireLeases(this.store), now: () => this.#clock.now() }, { name, match })
    return { eventId, sent, woken }
  }

  /**
   * Start a run of an agent or workflow at every tick of a cron, exactly once per tick however
   * many workers serve the store: the run id is `<id>@<tick>` (`nightly@2026-01-01T02:00:00.000Z`).
   * Scheduling an id again replaces its cron, input and policy (its last tick stays). The first
   * tick is the first one after now.
   */
  async schedule(options: ScheduleOptions): Promise<{ id: string; created: boolean }> {
    const body = scheduleBodyOf(options)
    const now = this.#clock.now()
    const created = await this.#waits('schedule').putSchedule({ id: options.id, body: JSON.stringify(body), paused: false, lastTick: now, createdAt: now })
    return { id: options.id, created }
  }

  /** Stop a schedule from starting runs (runs started stay); false when there was none. */
  async unschedule(id: string): Promise<boolean> {
    return this.#waits('unschedule').deleteSchedule(id)
  }

  /** Pause a schedule: no tick runs until `resumeSchedule` (ticks missed meanwhile follow its catchUp). */
  async pauseSchedule(id: string): Promise<void> {
    if (!(await this.#waits('pauseSchedule').setSchedulePaused(id, true))) throw new CheckpointNotFoundError(`there is no schedule ${id}; see client.schedules()`, { code: 'checkpoint_not_found' })
  }

  /** Resume a paused schedule. */
  async resumeSchedule(id: string): Promise<void> {
    if (!(await this.#waits('resumeSchedule').setSchedulePaused(id, false))) throw new CheckpointNotFoundError(`there is no schedule ${id}; see client.schedules()`, { code: 'checkpoint_not_found' })
  }

  /** The stored schedules, by id, with their next tick. */
  async schedules(): Promise<ScheduleInfo[]> {
    const now = this.#clock.now()
    return (await this.#waits('schedules').listSchedules()).map((row) => scheduleInfoOf(row, now))
  }

  /**
   * Wake a sleeping run now, before its wake time: its sleeps return at once and a worker resumes
   * it. Throws {@link RunNotPausedError} when the run is not sleeping.
   */
  async wake(runId: string): Promise<void> {
    const run = await this.store.getRun(runId)
    if (!run) throw new CheckpointNotFoundError(`run ${runId} does not exist`, { runId, code: 'run_not_found' })
    if (run.status !== 'sleeping') throw new RunNotPausedError({ runId, status: run.status, message: `run ${runId} is ${run.status}, not sleeping: only a sleeping run can be woken` })
    const sleeps = (await pendingInterruptsOf(this.store, runId)).filter((interrupt) => interrupt.wakeAt !== undefined)
    if (sleeps.length === 0) {
      throw new InvalidArgumentError(`run ${runId} sleeps in a workflow executor (or in no tool of an agent): client.wake wakes an agent's tool sleeps; a workflow sleeps until its wake time`, { runId })
    }
    const wokeAt = new Date(this.#clock.now()).toISOString()
    await this.respond(runId, Object.fromEntries(sleeps.map((interrupt) => [interrupt.id, { wokeAt }])))
  }

  /** An answer to an interrupt whose deadline passed is refused: its onExpiry has happened, or will. */
  async #refuseLate(runId: string, responses: Record<string, JsonValue>): Promise<void> {
    const now = this.#clock.now()
    for (const interrupt of await pendingInterruptsOf(this.store, runId)) {
      if (!Object.hasOwn(responses, interrupt.id) || interrupt.event !== undefined || interrupt.expiresAt === undefined) continue
      if (now >= interrupt.expiresAt) throw new InterruptExpiredError({ runId, interruptId: interrupt.id, expiresAt: interrupt.expiresAt })
    }
  }

  #waits(what: string): RunWaits {
    const waits = this.store.waits
    if (!waits) throw new CairnError('time_unavailable', `${what} needs a store that keeps waits, events and schedules: MemoryStore, SqliteStore or PostgresStore`)
    return waits
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
   * `answeredBy` names who answered (a user, a service): the worker that resumes the run records
   * it with the answers, so `cairn show` and the inspector say who gave them.
   *
   * Do not resume a worker's run with a runner of your own: workers would claim it as well.
   */
  async respond(runId: string, responses: Record<string, JsonValue>, options: { answeredBy?: string } = {}): Promise<void> {
    if (typeof responses !== 'object' || responses === null || Array.isArray(responses) || Object.keys(responses).length === 0) {
      throw new InvalidArgumentError(`respond('${runId}') needs the answers by interrupt or request id`)
    }
    const { answeredBy } = options
    if (answeredBy !== undefined && (typeof answeredBy !== 'string' || answeredBy === '')) throw new InvalidArgumentError(`respond('${runId}'): answeredBy must be a non-empty string, got ${JSON.stringify(answeredBy)}`)
    const leases = requireLeases(this.store)
    await this.#refuseLate(runId, responses)
    let waitUntil: number | undefined
    for (let delayMs = 10; ; delayMs = Math.min(delayMs * 2, 250)) {
      const requeue = await leases.requeuePaused(runId, (run) => (answeredBy === undefined ? withJob(run, { responses }, ['answeredBy']) : withJob(run, { responses, answeredBy })))
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
