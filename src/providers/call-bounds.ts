import { CairnError } from '../core/errors.js'
import { limits } from '../core/limits.js'
import { ModelLimitError, type ModelCallOptions, type ModelLimit, type ModelStreamEvent } from '../model/model.js'

/**
 * The bounds of one model call, the same for every provider adapter. Nothing a provider does
 * (a stream that goes quiet after its headers, keep-alive bytes trickled forever, an answer that
 * never ends) can hold a run, and its lease, longer than these.
 */
export interface CallBoundsOptions {
  /**
   * Longest silence allowed once the response has begun: the time between two stream events that
   * carry content or protocol state. Keep-alive bytes (SSE comments, blank lines, `ping` events)
   * do not count as activity. Default 60 000 ms; raise it for a reasoning model that thinks for
   * minutes without streaming anything.
   */
  idleTimeoutMs?: number
  /** Longest a whole call may take: the request, the client's retries and the stream. Default 600 000 ms (10 min). */
  totalTimeoutMs?: number
  /**
   * Most characters of text, reasoning and tool-call input one response may stream, counted as
   * they arrive. Default 8 Mi characters, and never more than the `maxStringLength` limit (a
   * longer answer could not be checkpointed).
   */
  maxOutputChars?: number
}

/** The bounds a call has when its model sets none. */
export const DEFAULT_CALL_BOUNDS: Readonly<Required<CallBoundsOptions>> = Object.freeze({
  idleTimeoutMs: 60_000,
  totalTimeoutMs: 600_000,
  maxOutputChars: 8 * 1024 * 1024,
})

/** What the adapter's own streaming gets from {@link boundedStream}. */
export interface BoundedCall {
  /** Give this to the client: it aborts when the caller cancels or a bound is hit. */
  signal: AbortSignal
  /**
   * Start timing silence, or start again from now: call it when the response has begun (its
   * headers arrived) and at each protocol event the client parsed (keep-alive bytes never reach
   * the adapter as events). For a client that sends its request and waits for the first event in
   * one step, call it when the request is sent. Each event the adapter yields restarts it too.
   */
  startIdleTimer(): void
  /** Stop timing silence while the adapter itself waits (a retry's backoff). */
  stopIdleTimer(): void
}

/** What {@link boundedStream} takes. */
export interface BoundedStreamParams {
  /** `openai`, `anthropic`, `ai-sdk:<provider>`: for the error. */
  provider: string
  model: string
  bounds: CallBoundsOptions
  options: ModelCallOptions
  /** The adapter's stream: it must pass `call.signal` to its client. */
  stream: (call: BoundedCall) => AsyncIterable<ModelStreamEvent>
}

/**
 * Check a model's bounds when it is built: each must be a positive, finite number. A bad value
 * is a `CairnError` with code `invalid_argument`.
 */
export function checkCallBounds(bounds: CallBoundsOptions, modelName: string): void {
  for (const key of ['idleTimeoutMs', 'totalTimeoutMs', 'maxOutputChars'] as const) {
    const value = bounds[key]
    if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value) || value <= 0)) {
      throw new CairnError('invalid_argument', `${modelName}: ${key} must be a positive, finite number, got ${String(value)}`)
    }
  }
}

/**
 * Run an adapter's stream within the call's bounds: a total deadline from the start, an idle
 * timeout between events once the response has begun, and a cap on the characters streamed.
 * When one is hit, the request is aborted (the client's signal fires, so the connection is
 * closed) and the call ends with a retryable {@link ModelLimitError} naming the bound and the
 * option that sets it (the output cap's error is not retryable). The wait is raced, so a client
 * that does not notice the abort cannot hold the call either.
 */
export async function* boundedStream(params: BoundedStreamParams): AsyncGenerator<ModelStreamEvent> {
  const guard = new CallGuard(params)
  const inner = params.stream(guard.call)[Symbol.asyncIterator]()
  let clean = false
  try {
    for (;;) {
      const next = await guard.race(inner.next())
      if (next.done) {
        clean = true
        return
      }
      guard.count(next.value)
      guard.pauseIdle()
      yield next.value
      guard.resume()
    }
  } catch (err) {
    throw guard.tripped ?? err
  } finally {
    guard.dispose()
    if (!clean) {
      // Stopped early (a bound, an error, or the caller stopped reading): close the request.
      guard.abort()
      void Promise.resolve(inner.return?.()).catch(() => {})
    }
  }
}

