import { hostname } from 'node:os'
import { encodeValue, type JsonObject } from '../core/codec.js'
import { freezeDeep } from '../core/freeze.js'
import type { Agent } from '../agent/agent.js'
import { SNAPSHOT_SCHEMA_VERSION } from '../agent/snapshot.js'
import { toolUsesOf } from '../model/messages.js'
import type { RunRecord } from '../store/checkpoint-store.js'
import type { RuntimeSnapshot } from './phases.js'
import { processIsGone } from '../core/process-alive.js'

/** Building, restoring and repairing a run's agent state; who owns a run on this machine. */

/**
 * A runner `context` must be what a checkpoint can hold: a function, a class instance or a
 * cycle in it is refused before the run starts, with a `CheckpointError` (code `unserializable`)
 * naming its path (`context.client`).
 */
export function assertContext(context: JsonObject | undefined): void {
  if (context !== undefined) encodeValue(context, 'context')
}

export function newRuntime(agent: Agent, context: JsonObject): RuntimeSnapshot {
  return {
    messages: [],
    step: 0,
    next: 'model',
    state: 'running',
    context: structuredClone(context),
    llm_calls: 0,
    tool_calls: 0,
    started_at_s: Date.now() / 1000,
    usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0, cacheReadInputTokens: 0, cacheWriteInputTokens: 0, reasoningTokens: 0 },
    total_cost_usd: 0,
    session_token: null,
    checkpoint_token: null,
    pending_llm_response: null,
    tool_executions: [],
    subagent_executions: [],
    requested_model: agent.model.modelId,
    normalized_model: agent.model.modelId,
    provider_adapter: agent.model.constructor.name,
    final_text: '',
    final_structured: null,
    replayed_effect_count: 0,
    agent: { state: {}, conversation_manager: {}, interrupts: { pending: [], completed: [], responses: {}, cycleIndex: 0 }, config: agent.configSignature },
  }
}

export function restoreAgent(agent: Agent, runtime: RuntimeSnapshot, allowConfigChange: boolean): void {
  agent.loadSnapshot(
    {
      scope: 'agent',
      schemaVersion: SNAPSHOT_SCHEMA_VERSION,
      createdAt: new Date().toISOString(),
      data: {
        messages: runtime.messages,
        state: runtime.agent.state,
        conversationManager: runtime.agent.conversation_manager,
        interrupts: runtime.agent.interrupts,
        config: runtime.agent.config,
      },
      appData: {},
    },
    { allowConfigChange },
  )
  agent.providerTokens = {
    ...(runtime.session_token === null ? {} : { sessionToken: runtime.session_token }),
    ...(runtime.checkpoint_token === null ? {} : { checkpointToken: runtime.checkpoint_token }),
  }
}

/**
 * A history whose last assistant message asks for tools that have no results (left by a crash
 * elsewhere) gets error results, so the model sees a valid conversation. Returns whether it did.
 */
export function repairDanglingToolUses(agent: Agent): boolean {
  const last = agent.messages[agent.messages.length - 1]
  if (last?.role !== 'assistant') return false
  const uses = toolUsesOf(last)
  if (uses.length === 0) return false
  agent.messages.push(
    freezeDeep({
      role: 'user',
      content: uses.map((use) => ({
        toolResult: { toolUseId: use.toolUseId, status: 'error' as const, content: [{ text: 'This tool call never returned a result (the process running it stopped); it was not run again.' }] },
      })),
    }),
  )
  return true
}

export function ownerMetadata(): JsonObject {
  return { host: hostname(), pid: process.pid }
}

export function ownerIsDead(run: RunRecord): boolean {
  if (run.metadata.host !== hostname() || typeof run.metadata.pid !== 'number') return false
  return processIsGone(run.metadata.pid)
}
