import type { JsonValue } from '../core/codec.js'
import type { ToolResultBlock, ToolUseBlock } from '../model/messages.js'

/** What happened to one tool call of a batch. */
export type ToolCallOutcome =
  | { type: 'result'; result: ToolResultBlock['toolResult'] }
  | { type: 'interrupt'; interrupt: { id: string; name: string; reason?: JsonValue; toolUseId: string } }

/** Runs one call: validation, hooks, the callback, error and interrupt handling. */
export type RunToolCall = (toolUse: ToolUseBlock['toolUse']) => Promise<ToolCallOutcome>

/**
 * Decides how a batch of tool calls runs. The agent passes `runOne`, which does everything for
 * one call; an executor chooses order and concurrency, and may wrap each call (the runner wraps
 * it in the effect journal). Outcomes are returned in call order.
 */
export interface ToolExecutor {
  execute(calls: readonly ToolUseBlock['toolUse'][], runOne: RunToolCall): Promise<ToolCallOutcome[]>
}

/** Runs every call of a batch at once (the default). */
export const concurrentToolExecutor: ToolExecutor = {
  execute: (calls, runOne) => Promise.all(calls.map(runOne)),
}

/** Runs the calls of a batch one after another, in order. */
export const sequentialToolExecutor: ToolExecutor = {
  async execute(calls, runOne) {
    const outcomes: ToolCallOutcome[] = []
    for (const call of calls) outcomes.push(await runOne(call))
    return outcomes
  },
}
