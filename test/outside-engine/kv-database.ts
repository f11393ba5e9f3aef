import { LeaseTable } from 'cairn-agents/engine'

/**
 * The "database" under the outside engine: a key-value map of JSON texts, plus the lease table
 * of its enqueued runs. Engines opened on one location share one of these, as connections to one
 * server would. Everything an engine does to it is synchronous, so each step is atomic.
 */
export class KvDatabase {
  readonly #data = new Map<string, string>()
  readonly leases = new LeaseTable()

  get<T>(key: string): T | undefined {
    const text = this.#data.get(key)
    return text === undefined ? undefined : (JSON.parse(text) as T)
  }

  set(key: string, value: unknown): void {
    this.#data.set(key, JSON.stringify(value))
  }

  delete(key: string): boolean {
    return this.#data.delete(key)
  }

  /** Every value whose key starts with `prefix`. */
  scan<T>(prefix: string): [string, T][] {
    const found: [string, T][] = []
    for (const [key, text] of this.#data) if (key.startsWith(prefix)) found.push([key, JSON.parse(text) as T])
    return found
  }
}

const databases = new Map<string, KvDatabase>()

/** The database kept at `location` (created on first use). */
export function databaseAt(location: string): KvDatabase {
  let database = databases.get(location)
  if (!database) databases.set(location, (database = new KvDatabase()))
  return database
}

/** Keys: one namespace per kind of row; ids never contain the separator. */
export const key = {
  run: (runId: string) => `run\u0000${runId}`,
  checkpoint: (id: string) => `cp\u0000${id}`,
  history: (runId: string) => `history\u0000${runId}`,
  list: (runId: string, listId: string) => `list\u0000${runId}\u0000${listId}`,
  lists: (runId: string) => `list\u0000${runId}\u0000`,
  effect: (runId: string, callId: string) => `fx\u0000${runId}\u0000${callId}`,
  effects: (runId: string) => `fx\u0000${runId}\u0000`,
}