/** One call's timers, abort controller and output count. */
class CallGuard {
  readonly call: BoundedCall
  tripped: ModelLimitError | undefined
  readonly #params: BoundedStreamParams
  readonly #controller = new AbortController()
  readonly #idleMs: number
  readonly #maxChars: number
  readonly #total: NodeJS.Timeout
  #idle: NodeJS.Timeout | undefined
  #opened = false
  #chars = 0
  #wake: ((err: unknown) => void) | undefined
  readonly #onCallerAbort = () => this.#wake?.(this.#params.options.signal?.reason)

  constructor(params: BoundedStreamParams) {
    this.#params = params
    const bounds = params.bounds
    this.#idleMs = bounds.idleTimeoutMs ?? DEFAULT_CALL_BOUNDS.idleTimeoutMs
    this.#maxChars = Math.min(bounds.maxOutputChars ?? DEFAULT_CALL_BOUNDS.maxOutputChars, limits().maxStringLength)
    const totalMs = bounds.totalTimeoutMs ?? DEFAULT_CALL_BOUNDS.totalTimeoutMs
    this.#total = setTimeout(() => this.#trip('totalTimeoutMs', `the call took longer than ${totalMs} ms in all`), totalMs)
    const callerSignal = params.options.signal
    // A cancel ends the wait at once, even with a client that does not notice it.
    callerSignal?.addEventListener('abort', this.#onCallerAbort, { once: true })
    this.call = {
      signal: callerSignal ? AbortSignal.any([callerSignal, this.#controller.signal]) : this.#controller.signal,
      startIdleTimer: () => {
        this.#opened = true
        this.resume()
      },
      stopIdleTimer: () => {
        this.#opened = false
        this.pauseIdle()
      },
    }
  }

  /** `step`, or the bound's error as soon as one is hit. */
  race<T>(step: Promise<T>): Promise<T> {
    if (this.tripped) return Promise.reject(this.tripped)
    const callerSignal = this.#params.options.signal
    if (callerSignal?.aborted) return Promise.reject(callerSignal.reason as Error)
    return new Promise<T>((resolve, reject) => {
      this.#wake = reject
      step.then(resolve, reject)
    }).finally(() => {
      this.#wake = undefined
    })
  }

  /** Count an event's characters against the output cap. */
  count(event: ModelStreamEvent): void {
    this.#opened = true
    this.#chars += charsOf(event)
    if (this.#chars > this.#maxChars) {
      throw this.#trip('maxOutputChars', `the response streamed more than ${this.#maxChars} characters of text, reasoning and tool input`)
    }
  }

  /** The consumer holds the event: its time is not the provider's silence. */
  pauseIdle(): void {
    clearTimeout(this.#idle)
  }

  /** Start timing silence again. */
  resume(): void {
    if (this.tripped) throw this.tripped
    clearTimeout(this.#idle)
    if (this.#opened) this.#idle = setTimeout(() => this.#trip('idleTimeoutMs', `the stream sent nothing for ${this.#idleMs} ms`), this.#idleMs)
  }

  abort(): void {
    if (this.#controller.signal.aborted) return
    if (this.tripped) this.#controller.abort(this.tripped)
    else this.#controller.abort()
  }

  dispose(): void {
    clearTimeout(this.#total)
    clearTimeout(this.#idle)
    this.#params.options.signal?.removeEventListener('abort', this.#onCallerAbort)
  }

  #trip(limit: ModelLimit, what: string): ModelLimitError {
    if (this.tripped) return this.tripped
    const retryable = limit !== 'maxOutputChars'
    const fix = limit === 'maxOutputChars' ? 'raise maxOutputChars on the model, or ask for a shorter answer' : `raise ${limit} on the model if the provider is merely slow`
    this.tripped = new ModelLimitError(`${what}; the request was aborted (bound ${limit}: ${fix})`, { provider: this.#params.provider, model: this.#params.model, limit, retryable })
    this.dispose()
    this.abort()
    this.#wake?.(this.tripped)
    return this.tripped
  }
}

/** The characters an event adds to the answer. */
function charsOf(event: ModelStreamEvent): number {
  switch (event.type) {
    case 'textDelta':
      return event.text.length
    case 'reasoningDelta':
      return (event.text?.length ?? 0) + (event.signature?.length ?? 0) + (event.redactedContent?.length ?? 0)
    case 'toolUseInputDelta':
      return event.delta.length
    default:
      return 0
  }
}
