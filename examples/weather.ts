/**
 * Checkpointing, end to end: an agent with two tools pauses after the model asks for them
 * (`after_model`) and after they ran (`after_tools`). Each time, the checkpoint is turned into
 * JSON, as if persisted, and the agent resumes from it. The model is scripted, so no API key is
 * needed.
 *
 *   npx tsx examples/weather.ts
 */
import { z } from 'zod'
import { Agent, tool, type ModelRequest } from 'cairn-agents'
import { ScriptedModel } from 'cairn-agents/testing'

const getWeather = tool({
  name: 'get_weather',
  description: 'Return the current weather for the given city.',
  inputSchema: z.object({ city: z.string() }),
  callback: () => 'sunny',
})

const getForecast = tool({
  name: 'get_forecast',
  description: 'Return the weather forecast for the given city.',
  inputSchema: z.object({ city: z.string() }),
  callback: () => 'clear skies',
})

// A real model would decide this. The scripted one asks for both tools, then answers from the
// tool results it is sent, so the answer shows what the resumed agent passed back.
const model = new ScriptedModel([
  [
    { toolUse: { toolUseId: 'weather-1', name: 'get_weather', input: { city: 'Seattle' } } },
    { toolUse: { toolUseId: 'forecast-1', name: 'get_forecast', input: { city: 'Seattle' } } },
  ],
  (request) => {
    const [weather, forecast] = toolResultTexts(request)
    return [{ text: `Seattle is ${weather} now, with ${forecast} ahead.` }]
  },
])

const agent = new Agent({
  model,
  tools: [getWeather, getForecast],
  systemPrompt: 'When asked about weather, call the get_weather and get_forecast tools.',
  checkpointing: true,
})

let result = await agent.invoke('What is the weather and forecast for Seattle?')
while (result.stopReason === 'checkpoint') {
  const checkpoint = result.checkpoint!
  console.log(`CHECKPOINT: position=${checkpoint.position} cycleIndex=${checkpoint.cycleIndex}`)
  // Persist anywhere: database, workflow engine, object storage, etc.
  const persisted = JSON.stringify(checkpoint.toJSON())
  // Later (potentially in a fresh process), reload and resume.
  result = await agent.invoke([{ checkpointResume: { checkpoint: JSON.parse(persisted) } }])
}
console.log(`STOP REASON: ${result.stopReason}`)
console.log(`MESSAGE: ${JSON.stringify(result.message)}`)

/** The text of every tool result in the request, in order. */
function toolResultTexts(request: ModelRequest): string[] {
  return request.messages.flatMap((message) =>
    message.content.flatMap((block) => ('toolResult' in block ? block.toolResult.content.flatMap((part) => ('text' in part ? [part.text] : [])) : [])),
  )
}
