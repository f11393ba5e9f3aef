import type { ListCache } from './payload-lists.js'

/** What a writer remembers of a run between saves. */
export interface WriterState {
  lastSeq: number
  lastId: string | null
  lists: ListCache
}

/**
 * Least-recently-used writer state per run, bounded by the bytes of the list items it holds.
 * A run that falls out is re-read from the store on its next save.
 */
export class ListCacheLru {
  readonly #maxBytes: number
  readonly #entries = new Map<string, { state: WriterState; bytes: number }>()
  #bytes = 0

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes
  }

  get(runId: string): WriterState | undefined {
    const entry = this.#entries.get(runId)
    if (!entry) return undefined
    this.#entries.delete(runId)
    this.#entries.set(runId, entry)
    return entry.state
  }

  set(runId: string, state: WriterState): void {
    this.delete(runId)
    let bytes = 0
    for (const list of state.lists.values()) bytes += list.bytes
    this.#entries.set(runId, { state, bytes })
    this.#bytes += bytes
    for (const [key, entry] of this.#entries) {
      if (this.#bytes <= this.#maxBytes || key === runId) break
      this.#entries.delete(key)
      this.#bytes -= entry.bytes
    }
  }

  delete(runId: string): void {
    const entry = this.#entries.get(runId)
    if (!entry) return
    this.#entries.delete(runId)
    this.#bytes -= entry.bytes
  }
}
