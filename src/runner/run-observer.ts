import type { JsonValue } from '../core/codec.js'
import type { AgentStreamEvent } from '../agent/events.js'
import { textOf, type ToolResultContent } from '../model/messages.js'
import type { ToolExecutor } from '../tools/tool-executor.js'
import { emitTo, type RunEvent, type RunEventListener } from '../observe/run-events.js'
import type { RunResult } from './run-result.js'

/** Where one drive of a run sends its events. */
export type Emit = (event: RunEvent) => void

/** An emitter over the runner's listener, the caller's stream and the tracer. */
export function emitter(listeners: readonly (RunEventListener | undefined)[]): Emit {
  const live = listeners.filter((listener): listener is RunEventListener => listener !== undefined)
  return live.length === 0 ? () => {} : (event) => emitTo(live, event)
}

/** Where {@link observedTools} reports, and what it asks the journal. */
export interface ToolObserver {
  emit: Emit
  runId: string
  step: () => number
  /** The operator's answer the journal applied to a call of unknown outcome, if any. */
  answerOf: (toolUseId: string) => 'retry' | 'skip' | undefined
}

/**
 * `executor` with `tool_call_started`/`tool_call_finished` around every call that really runs
 * (`tool_call_answered` first when an operator's 'retry' runs it again), and, for the calls of
 * the batch that never reach `runOne`, `tool_call_answered` when an operator's 'skip' decided
 * their result, else `tool_call_replayed` (the journal held it). Wrap the journal's executor with it.
 */
export function observedTools(executor: ToolExecutor, observer: ToolObserver): ToolExecutor {
  const { emit, runId, step, answerOf } = observer
  return {
    async execute(calls, runOne) {
      const ran = new Set<string>()
      const outcomes = await executor.execute(calls, async (use) => {
        ran.add(use.toolUseId)
        if (answerOf(use.toolUseId) === 'retry') emit({ type: 'tool_call_answered', runId, step: step(), toolUseId: use.toolUseId, name: use.name, answer: 'retry' })
        emit({ type: 'tool_call_started', runId, step: step(), toolUseId: use.toolUseId, name: use.name, input: use.input })
        const outcome = await runOne(use)
        if (outcome.type === 'result') {
          emit({ type: 'tool_call_finished', runId, step: step(), toolUseId: use.toolUseId, name: use.name, status: outcome.result.status, output: outputOf(outcome.result.content) })
        }
        return outcome
      })
      outcomes.forEach((outcome, i) => {
        const use = calls[i]
        if (!use || ran.has(use.toolUseId) || outcome.type !== 'result') return
        if (answerOf(use.toolUseId) === 'skip') emit({ type: 'tool_call_answered', runId, step: step(), toolUseId: use.toolUseId, name: use.name, answer: 'skip' })
        else emit({ type: 'tool_call_replayed', runId, step: step(), toolUseId: use.toolUseId, name: use.name, status: outcome.result.status, output: outputOf(outcome.result.content) })
      })
      return outcomes
    },
  }
}

/** The `interrupt` and `run_finished` events of a drive's outcome. */
export function reportOutcome(emit: Emit, runId: string, step: number, outcome: { result: RunResult } | { error: unknown }): void {
  if ('error' in outcome) {
    emit({ type: 'run_finished', runId, state: 'error', error: outcome.error instanceof Error ? outcome.error.message : String(outcome.error) })
    return
  }
  const { result } = outcome
  if (result.state === 'paused' || result.state === 'sleeping' || result.state === 'waiting') {
    emit({ type: 'interrupt', runId, step, interrupts: result.interrupts.map((i) => ({ id: i.id, name: i.name, reason: i.reason ?? null })) })
  }
  const text = result.state === 'completed' ? finalTextOf(result) : undefined
  emit({ type: 'run_finished', runId, state: result.state, ...(result.error ? { error: result.error.message } : {}), ...(text ? { text } : {}) })
}

/** The `text_delta` and `reasoning_delta` events of an agent stream event (none for the others). */
export function deltaOf(event: AgentStreamEvent, runId: string): RunEvent | undefined {
  if (event.type !== 'modelEvent') return undefined
  const inner = event.event
  if (inner.type === 'textDelta' && inner.text !== '') return { type: 'text_delta', runId, step: event.cycleIndex, text: inner.text }
  if (inner.type === 'reasoningDelta' && inner.text !== undefined && inner.text !== '') return { type: 'reasoning_delta', runId, step: event.cycleIndex, text: inner.text }
  return undefined
}

/** A tool result's content as one JSON value: its JSON part, its text, or the parts. */
function outputOf(content: readonly ToolResultContent[]): JsonValue {
  if (content.length === 1 && content[0] && 'json' in content[0]) return content[0].json
  if (content.every((part) => 'text' in part)) return content.map((part) => ('text' in part ? part.text : '')).join('')
  return content.map((part) => ('json' in part ? { json: part.json } : { text: part.text }))
}

function finalTextOf(result: RunResult): string | undefined {
  const text = textOf(result.result?.message)
  return text === '' ? undefined : text
}

/**
 * The events of one drive as an async generator that returns its result: what
 * `runner.stream()` gives. `start` begins the drive with a listener that feeds the generator.
 */
export async function* streamOf(start: (listener: RunEventListener) => Promise<RunResult>): AsyncGenerator<RunEvent, RunResult> {
  const queue: RunEvent[] = []
  let wake: (() => void) | undefined
  let settled: { result: RunResult } | { error: unknown } | undefined
  const poke = () => {
    wake?.()
    wake = undefined
  }
  start((event) => {
    queue.push(event)
    poke()
  }).then(
    (result) => ((settled = { result }), poke()),
    (error: unknown) => ((settled = { error }), poke()),
  )
  for (;;) {
    while (queue.length > 0) yield queue.shift()!
    if (settled) {
      if ('error' in settled) throw settled.error
      return settled.result
    }
    await new Promise<void>((resolve) => (wake = resolve))
  }
}
