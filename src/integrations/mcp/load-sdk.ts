import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { importPeer } from '../../core/peers.js'

/** The parts of the MCP SDK's client Cairn uses, loaded on the first connection. */
export interface McpSdk {
  Client: typeof Client
  StdioClientTransport: typeof StdioClientTransport
  StreamableHTTPClientTransport: typeof StreamableHTTPClientTransport
}

let loaded: Promise<McpSdk> | undefined

/**
 * Import the SDK's client (an optional peer dependency). Importing `cairn-agents` or
 * `cairn-agents/mcp` loads none of it; a missing package is a `MissingDependencyError` that says
 * how to install it.
 */
export function loadMcpSdk(server: string): Promise<McpSdk> {
  loaded ??= importSdk(server).catch((err: unknown) => {
    loaded = undefined
    throw err
  })
  return loaded
}

async function importSdk(server: string): Promise<McpSdk> {
  const peer = (subpath: string) => ({ name: '@modelcontextprotocol/sdk', subpath, neededBy: `connecting to MCP server ${server}` }) as const
  const [client, stdio, http] = await Promise.all([
    importPeer<typeof import('@modelcontextprotocol/sdk/client/index.js')>(peer('client/index.js')),
    importPeer<typeof import('@modelcontextprotocol/sdk/client/stdio.js')>(peer('client/stdio.js')),
    importPeer<typeof import('@modelcontextprotocol/sdk/client/streamableHttp.js')>(peer('client/streamableHttp.js')),
  ])
  return { Client: client.Client, StdioClientTransport: stdio.StdioClientTransport, StreamableHTTPClientTransport: http.StreamableHTTPClientTransport }
}
