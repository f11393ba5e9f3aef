import { hostname } from 'node:os'
import type { JsonObject, JsonValue } from '../core/codec.js'
import { CairnError, CheckpointCorruptionError, InterruptExpiredError, CheckpointError, CheckpointNotFoundError, InvalidArgumentError, isStoreOutage, LeaseLostError, RunBusyError, RunNotPausedError, StoreError } from '../core/errors.js'
import { freezeDeep } from '../core/freeze.js'
import { newId } from '../core/ids.js'
import type { Agent } from '../agent/agent.js'
import { nextTimeOf, waitingStatusOf, type Interrupt } from '../agent/interrupts.js'
import type { LoopStart } from '../agent/event-loop.js'
import { AgentResult, newMetrics } from '../agent/result.js'
import { textOf, toolUsesOf, type Message } from '../model/messages.js'
import type { CreateRunInput, EffectRecord, ListRunsQuery, RunRecord, RunStore, UpdateRunInput } from '../store/checkpoint-store.js'
import { EngineStore } from '../store/engine-store.js'
import { assertId } from '../store/encoding/validate.js'
import type { Tool, ToolTimeHost } from '../tools/tool.js'
import { parseJson, type JsonValue as Json } from '../core/codec.js'
import { CheckpointWriter, type WriterOptions } from './checkpoint-writer.js'
import { EffectJournal, OUTCOME_UNKNOWN } from './effect-journal.js'
import { historyOf, phasesOf } from './phase-log.js'
import { RUNNER_KIND, type RunnerCheckpoint, type RuntimeSnapshot } from './phases.js'
import { callIdsOf, loadRunState } from './resume-state.js'
import { resultFromTerminal, terminalPayload, type RunResult } from './run-result.js'
import { RunSession } from './run-session.js'
import { ownerProcessIsGone, RunOwnership } from './run-ownership.js'
import { assertContext, newRuntime, ownerMetadata, repairDanglingToolUses, restoreAgent } from './run-state.js'
import { subagentTool } from './subagent-tool.js'
import type { OwnershipOptions, ResumeOptions, RunOptions, StreamOptions } from './run-options.js'
import type { RunEvent, RunEventListener } from '../observe/run-events.js'
import { loadOpenTelemetry, runTracing } from '../observe/telemetry.js'
import { deltaOf, emitter, observedTools, reportOutcome, streamOf, type Emit } from './run-observer.js'
import { EventRecorder, type EventLogOptions } from './event-recorder.js'
import { followRun, type RunEventsOptions, type StreamedRunEvent } from './run-stream.js'

export type { OwnershipOptions, ResumeOptions, RunOptions, StreamOptions } from './run-options.js'

/** How to build a {@link Runner}. */
export interface RunnerOptions extends Partial<WriterOptions> {
  store: RunStore
  /** Told of every {@link RunEvent} of every run this runner drives (see also `runner.stream`). */
  onEvent?: RunEventListener
  /**
   * How long this runner's hold on a run it executes lasts without renewal. The runner renews it
   * in the background (every third of it) for as long as it runs, so it only matters when the
   * process dies or freezes: another process may take the run over once it lapses (at once when
   * the dead process was on the same machine). Keep it well above the longest pause of the event
   * loop (a model call does not pause it). Default 60 s.
   */
  leaseMs?: number
  /**
   * How every run this runner drives is kept in the store's event log (`store.events`), for
   * `runner.events()` readers in any process; `false` keeps none. Default: on, with the
   * defaults of {@link EventLogOptions}, when the store has an event log.
   */
  eventLog?: EventLogOptions | false
  /**
   * The clock of `ctx.sleep`, deadlines and event timeouts (Unix ms). Default `Date.now`; tests
   * pass one they move by hand (give the workers the same one).
   */
  clock?: { now(): number }
}

/**
 * Durable managed runs. The runner drives an agent's loop and persists a checkpoint
 * at every phase to a `CheckpointStore`, journals every tool call on its own, and resumes a run
 * in a fresh process from where it stopped: a checkpointed model response is never requested
 * again and a completed tool call never runs again.
 *
 * @example
 * ```ts
 * const runner = new Runner({ store: new SqliteStore({ path: '.cairn/cairn.db' }) })
 * const run = await runner.run(agent, { input: 'Analyze Q4 revenue trends', runId: 'q4' })
 * // after a crash, in a fresh process:
 * const again = await runner.resume(buildAgent(), { runId: 'q4' })
 * ```
 */
