/**
 * Events pushed by executors running concurrently, pulled by the run's generator, so a super
 * step's events stream while it runs.
 */
export class EventChannel<T> {
  #items: T[] = []
  #wake: (() => void) | undefined

  push(item: T): void {
    this.#items.push(item)
    const wake = this.#wake
    this.#wake = undefined
    wake?.()
  }

  /** Take everything pushed so far. */
  drain(): T[] {
    const items = this.#items
    this.#items = []
    return items
  }

  get size(): number {
    return this.#items.length
  }

  /** Resolves at the next push (at once if something is waiting). */
  next(): Promise<void> {
    if (this.#items.length > 0) return Promise.resolve()
    return new Promise((resolve) => {
      const previous = this.#wake
      this.#wake = () => {
        previous?.()
        resolve()
      }
    })
  }
}

/**
 * Yield the channel's events while `work` runs, and those left when it settles. If the consumer
 * stops early, `onAbandon` runs and the work is awaited, so nothing keeps running unseen.
 */
export async function* pump<T>(channel: EventChannel<T>, work: Promise<unknown>, onAbandon: () => void): AsyncGenerator<T> {
  let finished = false
  const settled = work.then(
    () => {
      finished = true
    },
    () => {
      finished = true
    },
  )
  try {
    for (;;) {
      for (const item of channel.drain()) yield item
      if (channel.size > 0) continue
      if (finished) return
      await Promise.race([channel.next(), settled])
    }
  } finally {
    if (!finished) {
      onAbandon()
      await settled
    }
  }
}
