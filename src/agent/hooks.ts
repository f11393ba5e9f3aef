import type { Message, ModelStopReason, ToolResultBlock, ToolUseBlock } from '../model/messages.js'
import type { AgentResult } from './result.js'

/**
 * Callbacks at the agent's lifecycle points. Invocation hooks fire on every call to `invoke` or
 * `stream`, resumes included.
 */
export interface AgentHooks {
  beforeInvocation?: (event: { resumed: boolean }) => void | Promise<void>
  afterInvocation?: (event: { result: AgentResult }) => void | Promise<void>
  beforeModelCall?: (event: { messages: readonly Message[]; cycleIndex: number }) => void | Promise<void>
  afterModelCall?: (event: { message: Message; stopReason: ModelStopReason; cycleIndex: number }) => void | Promise<void>
  beforeToolCall?: (event: { toolUse: ToolUseBlock['toolUse'] }) => void | Promise<void>
  afterToolCall?: (event: { toolUse: ToolUseBlock['toolUse']; result: ToolResultBlock['toolResult'] }) => void | Promise<void>
  messageAdded?: (event: { message: Message }) => void | Promise<void>
}

/** Call one hook of every provider, in order. */
export async function fireHook<K extends keyof AgentHooks>(hooks: readonly AgentHooks[], name: K, event: Parameters<NonNullable<AgentHooks[K]>>[0]): Promise<void> {
  for (const provider of hooks) {
    const hook = provider[name] as ((e: typeof event) => void | Promise<void>) | undefined
    if (hook) await hook(event)
  }
}
