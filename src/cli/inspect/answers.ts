import { CairnError, CairnClient, RunNotPausedError, Runner, type CheckpointStore, type JsonValue, type RunRecord } from '../../index.js'
import { CliError } from '../cli-error.js'
import { questionsOf, recordAnswers } from '../run-answers.js'
import type { AgentFactories } from '../write-commands.js'

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
  /** Runs whose answer is being checked and recorded. */
  readonly #checking = new Set<string>()
  readonly #stop = new AbortController()
  readonly #onError: (err: unknown, runId: string) => void

  constructor(params: { store: CheckpointStore; agents?: AgentFactories | undefined; onError: (err: unknown, runId: string) => void }) {
    this.#store = params.store
    this.#agents = params.agents
    this.#onError = params.onError
  }

  /** Check the answers, record them with the run and set the run going again; returns how. */
  async answer(runId: string, request: AnswerRequest): Promise<{ via: 'worker' | 'inspector' }> {
    if (this.#running.has(runId) || this.#checking.has(runId)) throw new RunNotPausedError({ runId, status: 'running', message: `run ${runId} is being answered already; wait for it to settle` })
    this.#checking.add(runId)
    try {
      return await this.#answer(runId, request)
    } finally {
      this.#checking.delete(runId)
    }
  }

  async #answer(runId: string, request: AnswerRequest): Promise<{ via: 'worker' | 'inspector' }> {
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
      throw new CliError(
        this.#agents
          ? `run ${runId} is an agent named ${JSON.stringify(run.name)}, which the --agents module does not export; nothing was recorded`
          : `run ${runId} was started by a Runner, not enqueued for workers: start the inspector with --agents ./agents.js to resume it from here, or answer with \`cairn resume ${runId} --agents ./agents.js --response ID=JSON\`; nothing was recorded`,
      )
    }
    await recordAnswers(this.#store, runId, { responses: request.responses, by: request.by, via: 'inspector' })
    if (worker) {
      await new CairnClient({ store: this.#store as ConstructorParameters<typeof CairnClient>[0]['store'] }).respond(runId, request.responses, { answeredBy: `${request.by} (inspector)` })
      return { via: 'worker' }
    }
    const resuming = this.#resume(runId, factory!, request)
    this.#running.set(runId, resuming)
    void resuming.finally(() => this.#running.delete(runId))
    return { via: 'inspector' }
  }

  /** Stop the resumes under way (they stop at their next boundary) and wait for them. */
  async close(): Promise<void> {
    this.#stop.abort()
    await Promise.allSettled([...this.#running.values()])
  }

  async #resume(runId: string, factory: AgentFactories[string], request: AnswerRequest): Promise<void> {
    try {
      // Who answered goes into the run's timeline as well, as `cairn resume` records it.
      const answeredBy = `${request.by} (inspector)`
      await new Runner({ store: this.#store }).resume(await factory(), { runId, responses: request.responses, answeredBy, signal: this.#stop.signal })
    } catch (err) {
      this.#onError(err, runId)
    }
  }
}


/** A run enqueued for workers: the worker layer keeps its job under the run metadata's `cairn` key. */
function isWorkerJob(run: RunRecord): boolean {
  const job = run.metadata.cairn
  return typeof job === 'object' && job !== null && !Array.isArray(job) && typeof job.name === 'string'
}
