import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpServerError } from './errors.js'

/** The parts of the MCP SDK's client Cairn uses, loaded on the first connection. */
export interface McpSdk {
  Client: typeof Client
  StdioClientTransport: typeof StdioClientTransport
  StreamableHTTPClientTransport: typeof StreamableHTTPClientTransport
}

const PACKAGE = '@modelcontextprotocol/sdk'
let loaded: Promise<McpSdk> | undefined

/**
 * Import the SDK's client (an optional peer dependency). Importing `cairn-agents` or
 * `cairn-agents/mcp` loads none of it; a missing package is a `missing_dependency` error that
 * says how to install it.
 */
export function loadMcpSdk(server: string): Promise<McpSdk> {
  loaded ??= importSdk().catch((err: unknown) => {
    loaded = undefined
    throw err
  })
  return loaded.catch((err: unknown) => {
    if (!isMissing(err)) throw err
    throw new McpServerError({
      code: 'missing_dependency',
      server,
      message: `connecting to MCP server ${server} needs the ${PACKAGE} package, which is not installed; run npm install ${PACKAGE}`,
      cause: err,
    })
  })
}

async function importSdk(): Promise<McpSdk> {
  const [client, stdio, http] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/stdio.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
  ])
  return { Client: client.Client, StdioClientTransport: stdio.StdioClientTransport, StreamableHTTPClientTransport: http.StreamableHTTPClientTransport }
}

function isMissing(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code
  return (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && String((err as Error).message).includes(PACKAGE)
}
