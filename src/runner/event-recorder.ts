import type { JsonObject } from '../core/codec.js'
import { InvalidArgumentError } from '../core/errors.js'
import type { RunEvent } from '../observe/run-events.js'
import type { RunEventLog } from '../store/event-log/run-event-log.js'

/** How a runner keeps each run's events in the store's event log (see `runner.events`). */
export interface EventLogOptions {
  /**
   * A run's log stops keeping text and reasoning deltas past this many bytes (an
   * `events_truncated` marker says where), and drops tool inputs and outputs from later events;
   * everything else is kept. Default 8 MiB.
   */
  maxBytes?: number
  /** The longest a streamed delta waits in memory before it is appended. Default 50 ms. */
  flushMs?: number
  /**
   * A tool call's input or output larger than this (as JSON) is left out of its event in the log:
   * the effect journal holds it, and a reader needs the call, not a copy of a large result.
   * Default 64 KiB.
   */
  maxToolPayloadBytes?: number
}

const DEFAULT_MAX_BYTES = 8 * 1024 * 1024
const DEFAULT_FLUSH_MS = 50
const DEFAULT_MAX_TOOL_PAYLOAD_BYTES = 64 * 1024
const SCAN_PAGE = 1000

/**
 * Appends one drive's events to the run's log. Deltas are joined (consecutive ones of a kind and
 * step become one event) and wait at most `flushMs`; any other event is a boundary, appended with
 * everything before it on the next turn of the event loop: as soon as the run waits for anything
 * (a model's reply, a tool's I/O, its own checkpoint write), so the boundaries a step crosses in
 * one go (a model call finished, its checkpoint staged, its tool started) share one commit
 * instead of taking one each. One append is in flight at a time, and what arrives meanwhile goes
 * in the next, so a run commits at most once per turn of the event loop and once per `flushMs`,
 * never once per token.
 */
export class EventRecorder {
  readonly #log: RunEventLog
  readonly #runId: string
  readonly #maxBytes: number
  readonly #maxToolPayloadBytes: number
  readonly #flushMs: number
  #bytes: number
  #truncated: boolean
  #pending: RunEvent[] = []
  #timer: NodeJS.Timeout | undefined
  #immediate: NodeJS.Immediate | undefined
  /** When the oldest event waiting was recorded (`performance.now()`). */
  #oldest = 0
  #inFlight: Promise<void> | undefined
  #failed: Error | undefined
  /** Appends made (one commit each). */
  commits = 0

  private constructor(params: { log: RunEventLog; runId: string; options: EventLogOptions; bytes: number; truncated: boolean }) {
    this.#log = params.log
    this.#runId = params.runId
    this.#maxBytes = params.options.maxBytes ?? DEFAULT_MAX_BYTES
    this.#maxToolPayloadBytes = params.options.maxToolPayloadBytes ?? DEFAULT_MAX_TOOL_PAYLOAD_BYTES
    this.#flushMs = params.options.flushMs ?? DEFAULT_FLUSH_MS
    this.#bytes = params.bytes
    this.#truncated = params.truncated
  }

  /**
   * A recorder for a drive of `runId`, after reading what the run's log holds already: its
   * size, and the step of a model call a crash cut off (started, never finished nor voided),
   * which the drive marks void before anything else.
   */
  static async open(log: RunEventLog, runId: string, options: EventLogOptions = {}): Promise<{ recorder: EventRecorder; cutOffStep: number | undefined }> {
    for (const [name, value] of [['maxBytes', options.maxBytes], ['flushMs', options.flushMs], ['maxToolPayloadBytes', options.maxToolPayloadBytes]] as const) {
      if (value !== undefined && !(Number.isFinite(value) && value >= 0)) throw new InvalidArgumentError(`eventLog.${name} must be a non-negative number, got ${String(value)}`)
    }
    let bytes = 0
    let truncated = false
    let cutOffStep: number | undefined
    let after: string | undefined
    for (;;) {
      const page = await log.read(runId, { after, limit: SCAN_PAGE })
      for (const { cursor, event } of page) {
        after = cursor
        bytes += JSON.stringify(event).length + 1
        if (event.type === 'model_call_started') cutOffStep = typeof event.step === 'number' ? event.step : 0
        else if (event.type === 'model_call_finished' || event.type === 'model_call_voided') cutOffStep = undefined
        else if (event.type === 'events_truncated') truncated = true
      }
      if (page.length < SCAN_PAGE) break
    }
    return { recorder: new EventRecorder({ log, runId, options, bytes, truncated }), cutOffStep }
  }

