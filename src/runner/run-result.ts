import type { JsonObject } from '../core/codec.js'
import { AgentResult, type AgentResultJSON } from '../agent/result.js'
import type { Interrupt } from '../agent/interrupts.js'
import type { Usage } from '../model/messages.js'
import type { CheckpointRecord } from '../store/checkpoint-store.js'

/**
 * How a managed run stands when `run` or `resume` returns: `sleeping` (`ctx.sleep`) and
 * `waiting` (`ctx.waitForEvent`) are stopped like `paused`, for a time or an event instead of a human.
 */
export type RunState = 'completed' | 'failed' | 'cancelled' | 'paused' | 'sleeping' | 'waiting'

/** What `runner.run` and `runner.resume` return. */
export interface RunResult {
  runId: string
  threadId: string
  state: RunState
  /** The agent's result (for `completed`, `cancelled`, `interrupted`). */
  result: AgentResult | undefined
  /** Waiting for `runner.resume(agent, { runId, responses })`. */
  interrupts: Interrupt[]
  /** Why a `failed` run failed: the error that ended it (the process did not just die). */
  error: { name: string; message: string; code?: string } | undefined
  /** Tool calls satisfied from the effect journal instead of running again. */
  replayedEffectCount: number
  /**
   * Tool calls of unknown outcome (their process died while they ran) that an operator's `skip`
   * answered: not run again, the model given an error result.
   */
  skippedEffectCount: number
  /** Model calls made by this call of run/resume. */
  llmCalls: number
  /** Tool calls finished by this call of run/resume (run, replayed, or skipped on an answer). */
  toolCalls: number
  /** Durable commits this call of run/resume made. */
  commits: number
  /** True when the run had already finished and its stored result was returned. */
  fromTerminalCheckpoint: boolean
  /** Tokens of every model call of the run, across all its resumes. */
  usage: Required<Usage>
  /** What the run's model calls cost, across all its resumes, at the model's `prices` (0 without). */
  totalCostUsd: number
}

/** A zero usage with every detail count. */
export function zeroRunUsage(): Required<Usage> {
  return { inputTokens: 0, outputTokens: 0, totalTokens: 0, cacheReadInputTokens: 0, cacheWriteInputTokens: 0, reasoningTokens: 0 }
}

/** The terminal checkpoint's payload: how the run ended, its final text, model, usage and cost, and the serialized result. */
export function terminalPayload(params: {
  state: 'completed' | 'failed' | 'cancelled'
  result: AgentResult | undefined
  error: RunResult['error']
  finalText: string
  requestedModel: string
  providerAdapter: string
  usage: Required<Usage>
  totalCostUsd: number
}): JsonObject {
  return {
    state: params.state,
    final_text: params.finalText,
    requested_model: params.requestedModel,
    normalized_model: params.requestedModel,
    provider_adapter: params.providerAdapter,
    terminal_result: params.result ? (params.result.toJSON() as unknown as JsonObject) : null,
    error: params.error ?? null,
    usage: { ...params.usage },
    total_cost_usd: params.totalCostUsd,
  }
}

/** Rebuild the result of a finished run from its terminal checkpoint, without running anything. */
export function resultFromTerminal(record: CheckpointRecord<Record<string, unknown>>, threadId: string): RunResult {
  const payload = record.payload
  const stored = payload.terminal_result as AgentResultJSON | null | undefined
  return {
    runId: record.runId,
    threadId,
    state: payload.state as RunState,
    result: stored ? AgentResult.fromJSON(stored) : undefined,
    interrupts: [],
    error: (payload.error as RunResult['error'] | null) ?? undefined,
    replayedEffectCount: 0,
    skippedEffectCount: 0,
    llmCalls: 0,
    toolCalls: 0,
    commits: 0,
    fromTerminalCheckpoint: true,
    // Terminal checkpoints written before usage was kept in them report zero.
    usage: { ...zeroRunUsage(), ...(payload.usage as Partial<Usage> | undefined) },
    totalCostUsd: typeof payload.total_cost_usd === 'number' ? payload.total_cost_usd : 0,
  }
}