export class Runner {
  readonly store: RunStore
  readonly #writer: WriterOptions
  readonly #active = new Set<string>()
  readonly #onEvent: RunEventListener | undefined
  /** Listeners of `stream` calls, by run id (a run is driven once at a time per process). */
  readonly #listeners = new Map<string, RunEventListener>()
  readonly #leaseMs: number
  readonly #eventLog: EventLogOptions | false
  readonly #clock: { now(): number }

  constructor(options: RunnerOptions) {
    if (!options?.store) throw new InvalidArgumentError('Runner needs a store: new Runner({ store })')
    this.store = options.store
    this.#onEvent = options.onEvent
    this.#leaseMs = options.leaseMs ?? 60_000
    this.#eventLog = options.eventLog ?? {}
    this.#clock = options.clock ?? { now: () => Date.now() }
    if (typeof this.#leaseMs !== 'number' || !Number.isFinite(this.#leaseMs) || this.#leaseMs <= 0) {
      throw new InvalidArgumentError(`leaseMs must be a positive number of ms, got ${String(options.leaseMs)}`)
    }
    this.#writer = {
      durability: options.durability ?? 'async',
      queueMaxSize: options.queueMaxSize ?? 1000,
      flushTimeoutMs: options.flushTimeoutMs ?? 10_000,
      coalesceRuntimeState: options.coalesceRuntimeState ?? true,
    }
    if (this.#writer.durability !== 'async' && this.#writer.durability !== 'sync') {
      throw new InvalidArgumentError(`durability must be 'async' or 'sync', got ${JSON.stringify(options.durability)}`)
    }
  }

  /**
   * Start a new run of `agent` on `input` and drive it to the end (or an interrupt). The first
   * commit holds the input, so a run is resumable from the start; a run id whose process died
   * before that commit may be started again.
   */
  async run(agent: Agent, options: RunOptions): Promise<RunResult> {
    const runId = options.runId ?? newId()
    assertId(runId, 'runId')
    assertContext(options.context)
    const threadId = options.threadId ?? runId
    const fields = {
      threadId,
      name: agent.name,
      configSignature: agent.configSignature.hash,
      metadata: { ...ownerMetadata(), ...(options.parentRunId === undefined ? {} : { parentRunId: options.parentRunId }) },
    }
    const ownership = await this.#own(runId, options, fields)
    try {
      const existing = ownership.created ? undefined : (ownership.run ?? (await this.store.getRun(runId)))
      if (existing && existing.lastSeq > 0) {
        throw new CheckpointError('run_exists', `run ${runId} already exists; continue it with runner.resume(agent, { runId: '${runId}' })`, { runId })
      }
      // A run with no checkpoint yet (enqueued, or its process died before the first commit) is adopted.
      if (existing) await this.#writeRun(ownership, runId, { ...fields, status: 'running', metadata: { ...existing.metadata, ...fields.metadata } })
      else if (!ownership.created) await this.store.createRun({ runId, ...fields })
      const message: Message = { role: 'user', content: typeof options.input === 'string' ? [{ text: options.input }] : options.input }
      const runtime = newRuntime(agent, options.context ?? {})
      const start: LoopStart = { phase: 'model', cycleIndex: 0, responses: {} }
      agent.messages.push(freezeDeep(message))
      return await this.#drive({ agent, runId, threadId, runtime, start, message: undefined, effects: [], responses: {}, resumed: false, signal: options.signal, ownership })
    } finally {
      await ownership.release()
    }
  }

  /**
   * Continue a run from its latest checkpoint, in this or a fresh process. A finished run
   * returns its stored result without running anything; a paused one needs `responses`. The run
   * is owned for the time of the call: a second execution of it at the same time, in any process,
   * gets `RunBusyError` (or waits, with `waitForOwner`).
   */
  async resume(agent: Agent, options: ResumeOptions): Promise<RunResult> {
    const { runId } = options
    assertId(runId, 'runId')
    assertContext(options.context)
    const ownership = await this.#own(runId, options, undefined)
    try {
      return await this.#resumeOwned(agent, options, ownership)
    } finally {
      await ownership.release()
    }
  }

  async #resumeOwned(agent: Agent, options: ResumeOptions, ownership: RunOwnership): Promise<RunResult> {
    const { runId } = options
    const stored = await loadRunState(this.store, runId)
    const run = stored.opened.run
    const threadId = options.threadId ?? run?.threadId ?? runId
    if (stored.kind === 'terminal') {
      const state = stored.record.payload.state as 'completed' | 'failed' | 'cancelled'
      if (Object.keys(options.responses ?? {}).length > 0) {
        throw new RunNotPausedError({ runId, status: state, message: `run ${runId} is ${state}, not paused: it waits for no response; resume it without responses to read its result` })
      }
      if (run && run.status !== state) await this.#writeRun(ownership, runId, { status: state })
      return resultFromTerminal(stored.record, threadId)
    }
    const runtime = structuredClone({ ...stored.runtime, messages: [] }) as RuntimeSnapshot
    runtime.messages = stored.runtime.messages
    runtime.context = { ...runtime.context, ...(options.context ?? {}) }
    restoreAgent(agent, runtime, options.allowConfigChange === true)
    const pending = agent.pendingInterrupts
    const responses = options.responses ?? {}
    let start: LoopStart
    if (pending.length > 0) {
      const unknown = Object.keys(responses).filter((id) => !pending.some((i) => i.id === id))
      if (unknown.length > 0) {
        throw new InvalidArgumentError(`run ${runId} has no pending interrupt ${unknown.join(', ')}; pending: ${pending.map((i) => i.id).join(', ')}`)
      }
      this.#refuseLateAnswers(runId, pending, responses)
      if (Object.keys(responses).length === 0 && !(await this.#due(runId, pending))) return pausedResult(runId, threadId, pending, runtime)
      await this.store.waits?.clearRun(runId)
      start = { phase: 'tools', cycleIndex: runtime.agent.interrupts.cycleIndex, responses }
    } else if (Object.keys(responses).length > 0) {
      throw new RunNotPausedError({ runId, status: run?.status, message: `run ${runId} is not paused waiting for any response; resume it without responses` })
    } else {
      start = { phase: runtime.next, cycleIndex: runtime.step, responses: {} }
    }
    const lastMessage = agent.messages[agent.messages.length - 1]
    const finalAnswer = start.phase === 'model' && lastMessage?.role === 'assistant' && toolUsesOf(lastMessage).length === 0 ? lastMessage : undefined
    const repaired = start.phase === 'model' && repairDanglingToolUses(agent)
    const effects = stored.opened.effects
    const answers = answersOf(pending, responses, options.answeredBy)
    const metadata = stored.opened.run?.metadata
    return this.#drive({ agent, runId, threadId, runtime, start, message: undefined, effects, responses, answers, resumed: true, signal: options.signal, repaired, finalAnswer, ownership, ...(metadata ? { metadata } : {}) })
  }

  /** An answer to an interrupt past its deadline is refused (a sleep or an event wait may be answered early: a wake). */
  #refuseLateAnswers(runId: string, pending: readonly Interrupt[], responses: Record<string, JsonValue>): void {
    const now = this.#clock.now()
    for (const interrupt of pending) {
      if (!Object.hasOwn(responses, interrupt.id) || interrupt.event !== undefined || interrupt.expiresAt === undefined) continue
      if (now >= interrupt.expiresAt) throw new InterruptExpiredError({ runId, interruptId: interrupt.id, expiresAt: interrupt.expiresAt })
    }
  }

  /**
   * Whether a stopped run may go on without answers: a sleep's wake time or a deadline has
   * passed, or an event a wait matches is there (taken for it now; the tool gets it when it runs again).
   */
  async #due(runId: string, pending: readonly Interrupt[]): Promise<boolean> {
    const now = this.#clock.now()
    const time = this.#timeHost(runId)
    for (const interrupt of pending) {
      if (interrupt.wakeAt !== undefined && now >= interrupt.wakeAt) return true
      if (interrupt.expiresAt !== undefined && now >= interrupt.expiresAt) return true
      if (interrupt.event && time && (await time.takeEvent({ waitId: interrupt.id, ...interrupt.event }))) return true
    }
    return false
  }

  /** `ctx.sleep` and `ctx.waitForEvent` of the run's tools: this runner's clock and the store's events. */
  #timeHost(runId: string): ToolTimeHost | undefined {
    const waits = this.store.waits
    if (!waits) return undefined
    return {
      now: () => this.#clock.now(),
      takeEvent: async ({ waitId, name, match }) => {
        const event = await waits.takeEvent({ name, match, takenBy: `${runId}/${waitId}` })
        return event && { payload: parseJson(event.payload) as Json }
      },
    }
  }

  /**
   * Before a run is stored stopped at `interrupts`: its waits for events, and a timer at the
   * earliest wake time or deadline, so that a worker looks at it again then.
   */
  async #recordWaits(runId: string, interrupts: readonly Interrupt[]): Promise<void> {
    const waits = this.store.waits
    if (!waits) return
    await waits.clearRun(runId)
    for (const interrupt of interrupts) {
      if (interrupt.event) await waits.setWait({ runId, waitId: interrupt.id, name: interrupt.event.name, match: interrupt.event.match })
    }
    const next = nextTimeOf(interrupts)
    if (next !== undefined) await waits.setTimer(runId, next)
  }

  /** Take the run's lease (or use the caller's); `create`: insert the run when it does not exist. */
  async #own(runId: string, options: OwnershipOptions & { signal?: AbortSignal | undefined }, create: Omit<CreateRunInput, 'runId'> | undefined): Promise<RunOwnership> {
    if (options.lease) return RunOwnership.held(options.lease)
    const ownership = await RunOwnership.acquire({
      store: this.store,
      runId,
      leaseMs: this.#leaseMs,
      ...(create ? { create } : {}),
      // A resume's `openRun` on an engine store checks the run's status against its log in its own read.
      ...(create === undefined && this.store instanceof EngineStore ? { statusCheckedLater: true } : {}),
      ...(options.waitForOwner === undefined ? {} : { waitForOwner: options.waitForOwner }),
      signal: options.signal,
    })
    if (!ownership) {
      throw new CheckpointNotFoundError(`run ${runId} does not exist in this store; start it with runner.run(agent, { runId: '${runId}', input })`, { runId, code: 'run_not_found' })
    }
    return ownership
  }

  /** A change to the run, fenced by the execution's lease. */
  async #writeRun(ownership: RunOwnership, runId: string, run: UpdateRunInput): Promise<void> {
    await this.store.write({ runId, run, fence: ownership.fence })
  }

  /**
   * `run` (or, with `resume: true`, `resume`) as a stream of {@link RunEvent}s; the generator
   * returns the `RunResult`.
   *
   * @example
   * ```ts
   * for await (const event of runner.stream(agent, { input: 'Analyze Q4', runId: 'q4' })) console.log(event.type)
   * ```
   */
  stream(agent: Agent, options: StreamOptions): AsyncGenerator<RunEvent, RunResult> {
    const runId = options.resume === true ? options.runId : (options.runId ?? newId())
    return streamOf(async (listener) => {
      this.#listeners.set(runId, listener)
      try {
        return options.resume === true ? await this.resume(agent, options) : await this.run(agent, { ...options, runId })
      } finally {
        this.#listeners.delete(runId)
      }
    })
  }

  /**
   * A run's events as a durable stream: every event after `after` (from the first without it),
   * each with its cursor, then the live run's as they are stored, until the `run_finished` of
   * a completed, failed, cancelled or paused run. The run may execute in this process, another
   * one or a worker elsewhere: the events come from the store's event log. A reader that
   * reconnects with the last cursor it saw gets every later event exactly once, in order. When
   * the process executing the run died in the middle of a model call, the process that resumes
   * it first writes `model_call_voided` for that step: the deltas before it are not part of the
   * answer.
   *
   * @example
   * ```ts
   * let cursor: string | undefined
   * for await (const { cursor: at, event } of runner.events('q4', { after: cursor })) {
   *   if (event.type === 'text_delta') process.stdout.write(event.text)
   *   cursor = at // keep it: reconnect with { after: cursor }
   * }
   * ```
   */
  events(runId: string, options: RunEventsOptions = {}): AsyncGenerator<StreamedRunEvent, void> {
    assertId(runId, 'runId')
    return followRun(this.store, runId, options)
  }

  /**
   * The run's runner checkpoints, oldest first: its audit log. Every phase is one entry, the
   * light phases kept in a stored checkpoint's phase log included (their ids are `<stored id>~<n>`,
   * `loadPhase` reads one), each with when it was recorded.
   */
  async history(runId: string): Promise<RunnerCheckpoint[]> {
    const run = await this.store.getRun(runId)
    const records = await this.store.loadRun<Record<string, unknown>>(runId, { kind: RUNNER_KIND })
    return historyOf(records, run?.threadId ?? null)
  }

  /** Runs in the store, newest first. */
  listRuns(query: ListRunsQuery = {}): Promise<RunRecord[]> {
    return this.store.listRuns(query)
  }

  /**
   * Resume every run left `running` by an execution that is gone: its process died (on this
   * machine: at once; elsewhere: once its lease lapsed, `leaseMs` after its last renewal). A run
   * another live process is executing is skipped (it is that process's). Two processes may call
   * this at once (two pods starting): each run is resumed by exactly one of them.
   * `resolveAgent` builds the agent for a run (by its name, say). Only agent runs are resumed:
   * a store may hold workflow runs and LangGraph threads too (a thread stays `running` between
   * invocations), which go on in the code that wrote them.
   */
  async recoverAll(resolveAgent: (run: RunRecord) => Agent | Promise<Agent>): Promise<RunResult[]> {
    const results: RunResult[] = []
    for (const run of await this.store.listRuns({ status: 'running' })) {
      // A run with no checkpoint died before its first commit: there is nothing to resume; start
      // it again with runner.run and the same runId.
      if (this.#active.has(run.runId) || run.lastSeq === 0 || !(await this.#isAgentRun(run.runId))) continue
      const lease = await this.store.leases?.getLease(run.runId)
      if (lease?.owner && lease.leaseExpiresAt !== null && lease.leaseExpiresAt >= Date.now() && !ownerProcessIsGone(lease.owner)) continue
      try {
        results.push(await this.resume(await resolveAgent(run), { runId: run.runId }))
      } catch (err) {
        if (!(err instanceof RunBusyError)) throw err
      }
    }
    return results
  }

  /** Whether the run's latest checkpoint is an agent run's (a runner checkpoint). */
  async #isAgentRun(runId: string): Promise<boolean> {
    const [latest] = await this.store.listCheckpoints({ runId, limit: 1 })
    return latest?.kind === RUNNER_KIND
  }

  /**
   * An agent as a tool of another: each call is a child run (its own run id, derived from the
   * call's idempotency key, with the parent's id recorded), resumable on its own. The tool's input
   * is `{ prompt: string }`, the child run's input.
   */
  asTool(buildAgent: () => Agent, options: { name: string; description: string }): Tool {
    return subagentTool(this, buildAgent, options)
  }

  async #drive(params: DriveParams): Promise<RunResult> {
    const { agent, runId, runtime } = params
    if (this.#active.has(runId)) throw new CairnError('agent_busy', `run ${runId} is already being driven by this process`)
    this.#active.add(runId)
    let recorder: EventRecorder | undefined
    try {
      const log = this.#eventLog === false ? undefined : this.store.events
      const opened = log && (await EventRecorder.open(log, runId, this.#eventLog || {}))
      recorder = opened?.recorder
      const emit = emitter([this.#onEvent, this.#listeners.get(runId), await tracing(), recorder && ((event) => recorder!.record(event))])
      // A model call the last execution was cut off in: its streamed deltas are void.
      if (opened?.cutOffStep !== undefined) emit({ type: 'model_call_voided', runId, step: opened.cutOffStep })
      emit({ type: 'run_started', runId, agentName: agent.name, model: runtime.requested_model, resumed: params.resumed, step: runtime.step })
      try {
        const result = await this.#driveOnce(params, emit)
        reportOutcome(emit, runId, runtime.step, { result })
        return result
      } catch (error) {
        reportOutcome(emit, runId, runtime.step, { error })
        throw error
      }
    } finally {
      this.#active.delete(runId)
      await recorder?.close().catch((err: unknown) => {
        process.emitWarning(`run ${runId}: its events could not all be stored in the event log, so streams of it stop early: ${err instanceof Error ? err.message : String(err)}`, 'CairnWarning')
      })
    }
  }

  async #driveOnce(params: DriveParams, emit: Emit): Promise<RunResult> {
    const { agent, runId, threadId, runtime } = params
    const { ownership } = params
    const by = `pid ${process.pid} on ${hostname()}`
    const writer = new CheckpointWriter(this.store, runId, this.#writer, {
      fence: ownership.fence,
      by,
      onCommit: (records, ids) => {
        records.forEach((record, i) => {
          for (const phase of phasesOf(record, ids[i] ?? '')) emit({ type: 'phase_committed', runId, ...phase })
        })
      },
    })
    const journal = new EffectJournal({
      store: this.store,
      write: (batch) => this.store.write({ ...batch, runId, fence: ownership.fence }),
      runId,
      tools: agent.tools,
      effects: params.effects,
      // Calls that stopped at ctx.interrupt may run again; an unknown outcome is not one of them.
      interruptedCalls: agent.pendingInterrupts.filter((i) => i.name !== OUTCOME_UNKNOWN).map((i) => i.toolUseId),
      responses: params.responses,
    })
    const session = new RunSession({ agent, runId, writer, journal, runtime, sync: this.#writer.durability === 'sync', emit, by })
    const before = { llm: runtime.llm_calls, tools: runtime.tool_calls }
    try {
      if (params.resumed) await this.#writeRun(ownership, runId, { status: 'running', metadata: { ...(params.metadata ?? (await this.#metadataOf(runId))), ...ownerMetadata() } })
      await session.runStarted({ resumed: params.resumed, owner: ownerMetadata(), ...(params.answers ? { answers: params.answers } : {}) })
      // The input is durable before the model is first asked (bounded like every final flush).
      if (!params.resumed) await writer.flush()
      if (params.finalAnswer) {
        const result = new AgentResult({ stopReason: 'end_turn', message: params.finalAnswer, metrics: newMetrics() })
        await this.#finish(session, writer, runtime, { state: 'completed', result, error: undefined })
        return { ...base(runId, threadId, { replayed: 0, llm: 0, tools: 0, commits: () => writer.commits, runtime }), state: 'completed', result }
      }
      if (params.repaired) await session.danglingToolUsesRepaired()
      const events = agent.streamManaged({
        start: params.start,
        message: params.message,
        resumed: params.resumed,
        observer: session,
        executor: (inner) => observedTools(journal.wrap(inner), { emit, runId, step: () => runtime.step, answerOf: (id) => journal.answerOf(id) }),
        idempotencyKey: (use) => journal.keyOf(use),
        usedCallIds: callIdsOf(runtime),
        ...(this.#timeHost(runId) ? { time: this.#timeHost(runId)! } : {}),
        options: { signal: params.signal ? AbortSignal.any([params.signal, ownership.signal]) : ownership.signal },
      })
      let next = await events.next()
      while (!next.done) {
        const delta = deltaOf(next.value, runId)
        if (delta) emit(delta)
        next = await events.next()
      }
      const result = next.value
      const counts = { replayed: journal.replayed, skipped: journal.skipped, llm: runtime.llm_calls - before.llm, tools: runtime.tool_calls - before.tools, commits: () => writer.commits, runtime }
      if (result.stopReason === 'interrupt') {
        writer.stageCompletions(journal.pendingCompletions.splice(0))
        await session.runPaused(result.interrupts as unknown as JsonValue)
        // The timer and waits first: a run stored sleeping or waiting always has them.
        await this.#recordWaits(runId, result.interrupts)
        const state = waitingStatusOf(result.interrupts)
        await writer.flush({ run: { status: state } })
        return { ...base(runId, threadId, counts), state, result, interrupts: result.interrupts }
      }
      const state = result.stopReason === 'cancelled' ? 'cancelled' : 'completed'
      await this.#finish(session, writer, runtime, { state, result, error: undefined })
      return { ...base(runId, threadId, counts), state, result }
    } catch (err) {
      return this.#fail(err, { session, writer, runtime, runId, threadId, replayed: journal.replayed, ownership })
    }
  }

  async #finish(session: RunSession, writer: CheckpointWriter, runtime: RuntimeSnapshot, outcome: { state: 'completed' | 'failed' | 'cancelled'; result: AgentResult | undefined; error: RunResult['error'] }) {
    const payload = terminalPayload({
      ...outcome,
      finalText: textOf(outcome.result?.message) || runtime.final_text,
      requestedModel: runtime.requested_model,
      providerAdapter: runtime.provider_adapter,
      usage: runtime.usage,
      totalCostUsd: runtime.total_cost_usd,
    })
    await session.runFinished(payload)
    await writer.flush({ run: { status: outcome.state } })
  }

  async #fail(
    err: unknown,
    ctx: { session: RunSession; writer: CheckpointWriter; runtime: RuntimeSnapshot; runId: string; threadId: string; replayed: number; ownership: RunOwnership },
  ): Promise<RunResult> {
    // Another execution took the run over: nothing of this one may be recorded, not even a failure.
    const lost = ctx.ownership.lost ?? leaseLostIn(err)
    if (lost) throw lost
    const error = describeError(err)
    // The store failed (a disk error, a dropped connection, a write that could not be flushed): the
    // run did not fail, its persistence did. Like a process that died, it stays resumable from
    // its last checkpoint; recording it `failed` through a store that is back a moment later
    // would end a run that any process could continue.
    if (isStoreOutage(err)) throw err
    const integrity = err instanceof StoreError || err instanceof CheckpointCorruptionError
    try {
      // Record the failure, so it is told apart from a process that died.
      await this.#finish(ctx.session, ctx.writer, ctx.runtime, { state: 'failed', result: undefined, error })
    } catch {
      if (!integrity) throw err
    }
    if (integrity) throw err
    return {
      ...base(ctx.runId, ctx.threadId, { replayed: ctx.replayed, llm: 0, tools: 0, commits: () => ctx.writer.commits, runtime: ctx.runtime }),
      state: 'failed',
      result: undefined,
      error,
    }
  }

  async #metadataOf(runId: string): Promise<JsonObject> {
    return (await this.store.getRun(runId))?.metadata ?? {}
  }
}

interface DriveParams {
  ownership: RunOwnership
  agent: Agent
  runId: string
  threadId: string
  runtime: RuntimeSnapshot
  start: LoopStart
  message: Message | undefined
  effects: readonly EffectRecord[]
  responses: Record<string, JsonValue>
  /** The answers given to a paused run's interrupts, as its `run_started` checkpoint records them. */
  answers?: JsonObject | undefined
  resumed: boolean
  /** The run's metadata as a resume read it (else it is read before the run is marked running). */
  metadata?: JsonObject
  signal: AbortSignal | undefined
  repaired?: boolean
  finalAnswer?: Message | undefined
}

function base(runId: string, threadId: string, counts: { replayed: number; skipped?: number; llm: number; tools: number; commits: () => number; runtime: RuntimeSnapshot }) {
  return {
    runId,
    threadId,
    interrupts: [],
    error: undefined,
    replayedEffectCount: counts.replayed,
    skippedEffectCount: counts.skipped ?? 0,
    llmCalls: counts.llm,
    toolCalls: counts.tools,
    commits: counts.commits(),
    fromTerminalCheckpoint: false,
    usage: { ...counts.runtime.usage },
    totalCostUsd: counts.runtime.total_cost_usd,
  }
}

/** The answers to pending interrupts as a resume records them: which interrupt, what, and who gave them. */
function answersOf(pending: readonly Interrupt[], responses: Record<string, JsonValue>, by: string | undefined): JsonObject | undefined {
  const given = pending.filter((interrupt) => Object.hasOwn(responses, interrupt.id))
  if (given.length === 0) return undefined
  const items = given.map((interrupt) => ({ interrupt_id: interrupt.id, name: interrupt.name, tool_call_id: interrupt.toolUseId, answer: responses[interrupt.id] ?? null }))
  return { by: by ?? null, items }
}

function pausedResult(runId: string, threadId: string, interrupts: RunResult['interrupts'], runtime: RuntimeSnapshot): RunResult {
  return { ...base(runId, threadId, { replayed: 0, llm: 0, tools: 0, commits: () => 0, runtime }), state: waitingStatusOf(interrupts), result: undefined, interrupts }
}

function leaseLostIn(err: unknown): LeaseLostError | undefined {
  for (let cause = err, depth = 0; cause instanceof Error && depth < 8; cause = cause.cause, depth++) {
    if (cause instanceof LeaseLostError) return cause
  }
  return undefined
}

function describeError(err: unknown): { name: string; message: string; code?: string } {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code
    return { name: err.name, message: err.message, ...(typeof code === 'string' ? { code } : {}) }
  }
  return { name: 'Error', message: String(err) }
}

/** The OpenTelemetry listener when `@opentelemetry/api` is installed, else undefined. */
async function tracing(): Promise<RunEventListener | undefined> {
  const api = await loadOpenTelemetry()
  return api ? runTracing(api) : undefined
}