  /** Take one event of the drive. */
  record(event: RunEvent): void {
    if (this.#failed !== undefined) return
    if (this.#pending.length === 0) this.#oldest = performance.now()
    if (event.type === 'text_delta' || event.type === 'reasoning_delta') {
      const last = this.#pending[this.#pending.length - 1]
      if (last && last.type === event.type && last.step === event.step) this.#pending[this.#pending.length - 1] = { ...last, text: last.text + event.text }
      else this.#pending.push(event)
      this.#timer ??= setTimeout(() => this.#flush(), this.#flushMs)
    } else {
      this.#pending.push(event)
      this.#immediate ??= setImmediate(() => this.#flush())
    }
    // A loop that never waits (its timers and turns never come) still appends every `flushMs`.
    if (performance.now() - this.#oldest >= this.#flushMs) this.#flush()
  }

  /** Append everything recorded; rejects with the first append that failed. */
  async close(): Promise<void> {
    // What arrives during an append goes in the next, not on a later turn: close waits for all.
    for (this.#flush(); this.#inFlight; this.#flush()) await this.#inFlight
    if (this.#failed !== undefined) throw this.#failed
  }

  #flush(): void {
    clearTimeout(this.#timer)
    this.#timer = undefined
    clearImmediate(this.#immediate)
    this.#immediate = undefined
    if (this.#inFlight || this.#pending.length === 0 || this.#failed !== undefined) return
    const { events, texts } = this.#fit(this.#pending.splice(0))
    this.#inFlight = this.#log.append(this.#runId, events, texts).then(
      () => {
        this.commits++
        this.#inFlight = undefined
        // What arrived during the append: boundaries go next, deltas when their timer fires.
        if (this.#pending.some((event) => event.type !== 'text_delta' && event.type !== 'reasoning_delta')) this.#immediate ??= setImmediate(() => this.#flush())
        else if (this.#pending.length > 0) this.#timer ??= setTimeout(() => this.#flush(), this.#flushMs)
      },
      (err: unknown) => {
        this.#failed = err instanceof Error ? err : new Error(String(err))
        this.#inFlight = undefined
        this.#pending = []
      },
    )
  }

  /**
   * The batch as stored, with each event's JSON text (measured here, and stored as it is): within
   * the size cap, past it without deltas (a marker first) and tool payloads.
   */
  #fit(batch: RunEvent[]): { events: JsonObject[]; texts: string[] } {
    const events: JsonObject[] = []
    const texts: string[] = []
    const keep = (event: JsonObject, text = JSON.stringify(event)) => {
      events.push(event)
      texts.push(text)
      this.#bytes += text.length + 1
    }
    for (const event of batch) {
      let stored = event as unknown as JsonObject
      let text = JSON.stringify(stored)
      // An input or output is never longer than its event: only a long event needs the payload cap.
      if (text.length + 1 > this.#maxToolPayloadBytes) {
        stored = this.#withinPayloadCap(stored)
        if (stored !== (event as unknown as JsonObject)) text = JSON.stringify(stored)
      }
      if (this.#bytes + text.length + 1 > this.#maxBytes || this.#truncated) {
        if (!this.#truncated) {
          this.#truncated = true
          keep({ type: 'events_truncated', runId: this.#runId, step: 'step' in event ? event.step : 0, maxBytes: this.#maxBytes })
        }
        if (event.type === 'text_delta' || event.type === 'reasoning_delta') continue
        const { input: _input, output: _output, ...rest } = stored
        stored = rest
        text = JSON.stringify(stored)
      }
      keep(stored, text)
    }
    return { events, texts }
  }

  /** The event without a tool input or output larger than `maxToolPayloadBytes`. */
  #withinPayloadCap(event: JsonObject): JsonObject {
    const large = (value: unknown) => value !== undefined && JSON.stringify(value).length > this.#maxToolPayloadBytes
    if (!large(event.input) && !large(event.output)) return event
    const { input, output, ...rest } = event
    return { ...rest, ...(input === undefined || large(input) ? {} : { input }), ...(output === undefined || large(output) ? {} : { output }) }
  }
}
