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
 * events; `step` is the model-loop step it belongs to.
 *
 * - `run_started`: this process starts driving the run (`resumed` when it continues one);
 * - `phase_committed`: a checkpoint is durable in the store;
 * - `model_call_started` / `model_call_finished`: one model request, with its tokens;
 * - `text_delta` / `reasoning_delta`: a piece of the model's answer (or reasoning) as it streams;
 * - `model_call_voided`: the model call of `step` was cut off by a crash: the deltas streamed
 *   for it since its `model_call_started` are not part of the answer (the resumed run asks again);
 * - `tool_call_started` / `tool_call_finished`: one tool call that ran in this process, with
 *   its input and its result's content;
 * - `tool_call_replayed`: a tool call satisfied from the effect journal instead of running;
 * - `interrupt`: the run paused for answers (`reason`: what was asked);
 * - `run_finished`: this process stopped driving the run (`state` as in `RunResult`, or
 *   `error` when the run could not continue, e.g. the store failed); `text` is a completed
 *   run's final answer;
 * - `events_truncated`: only in a run's durable log, where its size cap was reached: from there
 *   on the log keeps no more deltas, only the other events.
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
  | { type: 'interrupt'; runId: string; step: number; interrupts: { id: string; name: string; reason: unknown }[] }
  | { type: 'run_finished'; runId: string; state: 'completed' | 'failed' | 'cancelled' | 'paused' | 'error'; error?: string; text?: string }
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
