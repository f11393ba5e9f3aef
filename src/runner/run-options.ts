import type { JsonObject, JsonValue } from '../core/codec.js'
import type { ContentBlock } from '../model/messages.js'
import type { HeldLease, WaitForOwner } from './run-ownership.js'

/** How a second execution of a run that is already being executed behaves. */
export interface OwnershipOptions {
  /**
   * When another live process executes the run: `false` (default) throws `RunBusyError` at once
   * (naming the owner and when its lease expires); `true` waits until it finishes or its lease
   * lapses, then continues (a finished run returns its stored result); `{ timeoutMs }` waits at
   * most that long.
   */
  waitForOwner?: WaitForOwner
  /**
   * The run is already held under this lease (a worker's claim): writes carry its fence, and the
   * runner neither renews nor releases it. Set by the worker layer.
   */
  lease?: HeldLease
}

/** What `runner.stream` takes: a new run's options, or `{ resume: true, ...ResumeOptions }`. */
export type StreamOptions = (RunOptions & { resume?: false }) | (ResumeOptions & { resume: true })

/** What `runner.run` takes. */
export interface RunOptions extends OwnershipOptions {
  input: string | ContentBlock[]
  /** A stable id makes the run findable after a crash; a fresh one by default. */
  runId?: string
  threadId?: string
  /** Caller context kept in the runtime snapshot (JSON). */
  context?: JsonObject
  signal?: AbortSignal
  /** Set by subagent tools: the run this one is a child of. */
  parentRunId?: string
}

/** What `runner.resume` takes. */
export interface ResumeOptions extends OwnershipOptions {
  runId: string
  threadId?: string
  /** Answers to pending interrupts, by interrupt id. */
  responses?: Record<string, JsonValue>
  /**
   * Who gave `responses` (a person, a service), recorded with them in the run's timeline
   * (`cairn show`) beside the process that applied them and when.
   */
  answeredBy?: string
  /** Laid over the restored context. */
  context?: JsonObject
  signal?: AbortSignal
  allowConfigChange?: boolean
}
