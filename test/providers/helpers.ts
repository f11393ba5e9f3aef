import { afterAll, beforeAll } from 'vitest'
import { tool, type Tool } from '../../src/index.js'
import { ReplayServer } from './replay-server.js'

/** A replay server for the file's tests, started before and closed after them. */
export function useReplayServer(): ReplayServer {
  const server = new ReplayServer()
  beforeAll(async () => {
    await server.start()
  })
  afterAll(async () => {
    await server.close()
  })
  return server
}

/** A weather tool that records the cities it was asked about. */
export function weatherTool(calls: string[] = []): Tool {
  return tool({
    name: 'get_weather',
    description: 'The weather in a city.',
    inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    callback: async (input) => {
      const { city } = input as { city: string }
      calls.push(city)
      return `Sunny in ${city}`
    },
  })
}

export { SECRET_KEY } from './helpers-shared.js'

/** The PNG signature plus a byte that is not valid UTF-8: what an image's bytes look like. */
export const IMAGE_BYTES = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0xff, 0x00])
