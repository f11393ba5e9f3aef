import { applyChange, emptyRunState, InProcessEngine, type RunChange, type RunState } from '../../engine/in-process-engine.js'
import { LeaseTable, TableLeases } from '../../leases/lease-table.js'

/**
 * A {@link StorageEngine} in process memory. Rows hold only strings and numbers and are copied
 * on the way in and out, so nothing is shared by reference with callers. It has the lease
 * capability, so workers in one process can share a `MemoryStore` (in tests). Every change is
 * checked and applied without awaiting in between, so a fence check and the write after it are
 * never interleaved with a claim.
 */
export class MemoryEngine extends InProcessEngine {
  readonly #runs = new Map<string, RunState>()
  /** The run of each checkpoint id, checked against the run's state (a deleted checkpoint's entry stays). */
  readonly #runOf = new Map<string, RunState>()
  readonly #leases = new LeaseTable()
  readonly #keyChecks = new Map<string, string>()

  /** The lease protocol over this engine's rows (see {@link TableLeases}); its changes are synchronous. */
  readonly leases = new TableLeases({
    table: async () => this.#leases,
    row: (runId) => this.#runs.get(runId)?.row,
    change: (runId, fn) => {
      const state = this.#state(runId)
      return fn(state.row, async (row) => {
        if (row) await this.store(state, { r: row })
      })
    },
  })

  async deleteRun(runId: string): Promise<boolean> {
    const state = this.#runs.get(runId)
    if (!state?.row) return false
    this.#runs.delete(runId)
    this.#leases.delete(runId)
    for (const id of state.byId.keys()) this.#runOf.delete(id)
    return true
  }

  async getKeyCheck(keyId: string): Promise<string | undefined> {
    return this.#keyChecks.get(keyId)
  }

  async putKeyCheck(keyId: string, value: string): Promise<string> {
    if (!this.#keyChecks.has(keyId)) this.#keyChecks.set(keyId, value)
    return this.#keyChecks.get(keyId)!
  }

  async close(): Promise<void> {}

  protected async read(runId: string): Promise<RunState> {
    return this.#state(runId)
  }

  protected async allRuns(): Promise<RunState[]> {
    return [...this.#runs.values()]
  }

  protected async find(checkpointId: string): Promise<RunState | undefined> {
    return this.#find(checkpointId)
  }

  protected write<T>(runId: string, fn: (state: RunState) => Promise<T>): Promise<T> {
    return fn(this.#state(runId))
  }

  protected async claimIds<T>(checkpointIds: readonly string[], fn: () => Promise<T>): Promise<T | 'taken'> {
    return checkpointIds.some((id) => this.#find(id)) ? 'taken' : fn()
  }

  /** Applied at once, before the returned promise is awaited. */
  protected async store(state: RunState, change: RunChange): Promise<void> {
    this.#runs.set(state.runId, state)
    applyChange(state, change)
    for (const row of change.c ?? []) this.#runOf.set(row.id, state)
  }

  protected async storeWhole(): Promise<void> {}

  /** The run's state, or a new empty one (kept once something is stored in it). */
  #state(runId: string): RunState {
    return this.#runs.get(runId) ?? emptyRunState(runId)
  }

  #find(checkpointId: string): RunState | undefined {
    const state = this.#runOf.get(checkpointId)
    return state?.byId.has(checkpointId) && this.#runs.get(state.runId) === state ? state : undefined
  }
}
