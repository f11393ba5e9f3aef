/**
 * A process of the end-to-end adapter tests: runs (`run`) or resumes (`resume`) a weather run
 * under the Runner on SQLite, with a real adapter pointed at the replay server. In `run` mode the
 * tool tells the parent it started and waits to be killed; in `resume` mode it records its effect.
 *
 *   e2e-child <adapter> <db> <baseURL> <runId> <run|resume> <effectsFile>
 */
import { appendFileSync } from 'node:fs'
import { createAnthropic } from '@ai-sdk/anthropic'
import { Agent, Runner, tool, type Model } from '../../src/index.js'
import { AISDKModel } from '../../src/ai-sdk.js'
import { AnthropicModel } from '../../src/anthropic.js'
import { OpenAIChatModel, OpenAIResponsesModel } from '../../src/openai.js'
import { SqliteStore } from '../../src/sqlite.js'
import { SECRET_KEY } from './helpers-shared.js'

const [adapter, db, baseURL, runId, mode, effectsFile] = process.argv.slice(2) as [string, string, string, string, 'run' | 'resume', string]

function model(): Model {
  switch (adapter) {
    case 'openai-responses':
      return new OpenAIResponsesModel({ model: 'gpt-5-mini', apiKey: SECRET_KEY, baseURL: `${baseURL}/v1`, stateful: true })
    case 'openai-chat':
      return new OpenAIChatModel({ model: 'gpt-4.1-mini', apiKey: SECRET_KEY, baseURL: `${baseURL}/v1` })
    case 'anthropic':
      return new AnthropicModel({ model: 'claude-haiku-4-5', apiKey: SECRET_KEY, baseURL })
    case 'ai-sdk':
      return new AISDKModel(createAnthropic({ apiKey: SECRET_KEY, baseURL: `${baseURL}/v1` })('claude-haiku-4-5'))
    default:
      throw new Error(`unknown adapter ${adapter}`)
  }
}

const recordCity = tool({
  name: 'get_weather',
  description: 'The weather in a city.',
  idempotent: true,
  inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  callback: async (input) => {
    const { city } = input as { city: string }
    if (mode === 'run') {
      // The post_llm checkpoint and this call's intent are durable: the parent kills us now.
      process.send?.({ type: 'in-tool' })
      await new Promise(() => {})
    }
    appendFileSync(effectsFile, `${city}\n`)
    return `Sunny in ${city}`
  },
})

const store = new SqliteStore({ path: db })
const agent = new Agent({ name: 'weather', model: model(), tools: [recordCity], systemPrompt: 'Answer with the weather.' })
const runner = new Runner({ store, durability: 'sync' })
const result = mode === 'run' ? await runner.run(agent, { input: 'Weather in Turin?', runId }) : await runner.resume(agent, { runId })
await store.close()
process.send?.({ type: 'result', state: result.state, text: result.result?.toString() ?? '', llmCalls: result.llmCalls, error: result.error ?? null, usage: result.usage })
process.disconnect?.()
