import { InvalidArgumentError } from '../core/errors.js'
/**
 * Workflow state shared by every executor of a run, with super-step semantics: `set` and
 * `delete` are staged, visible to the executor's own reads at once, and committed when the
 * super step ends. Only committed state goes into a checkpoint.
 *
 * Values are kept by reference until the checkpoint encodes them: set a new value rather than
 * changing one you read.
 */
export interface WorkflowState {
  get<T = unknown>(key: string): T | undefined
  has(key: string): boolean
  set(key: string, value: unknown): void
  delete(key: string): void
  /** Every key, staged writes included. */
  keys(): string[]
}

/** One executor's staged writes in one super step. */
export class StagedWrites {
  readonly sets = new Map<string, unknown>()
  readonly deletes = new Set<string>()

  /** A copy of what is staged now, to go back to with {@link StagedWrites.restore}. */
  snapshot(): { sets: Map<string, unknown>; deletes: Set<string> } {
    return { sets: new Map(this.sets), deletes: new Set(this.deletes) }
  }

  /** Go back to a snapshot (a handler that stopped: what it staged is dropped). */
  restore(snapshot: { sets: ReadonlyMap<string, unknown>; deletes: ReadonlySet<string> }): void {
    this.sets.clear()
    this.deletes.clear()
    for (const [key, value] of snapshot.sets) this.sets.set(key, value)
    for (const key of snapshot.deletes) this.deletes.add(key)
  }
}

/** The committed state of a run. */
export class SharedState {
  readonly #committed: Map<string, unknown>

  constructor(initial: Record<string, unknown> = {}) {
    this.#committed = new Map(Object.entries(initial))
  }

  /** A view that reads committed state through `writes` and stages its changes there. */
  view(writes: StagedWrites): WorkflowState {
    const committed = this.#committed
    return {
      get<T>(key: string): T | undefined {
        if (writes.deletes.has(key)) return undefined
        return (writes.sets.has(key) ? writes.sets.get(key) : committed.get(key)) as T | undefined
      },
      has(key: string): boolean {
        return !writes.deletes.has(key) && (writes.sets.has(key) || committed.has(key))
      },
      set(key: string, value: unknown): void {
        assertKey(key)
        writes.deletes.delete(key)
        writes.sets.set(key, value)
      },
      delete(key: string): void {
        assertKey(key)
        writes.sets.delete(key)
        writes.deletes.add(key)
      },
      keys(): string[] {
        const keys = new Set([...committed.keys(), ...writes.sets.keys()])
        return [...keys].filter((key) => !writes.deletes.has(key))
      },
    }
  }

  /** Apply staged writes in order (executor order, so the outcome never depends on timing). */
  commit(all: readonly StagedWrites[]): void {
    for (const writes of all) {
      for (const key of writes.deletes) this.#committed.delete(key)
      for (const [key, value] of writes.sets) this.#committed.set(key, value)
    }
  }

  /** The committed state as a plain object, for a checkpoint. */
  toObject(): Record<string, unknown> {
    return Object.fromEntries(this.#committed)
  }

  /** The committed keys. */
  keys(): string[] {
    return [...this.#committed.keys()]
  }
}

function assertKey(key: unknown): void {
  if (typeof key !== 'string' || key === '') throw new InvalidArgumentError(`workflow state keys are non-empty strings, got ${JSON.stringify(key)}`)
}
