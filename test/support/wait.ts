/**
 * Waiting in tests: on a condition (in-process state or store state), never on a fixed delay.
 * Each poll is short; the deadline is generous so a loaded machine only makes a test slower.
 */

/** Poll `condition` until it holds; throw after `timeoutMs`, naming what was awaited. */
export async function waitFor(condition: () => boolean | Promise<boolean>, what = 'the condition', timeoutMs = 20_000, pollMs = 5): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(pollMs)
  }
}

/** Poll `probe` until it returns a value (not `undefined`), and return it. */
export async function until<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(10)
  }
}

/** A promise that resolves after `ms` (for pacing a loop, never to wait for something to happen). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** A gate a callback waits at until the test opens it; `reached` tells whether anything arrived. */
export interface Gate {
  wait(): Promise<void>
  open(): void
  reached(): boolean
}

export function gate(): Gate {
  let open: () => void = () => {}
  let reached = false
  const opened = new Promise<void>((resolve) => (open = resolve))
  return {
    wait: () => {
      reached = true
      return opened
    },
    open: () => open(),
    reached: () => reached,
  }
}
