import type { RunEvent } from '../index.js'
import type { Output } from './output.js'

/** A `Runner` `onEvent` that prints each event of a resumed run as one line. */
export function printEvent(out: Output): (event: RunEvent) => void {
  return (event) => {
    const line = describeEvent(event)
    if (line) out.line(`  ${line}`)
  }
}

/** One event in words; undefined for the ones too fine to print. */
export function describeEvent(event: RunEvent): string | undefined {
  switch (event.type) {
    case 'run_started':
      return `${event.resumed ? 'resumed' : 'started'} run ${event.runId} (${event.agentName}) at step ${event.step}`
    case 'model_call_finished':
      return `step ${event.step}: model ${event.model} answered (${event.stopReason}, ${event.usage.inputTokens}+${event.usage.outputTokens} tokens)`
    case 'tool_call_finished':
      return `step ${event.step}: ${event.name} ${event.toolUseId} ran (${event.status})`
    case 'tool_call_replayed':
      return `step ${event.step}: ${event.name} ${event.toolUseId} replayed from the journal, not run`
    case 'tool_call_answered':
      return event.answer === 'skip'
        ? `step ${event.step}: ${event.name} ${event.toolUseId} not run: its outcome is unknown and the answer was skip (the model gets an error result)`
        : `step ${event.step}: ${event.name} ${event.toolUseId} runs again: its outcome was unknown and the answer was retry`
    case 'interrupt':
      return `paused for ${event.interrupts.map((i) => `${i.id} (${i.name})`).join(', ')}`
    case 'run_finished':
      return `run ${event.runId} ${event.state}${event.error ? `: ${event.error}` : ''}`
    default:
      return undefined
  }
}
