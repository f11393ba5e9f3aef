/**
 * The agent of the start-up bench, as a user's app would build it from the published package
 * (the built `dist/`): one tool with a JSON Schema input, and a model that asks for one lookup per
 * cycle for `cycles` cycles, then ends the turn. `onCall` is told of every model call.
 */
import { Agent, tool } from '../../dist/index.js'

export const CYCLES = 40

export function buildAgent({ onCall, stallAt = Number.POSITIVE_INFINITY }) {
  const lookup = tool({
    name: 'lookup',
    description: 'Look up one fact.',
    inputSchema: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
    idempotent: true,
    callback: ({ query }) => `result of ${query}: ${'x'.repeat(900)}`,
  })
  return new Agent({ model: new StartupModel(onCall, stallAt), tools: [lookup] })
}

class StartupModel {
  modelId = 'startup-model'

  constructor(onCall, stallAt) {
    this.onCall = onCall
    this.stallAt = stallAt
  }

  async *stream(request) {
    const cycle = (request.messages.length - 1) / 2
    this.onCall(cycle)
    // The run being prepared stops here for good: its process is killed while it waits.
    if (cycle >= this.stallAt) await new Promise(() => {})
    yield { type: 'messageStart' }
    if (cycle < CYCLES) {
      yield { type: 'textDelta', text: `cycle ${cycle}: ${'y'.repeat(900)}` }
      yield { type: 'toolUseStart', toolUseId: `call-${cycle}`, name: 'lookup' }
      yield { type: 'toolUseInputDelta', toolUseId: `call-${cycle}`, delta: JSON.stringify({ query: `fact ${cycle}` }) }
      yield { type: 'messageStop', stopReason: 'tool_use' }
    } else {
      yield { type: 'textDelta', text: 'done' }
      yield { type: 'messageStop', stopReason: 'end_turn' }
    }
    yield { type: 'usage', usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 } }
  }
}
