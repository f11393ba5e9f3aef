import type { JsonValue } from '../core/codec.js'

/** Token counts of one model call. */
export interface RunEventUsage {
  inputTokens: number
  outputTokens: number
  totalTokens: number
}

/**
 * What a `Runner` reports while it drives a run, through `onEvent` and `runner.stream()`: for
 * logs, progress and tracing. Every event carries the `runId` and a `type`, like the Worker's
 * events; `step` is the model-loop step it belongs to. Events are emitted synchronously, in the
 * order things happen in this process; a listener never delays or steers the run.
 *
 * What each event guarantees about the store when it fires (only `phase_committed`, `interrupt`
 * and `run_finished` promise that something is durable; the others report what this process
 * did or is about to do, and a crash right after them can lose it):
 *
 * - `run_started`: this process took the run (it holds the run's lease) and starts driving it
 *   (`resumed` when it continues one). Nothing of this drive is saved yet.
 * - `phase_committed`: the checkpoint `checkpointId` (phase `phase`) is durable: the commit that
 *   holds it returned. Under `durability: 'async'` this comes later than the phase itself, and
 *   one commit may report several checkpoints.
 * - `model_call_started`: the model is about to be asked. Nothing is saved by it.
 * - `model_call_finished`: the model's response arrived in this process. It is **not yet
 *   saved**: the `post_llm` checkpoint holding it is written afterwards, and its
 *   `phase_committed` says when it is durable. A crash in between asks the model again on resume.
 * - `text_delta` / `reasoning_delta`: a piece of the model's answer (or reasoning) as it streams.
 *   Nothing is saved by it in the checkpoints; a run's durable event log keeps it (batched).
 * - `model_call_voided`: the model call of `step` was cut off by a crash: the deltas streamed
 *   for it since its `model_call_started` are not part of the answer (the resumed run asks again).
 *   Written by the process that resumes the run, before its own `run_started`.
 * - `events_truncated`: only in a run's durable log, where its size cap was reached: from there
 *   on the log keeps no more deltas, only the other events.
 * - `tool_call_started`: the tool's callback is about to run. For a tool that is not idempotent,
 *   its "started" mark is durable by then (a crash from here on is an unknown outcome, never a
 *   silent second run); for an idempotent tool, its intent is durable too, except under
 *   `durability: 'async'` in a batch of idempotent calls only, where it goes with the next commit.
 * - `tool_call_finished`: the callback returned in this process. Its outcome is **not yet
 *   saved** when the event fires: a non-idempotent call's outcome is written to the journal
 *   right after it; an idempotent call's with the batch's `post_tool_batch` checkpoint. A crash
 *   in between makes a non-idempotent call an unknown outcome and re-runs an idempotent one.
 * - `tool_call_replayed`: the call's outcome was read from the journal, where it is durable; the
 *   callback did not run.
 * - `tool_call_answered`: a call whose outcome was unknown (its process died while it ran) was
 *   decided by an operator's answer. `skip`: its error result is durable in the journal and the
 *   callback did not run. `retry`: one more attempt is counted durably in its effect row, and
 *   its `tool_call_started` follows.
 * - `interrupt`: the run paused for answers; its `run_paused` checkpoint and the run's `paused`
 *   status are durable.
 * - `run_finished`: this process stopped driving the run. For `completed`, `failed`,
 *   `cancelled` and `paused` the final checkpoint and status are durable; for `error` (the run
 *   could not continue, e.g. the store failed or the lease was lost) nothing more was saved, and
 *   the run resumes from its last durable checkpoint.
 */
export type RunEvent =
  | { type: 'run_started'; runId: string; agentName: string; model: string; resumed: boolean; step: number }
  | { type: 'phase_committed'; runId: string; checkpointId: string; phase: string; step: number }
  | { type: 'model_call_started'; runId: string; step: number; model: string }
  | { type: 'model_call_finished'; runId: string; step: number; model: string; stopReason: string; usage: RunEventUsage; toolCalls: number }
  | { type: 'text_delta'; runId: string; step: number; text: string }
  | { type: 'reasoning_delta'; runId: string; step: number; text: string }
  | { type: 'model_call_voided'; runId: string; step: number }
  | { type: 'tool_call_started'; runId: string; step: number; toolUseId: string; name: string; input?: JsonValue }
  | { type: 'tool_call_finished'; runId: string; step: number; toolUseId: string; name: string; status: 'success' | 'error'; output?: JsonValue }
  | { type: 'tool_call_replayed'; runId: string; step: number; toolUseId: string; name: string; status: 'success' | 'error'; output?: JsonValue }
  | { type: 'tool_call_answered'; runId: string; step: number; toolUseId: string; name: string; answer: 'retry' | 'skip' }
  | { type: 'interrupt'; runId: string; step: number; interrupts: { id: string; name: string; reason: unknown }[] }
  | { type: 'run_finished'; runId: string; state: 'completed' | 'failed' | 'cancelled' | 'paused' | 'sleeping' | 'waiting' | 'error'; error?: string; text?: string }
  | { type: 'events_truncated'; runId: string; step: number; maxBytes: number }

/** A listener of {@link RunEvent}s. */
export type RunEventListener = (event: RunEvent) => void

/**
 * Call every listener with `event`; a listener that throws is reported once on stderr and never
 * breaks the run (events are for watching, not for steering).
 */
export function emitTo(listeners: Iterable<RunEventListener | undefined>, event: RunEvent): void {
  for (const listener of listeners) {
    if (!listener) continue
    try {
      listener(event)
    } catch (err) {
      process.emitWarning(`a run event listener threw on ${event.type}: ${err instanceof Error ? err.message : String(err)}`)
    }
  }
}
