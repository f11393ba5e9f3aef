import type { RunRow } from '../engine/rows.js'
import type { ListCache } from './payload-lists.js'

/** What a writer remembers of a run between saves: its seq, newest checkpoint and list refs. */
export interface WriterState {
  lastSeq: number
  lastId: string | null
  lists: ListCache
  /**
   * The run row as this store last read or wrote it: what a change of the run's fields is
   * computed from (a compare-and-set on its digest: a row changed since is read again).
   */
  run?: RunRow | undefined
}

/** How many runs a store remembers where their writes left off. */
const KEPT_RUNS = 1024

/**
 * Where the latest writes of recent runs left off, for the next save of each to extend its lists
 * without reading the store. It holds refs and the caller's own frozen values, never a copy of a
 * list's items: a run that falls out, or ends, is read back from its newest row's refs (one
 * read, no list) on its next save.
 */
export class WriterStates {
  readonly #states = new Map<string, WriterState>()

  get(runId: string): WriterState | undefined {
    return this.#states.get(runId)
  }

  /** Keep the run's state after a commit; a run whose newest record is terminal is forgotten. */
  set(runId: string, state: WriterState, terminal: boolean): void {
    this.#states.delete(runId)
    if (terminal) return
    this.#states.set(runId, state)
    if (this.#states.size > KEPT_RUNS) this.#states.delete(this.#states.keys().next().value!)
  }

  delete(runId: string): void {
    this.#states.delete(runId)
  }
}
