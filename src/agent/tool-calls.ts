import type { JsonValue } from '../core/codec.js'
import { CheckpointError, InterruptExpiredError } from '../core/errors.js'
import type { ToolResultBlock, ToolUseBlock } from '../model/messages.js'
import { errorResult, type AgentState, type Tool, type ToolTimeHost } from '../tools/tool.js'
import type { ToolCallOutcome } from '../tools/tool-executor.js'
import { boundToolResult, storableToolResult } from '../tools/result-limit.js'
import { fireHook, type AgentHooks } from './hooks.js'
import { InterruptSignal, waitFunctions, type Interrupt } from './interrupts.js'
import type { AgentMetrics } from './result.js'
import type { AgentStreamEvent } from './events.js'

/** What running one tool call needs from the invocation. */
export interface ToolCallScope {
  tools: ReadonlyMap<string, Tool>
  hooks: readonly AgentHooks[]
  signal: AbortSignal
  requestState: Record<string, unknown>
  agentState: AgentState
  responses: Record<string, JsonValue>
  /** The interrupts the batch stopped at last time (their wake times and deadlines are kept). */
  pending: readonly Interrupt[]
  /** The runner's clock and events (absent without a runner). */
  time?: ToolTimeHost | undefined
  metrics: AgentMetrics
  emit: (event: AgentStreamEvent) => void
  /** The idempotency key of a call (default: its tool-use id). */
  idempotencyKey?: ((toolUse: ToolUseBlock['toolUse']) => string) | undefined
}

/**
 * Run one tool call and turn whatever happens into an outcome: an unknown tool, invalid input
 * or a thrown error becomes an error result the model sees, except a `CheckpointError` (the
 * tool put a value no checkpoint can hold into agent state), which fails the invocation;
 * `ctx.interrupt` becomes an interrupt; a call cut short by cancellation becomes a "cancelled"
 * error result. A result larger than the `maxToolResultChars` limit is truncated or refused by
 * the `toolResultPolicy` limit, and one no checkpoint can hold (a cycle, a function, too deep)
 * becomes an error result, before anything (hooks, the journal, the conversation) sees it.
 */
export async function runToolCall(scope: ToolCallScope, toolUse: ToolUseBlock['toolUse']): Promise<ToolCallOutcome> {
  const tool = scope.tools.get(toolUse.name)
  scope.emit({ type: 'toolStarted', toolUse })
  let result: ToolResultBlock['toolResult']
  if (!tool) {
    result = errorResult(toolUse.toolUseId, `Tool ${toolUse.name} does not exist; available tools: ${[...scope.tools.keys()].join(', ') || 'none'}`)
  } else if (scope.signal.aborted) {
    result = cancelledResult(toolUse.toolUseId)
  } else {
    await fireHook(scope.hooks, 'beforeToolCall', { toolUse })
    try {
      result = await tool.run(toolUse, {
        toolUse,
        signal: scope.signal,
        idempotencyKey: scope.idempotencyKey?.(toolUse) ?? toolUse.toolUseId,
        requestState: scope.requestState,
        agentState: scope.agentState,
        ...waitFunctions({ toolUse, responses: scope.responses, pending: scope.pending, time: scope.time }),
      })
    } catch (err) {
      if (err instanceof InterruptSignal) return { type: 'interrupt', interrupt: err.interrupt }
      // A tool that put what no checkpoint can hold into agent state (a function, say) has a bug
      // the model cannot fix: the invocation fails rather than hand the model the error.
      if (err instanceof CheckpointError) throw err
      // A deadline whose onExpiry fails the run.
      if (err instanceof InterruptExpiredError) throw err
      result = scope.signal.aborted ? cancelledResult(toolUse.toolUseId) : errorResult(toolUse.toolUseId, `Error: ${(err as Error)?.message ?? String(err)}`)
    }
    result = storableToolResult(boundToolResult(result, toolUse.name), toolUse.name)
  }
  const counts = (scope.metrics.toolCalls[toolUse.name] ??= { calls: 0, errors: 0 })
  counts.calls++
  if (result.status === 'error') counts.errors++
  await fireHook(scope.hooks, 'afterToolCall', { toolUse, result })
  scope.emit({ type: 'toolFinished', toolUse, result })
  return { type: 'result', result }
}

/** The error result given to a tool use that was cancelled before or while running. */
export function cancelledResult(toolUseId: string): ToolResultBlock['toolResult'] {
  return errorResult(toolUseId, 'Tool use cancelled: the invocation was cancelled before this tool finished')
}
