import type { Message, ToolResultBlock, ToolUseBlock } from '../model/messages.js'
import type { ModelStreamEvent } from '../model/model.js'
import type { Checkpoint } from './checkpoint.js'
import type { Interrupt } from './interrupts.js'
import type { AgentResult } from './result.js'

/**
 * What `agent.stream()` yields. Only the cycles run by this call stream: a resume does not
 * replay the cycles before its checkpoint.
 */
export type AgentStreamEvent =
  | { type: 'modelEvent'; cycleIndex: number; event: ModelStreamEvent }
  | { type: 'messageAdded'; message: Message }
  | { type: 'toolStarted'; toolUse: ToolUseBlock['toolUse'] }
  | { type: 'toolFinished'; toolUse: ToolUseBlock['toolUse']; result: ToolResultBlock['toolResult'] }
  | { type: 'checkpoint'; checkpoint: Checkpoint }
  | { type: 'interrupt'; interrupts: Interrupt[] }
  | { type: 'result'; result: AgentResult }
