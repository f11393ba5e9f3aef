import type { JsonValue } from '../core/codec.js'
import { textOf, type Message, type ModelStopReason, type Usage } from '../model/messages.js'
import { Checkpoint, type CheckpointJSON } from './checkpoint.js'
import type { Interrupt } from './interrupts.js'

/** Why an invocation returned. */
export type AgentStopReason = ModelStopReason | 'checkpoint' | 'interrupt' | 'cancelled'

/** Counters of one invocation; they start from zero on every call, resumes included. */
export interface AgentMetrics {
  cycleCount: number
  modelCalls: number
  toolCalls: Record<string, { calls: number; errors: number }>
  usage: Usage
  durationMs: number
}

/** The JSON form of an {@link AgentResult}. */
export interface AgentResultJSON {
  stopReason: AgentStopReason
  message: Message | null
  checkpoint: CheckpointJSON | null
  interrupts: Interrupt[]
  structuredOutput: JsonValue | null
  metrics: AgentMetrics
}

/** What `agent.invoke` returns. */
export class AgentResult {
  readonly stopReason: AgentStopReason
  /** The last assistant message (at `after_tools`: the one that requested the tools). */
  readonly message: Message | undefined
  /** Set when `stopReason` is `'checkpoint'`, otherwise undefined. */
  readonly checkpoint: Checkpoint | undefined
  /** Set when `stopReason` is `'interrupt'`. */
  readonly interrupts: Interrupt[]
  readonly structuredOutput: unknown
  readonly metrics: AgentMetrics

  constructor(params: {
    stopReason: AgentStopReason
    message: Message | undefined
    checkpoint?: Checkpoint | undefined
    interrupts?: Interrupt[]
    structuredOutput?: unknown
    metrics: AgentMetrics
  }) {
    this.stopReason = params.stopReason
    this.message = params.message
    this.checkpoint = params.checkpoint
    this.interrupts = params.interrupts ?? []
    this.structuredOutput = params.structuredOutput
    this.metrics = params.metrics
  }

  /** The text of the final message. */
  toString(): string {
    return textOf(this.message)
  }

  /** Plain JSON; `checkpoint` is `null` when absent. */
  toJSON(): AgentResultJSON {
    return structuredClone({
      stopReason: this.stopReason,
      message: this.message ?? null,
      checkpoint: this.checkpoint?.toJSON() ?? null,
      interrupts: this.interrupts,
      structuredOutput: (this.structuredOutput ?? null) as JsonValue,
      metrics: this.metrics,
    })
  }

  /** Rebuild a result from `toJSON()` output, checkpoint included. */
  static fromJSON(data: AgentResultJSON): AgentResult {
    return new AgentResult({
      stopReason: data.stopReason,
      message: data.message ?? undefined,
      checkpoint: data.checkpoint ? Checkpoint.fromJSON(data.checkpoint) : undefined,
      interrupts: data.interrupts ?? [],
      structuredOutput: data.structuredOutput ?? undefined,
      metrics: data.metrics,
    })
  }
}

/** Fresh metrics. */
export function newMetrics(): AgentMetrics {
  return { cycleCount: 0, modelCalls: 0, toolCalls: {}, usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 }, durationMs: 0 }
}
