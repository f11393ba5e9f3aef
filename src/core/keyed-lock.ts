/**
 * Work serialized per key within one process: a call runs after every earlier call with the same
 * key has settled (fulfilled or not), and keys no call waits on are forgotten.
 */
export class KeyedLock {
  readonly #tails = new Map<string, Promise<void>>()

  /** Run `fn` after every earlier call for `key` has settled. */
  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const next = (this.#tails.get(key) ?? Promise.resolve()).then(fn, fn)
    const settled = next.then(
      () => undefined,
      () => undefined,
    )
    this.#tails.set(key, settled)
    try {
      return await next
    } finally {
      if (this.#tails.get(key) === settled) this.#tails.delete(key)
    }
  }

  /** Whether a call for `key` is running or waiting. */
  has(key: string): boolean {
    return this.#tails.has(key)
  }

  /** How many keys have a call running or waiting. */
  get size(): number {
    return this.#tails.size
  }

  /** Resolves (never rejects) once every call running or waiting now has settled. */
  async idle(): Promise<void> {
    await Promise.all(this.#tails.values())
  }
}
