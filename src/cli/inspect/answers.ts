import { userInfo } from 'node:os'
import { CairnError, CairnClient, RunNotPausedError, Runner, runtimeOf, toolUsesOf, type CheckpointStore, type JsonObject, type JsonValue, type Message, type RunRecord } from '../../index.js'
import { recordAnswers, type AnswerRecord } from '../run-answers.js'
import type { AgentFactories } from '../write-commands.js'

/** One question a paused run asks: an interrupt, with the tool call that raised it. */
export interface Question {
  interruptId: string
  name: string
  reason: JsonValue | null
  toolUseId: string
  /** The tool that asked, and its input (when the run's snapshot holds the call). */
  tool: string | null
  input: JsonValue | null
  /** Answers to pick from, when the interrupt names them (`retry`/`skip` for an unknown outcome). */
  choices: JsonValue[]
}

/** What the inspector shows of a paused run: its questions, and the answers given so far. */
export interface PausedView {
  questions: Question[]
  answers: AnswerRecord[]
}

/** The questions of a run paused on interrupts (none for any other run). */
export async function questionsOf(store: CheckpointStore, run: RunRecord): Promise<Question[]> {
  if (run.status !== 'paused') return []
  const latest = await store.getLatest<Record<string, unknown>>({ runId: run.runId })
  if (!latest || latest.phase !== 'run_paused' || !Array.isArray(latest.payload.interrupts)) return []
  const runtime = runtimeOf(latest)
  const calls = new Map(callsOf(runtime?.pending_llm_response ?? runtime?.messages.findLast((m) => m.role === 'assistant')).map((use) => [use.toolUseId, use]))
  return (latest.payload.interrupts as JsonObject[]).map((interrupt) => {
    const toolUseId = text(interrupt.toolUseId)
    const call = calls.get(toolUseId)
    const reason = interrupt.reason ?? null
    return {
      interruptId: text(interrupt.id),
      name: text(interrupt.name),
      reason,
      toolUseId,
      tool: call?.name ?? null,
      input: (call?.input ?? null),
      choices: choicesOf(text(interrupt.name), reason),
    }
  })
}

/** What a person sends from the page. */
export interface AnswerRequest {
  responses: Record<string, JsonValue>
  /** Who answers: the name typed on the page, else the inspector's OS user. */
  by: string
}

/**
 * Answers a paused run from the inspector the way `cairn resume --response` does: the answers
 * (who and when included) go on the run first; then a run enqueued for workers is handed back
 * to them with the answers (`CairnClient.respond`), and any other run is resumed here with the
 * agent of the `--agents` module. One answer per run at a time: a second one while the first
 * resumes is refused.
 */
export class Answering {
  readonly #store: CheckpointStore
  readonly #agents: AgentFactories | undefined
  readonly #running = new Map<string, Promise<void>>()
  readonly #stop = new AbortController()
  readonly #onError: (err: unknown, runId: string) => void

  constructor(params: { store: CheckpointStore; agents?: AgentFactories | undefined; onError: (err: unknown, runId: string) => void }) {
    this.#store = params.store
    this.#agents = params.agents
    this.#onError = params.onError
  }

  /** Check the answers, record them with the run and set the run going again; returns how. */
  async answer(runId: string, request: AnswerRequest): Promise<{ via: 'worker' | 'inspector' }> {
    if (this.#running.has(runId)) throw new RunNotPausedError({ runId, status: 'running', message: `run ${runId} is being resumed with an earlier answer; wait for it to settle` })
    const run = await this.#store.getRun(runId)
    if (!run) throw new CairnError('run_not_found', `run ${runId} is not in this store; pick one from the list of runs`)
    const questions = await questionsOf(this.#store, run)
    if (questions.length === 0) throw new RunNotPausedError({ runId, status: run.status, message: `run ${runId} is ${run.status}, not paused on a question: nothing to answer (reload the page)` })
    const unknown = Object.keys(request.responses).filter((id) => !questions.some((q) => q.interruptId === id))
    if (unknown.length > 0 || Object.keys(request.responses).length === 0) {
      throw new CairnError('invalid_argument', `answer the questions of run ${runId} by interrupt id (${questions.map((q) => q.interruptId).join(', ')})${unknown.length ? `; it does not ask ${unknown.join(', ')}` : ''}`)
    }
    const worker = isWorkerJob(run)
    const factory = run.name === null ? undefined : this.#agents?.[run.name]
    if (!worker && !factory) {
      throw new RunNotPausedError({
        runId,
        status: run.status,
        message: this.#agents
          ? `run ${runId} is an agent named ${JSON.stringify(run.name)}, which the --agents module does not export; nothing was recorded`
          : `run ${runId} was started by a Runner, not enqueued for workers: start the inspector with --agents ./agents.js to resume it from here, or answer with \`cairn resume ${runId} --agents ./agents.js --response ID=JSON\`; nothing was recorded`,
      })
    }
    await recordAnswers(this.#store, runId, { responses: request.responses, by: request.by, via: 'inspector' })
    if (worker) {
      await new CairnClient({ store: this.#store as ConstructorParameters<typeof CairnClient>[0]['store'] }).respond(runId, request.responses)
      return { via: 'worker' }
    }
    const resuming = this.#resume(runId, factory!, request.responses)
    this.#running.set(runId, resuming)
    void resuming.finally(() => this.#running.delete(runId))
    return { via: 'inspector' }
  }

  /** Stop the resumes under way (they stop at their next boundary) and wait for them. */
  async close(): Promise<void> {
    this.#stop.abort()
    await Promise.allSettled([...this.#running.values()])
  }

  async #resume(runId: string, factory: AgentFactories[string], responses: Record<string, JsonValue>): Promise<void> {
    try {
      await new Runner({ store: this.#store }).resume(await factory(), { runId, responses, signal: this.#stop.signal })
    } catch (err) {
      this.#onError(err, runId)
    }
  }
}

/** The inspector's OS user: who answers when the page gives no name. */
export function osUser(): string {
  try {
    return userInfo().username
  } catch {
    return 'unknown'
  }
}

/** A run enqueued for workers: the worker layer keeps its job under the run metadata's `cairn` key. */
function isWorkerJob(run: RunRecord): boolean {
  const job = run.metadata.cairn
  return typeof job === 'object' && job !== null && !Array.isArray(job) && typeof job.name === 'string'
}

function callsOf(message: Message | null | undefined): ReturnType<typeof toolUsesOf> {
  return message ? toolUsesOf(message) : []
}

function text(value: JsonValue | undefined): string {
  return typeof value === 'string' ? value : ''
}

function choicesOf(name: string, reason: JsonValue): JsonValue[] {
  // The interrupt a non-idempotent call without a recorded outcome raises takes these two answers.
  if (name === 'effect_outcome_unknown') return ['retry', 'skip']
  if (typeof reason !== 'object' || reason === null || Array.isArray(reason)) return []
  const listed = reason.choices ?? reason.options
  return Array.isArray(listed) ? listed.filter((choice) => choice === null || typeof choice !== 'object') : []
}
