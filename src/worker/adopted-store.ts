import type { CheckpointStore, CreateRunInput, RunRecord } from '../store/checkpoint-store.js'
import { DelegatingStore } from '../store/delegating-store.js'

/**
 * The store a worker gives `runner.run` for a run that was enqueued: the run row already exists
 * (status `queued`), but the runner starts a run by creating it. Until the runner does, this
 * store reports the run as absent; the runner's `createRun` then becomes an update of the queued
 * row (keeping its metadata, which holds the job). Everything else goes to `inner`.
 */
export class AdoptedRunStore extends DelegatingStore {
  readonly #run: RunRecord
  #adopted = false

  constructor(inner: CheckpointStore, run: RunRecord) {
    super(inner)
    this.#run = run
  }

  override async getRun(runId: string): Promise<RunRecord | undefined> {
    if (runId === this.#run.runId && !this.#adopted) return undefined
    return this.inner.getRun(runId)
  }

  override async createRun(input: CreateRunInput = {}): Promise<RunRecord> {
    if (input.runId !== this.#run.runId || this.#adopted) return this.inner.createRun(input)
    const { runId: _runId, metadata, ...fields } = input
    const run = await this.inner.updateRun(this.#run.runId, {
      ...fields,
      status: input.status ?? 'running',
      metadata: { ...this.#run.metadata, ...(metadata ?? {}) },
    })
    this.#adopted = true
    return run
  }
}
