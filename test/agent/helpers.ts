import { z } from 'zod'
import { Agent, tool, type AgentOptions, type AgentResult, type ContentBlock } from '../../src/index.js'
import { ScriptedModel, type ScriptedTurn } from '../../src/testing.js'

/** Tools that count their calls. */
export function weatherTools() {
  const calls: string[] = []
  const getWeather = tool({
    name: 'get_weather',
    description: 'Return the current weather for the given city.',
    inputSchema: z.object({ city: z.string() }),
    callback: async ({ city }) => {
      calls.push(`weather:${city}`)
      return 'sunny'
    },
  })
  const getForecast = tool({
    name: 'get_forecast',
    description: 'Return the weather forecast for the given city.',
    inputSchema: z.object({ city: z.string() }),
    callback: async ({ city }) => {
      calls.push(`forecast:${city}`)
      return 'clear skies'
    },
  })
  return { calls, tools: [getWeather, getForecast] }
}

export const useTool = (toolUseId: string, name: string, input: Record<string, unknown> = { city: 'Seattle' }): ContentBlock => ({
  toolUse: { toolUseId, name, input: input as never },
})

export const SYSTEM_PROMPT = 'When asked about weather, call the get_weather and get_forecast tools.'

/** An agent over a scripted model: one cycle with both tools, then an answer. */
export function weatherAgent(options: Partial<AgentOptions> & { turns?: ScriptedTurn[] } = {}) {
  const { calls, tools } = weatherTools()
  const model = new ScriptedModel(options.turns ?? [[useTool('t1', 'get_weather'), useTool('t2', 'get_forecast')], [{ text: 'Sunny, then clear skies.' }]])
  const agent = new Agent({ model, tools, systemPrompt: SYSTEM_PROMPT, checkpointing: true, ...options })
  return { agent, model, calls }
}

/** Persist and resume until the run ends, as a caller would. */
export async function runToEnd(agent: Agent, first: AgentResult): Promise<{ result: AgentResult; positions: string[] }> {
  let result = first
  const positions: string[] = []
  while (result.stopReason === 'checkpoint') {
    positions.push(`${result.checkpoint!.position}:${result.checkpoint!.cycleIndex}`)
    const persisted = JSON.stringify(result.checkpoint!.toJSON())
    result = await agent.invoke([{ checkpointResume: { checkpoint: JSON.parse(persisted) } }])
  }
  return { result, positions }
}
