import { defaultSchemas } from '../core/schema.js'
import type { JsonObject, JsonValue } from '../core/codec.js'
import type { ConfigSignature } from '../agent/config-signature.js'
import type { InterruptState } from '../agent/interrupts.js'
import type { Message, Usage } from '../model/messages.js'
import { RUNNER_MIGRATIONS } from './migrations.js'

/** The phases a managed run checkpoints at, `run_paused` being a run waiting for a human. */
export type RunnerPhase =
  | 'run_started'
  | 'step_started'
  | 'pre_llm'
  | 'post_llm'
  | 'pre_tool_batch'
  | 'post_tool_batch'
  | 'pre_subagent_batch'
  | 'post_subagent_batch'
  | 'run_paused'
  | 'run_terminal'

export const RUNNER_PHASES: readonly RunnerPhase[] = [
  'run_started',
  'step_started',
  'pre_llm',
  'post_llm',
  'pre_tool_batch',
  'post_tool_batch',
  'pre_subagent_batch',
  'post_subagent_batch',
  'run_paused',
  'run_terminal',
]

/** The record kind runner checkpoints are stored under, and its schema version. */
export const RUNNER_KIND = 'runner'
export const RUNNER_SCHEMA_VERSION = 2
defaultSchemas.define(RUNNER_KIND, RUNNER_SCHEMA_VERSION)
for (const migration of RUNNER_MIGRATIONS) defaultSchemas.register(migration)

/** One tool call as the runtime snapshot records it. */
export interface ToolExecutionRecord {
  tool_call_id: string
  tool_name: string
  step: number
  status: 'success' | 'error'
  /** Satisfied from the effect journal instead of running. */
  replayed: boolean
  /**
   * Its outcome was unknown (its process died while it ran) and an operator answered: `retry`
   * ran it again, `skip` gave the model an error result without running it.
   */
  answer?: 'retry' | 'skip'
}

/** One child run started by a subagent tool. */
export interface SubagentExecutionRecord {
  tool_call_id: string
  child_run_id: string
  agent_name: string
  step: number
  state: string
}

/**
 * Everything a fresh process needs to continue a run, plus `agent`:
 * the agent's state, conversation-manager state, interrupt state and configuration signature,
 * and `next`: whether the step continues with a model call or with the pending tool calls.
 */
export interface RuntimeSnapshot {
  messages: Message[]
  step: number
  next: 'model' | 'tools'
  state: 'running'
  context: JsonObject
  llm_calls: number
  tool_calls: number
  started_at_s: number
  /** Summed over every model call of the run, resumes included (detail counts always present). */
  usage: Required<Usage>
  /** Summed over every model call of the run, at the model's `prices`; 0 without prices. */
  total_cost_usd: number
  session_token: string | null
  checkpoint_token: string | null
  pending_llm_response: Message | null
  tool_executions: ToolExecutionRecord[]
  subagent_executions: SubagentExecutionRecord[]
  requested_model: string
  normalized_model: string
  provider_adapter: string
  final_text: string
  final_structured: JsonValue | null
  replayed_effect_count: number
  agent: { state: JsonObject; conversation_manager: JsonObject; interrupts: InterruptState; config: ConfigSignature }
}

/** How a run ended, as stored in its `run_terminal` checkpoint. */
export type TerminalState = 'completed' | 'failed' | 'cancelled'

/**
 * A runner checkpoint as `runner.history(runId)` returns it, with the same camelCase names as
 * every other Cairn API. The chain of them is the run's audit log.
 */
export interface RunnerCheckpoint {
  checkpointId: string
  runId: string
  threadId: string | null
  /** Version of the runner payload format it was written in. */
  schemaVersion: number
  phase: RunnerPhase
  step: number
  payload: Record<string, unknown>
  /** When it was written, in Unix milliseconds (a light phase: when it was recorded). */
  timestampMs: number
  /**
   * Which process wrote it (`pid 42 on host`), or under which worker lease (`lease w1 epoch 3`),
   * when known: the writer of the run's last `run_started` for a checkpoint that does not say.
   */
  writer: string | null
}
