import type OpenAI from 'openai'
import { importPeer } from '../../core/peers.js'
import type { ModelPrices } from '../../model/messages.js'
import type { AdapterOptions } from '../shared.js'

const openai = await importPeer<typeof import('openai')>({ name: 'openai', neededBy: 'cairn-agents/openai' })

/** What both OpenAI models take. */
export interface OpenAIModelOptions extends AdapterOptions {
  /** The model name, as the API knows it (`gpt-5-mini`). */
  model: string
  /** A client you built; otherwise one is made from `apiKey`, `baseURL` and the retry options. */
  client?: OpenAI
  /** Defaults to the `OPENAI_API_KEY` environment variable (read by the client). */
  apiKey?: string
  /** Defaults to the `OPENAI_BASE_URL` environment variable, else the OpenAI API. */
  baseURL?: string
  /** Maximum output tokens of one call. */
  maxOutputTokens?: number
  /** Your prices, to add each call's cost to a managed run's `total_cost_usd`. */
  prices?: ModelPrices
}

/** The client to use: the given one, or a new one whose own retry loop handles transient failures. */
export function openAIClient(options: OpenAIModelOptions): OpenAI {
  if (options.client) return options.client
  return new openai.default({
    ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
    ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
    maxRetries: options.maxRetries ?? 2,
    ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
  })
}

/** The secrets an error message must not show. */
export function secretsOf(client: OpenAI, options: OpenAIModelOptions): (string | undefined)[] {
  return [options.apiKey, client.apiKey ?? undefined, process.env.OPENAI_API_KEY]
}
