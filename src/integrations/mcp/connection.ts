import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import type { JsonObject } from '../../core/codec.js'
import { McpServerError } from './errors.js'
import { loadMcpSdk, type McpSdk } from './load-sdk.js'
import type { McpToolAnnotations, ResolvedOptions } from './options.js'
import type { McpCallResult } from './results.js'

/** A tool as the server lists it. */
export interface McpToolDescriptor {
  name: string
  title?: string
  description?: string
  inputSchema: JsonObject
  outputSchema?: JsonObject
  annotations?: McpToolAnnotations
}

/** The request metadata key that carries a call's idempotency key to the server. */
export const IDEMPOTENCY_META_KEY = 'cairn/idempotencyKey'

/** Where a server's tool list stops: a server paging forever is refused. */
const MAX_LIST_PAGES = 100

/** JSON-RPC error codes of the SDK: the connection closed, a request timed out. */
const CONNECTION_CLOSED = -32000
const REQUEST_TIMEOUT = -32001

/**
 * One MCP server's client connection. Opened by `connectMcp`; when it is lost (the server process
 * died, the HTTP session ended) the next call opens it again, lazily, and checks that the server
 * still offers the tools the agent was built with.
 */
export class McpConnection {
  readonly options: ResolvedOptions
  readonly #sdk: McpSdk
  #client: Client | undefined
  #opening: Promise<Client> | undefined
  #closed = false
  /** Signatures of the tools the first listing offered, by name on the server. */
  #offered: ReadonlyMap<string, string> | undefined
  readonly #signatureOf: (tool: McpToolDescriptor) => string

  private constructor(options: ResolvedOptions, sdk: McpSdk, signatureOf: (tool: McpToolDescriptor) => string) {
    this.options = options
    this.#sdk = sdk
    this.#signatureOf = signatureOf
  }

  /** Connect and list the server's tools (each bounded by `connectTimeoutMs`). */
  static async open(options: ResolvedOptions, signatureOf: (tool: McpToolDescriptor) => string): Promise<{ connection: McpConnection; tools: McpToolDescriptor[] }> {
    const connection = new McpConnection(options, await loadMcpSdk(options.name), signatureOf)
    const client = await connection.#connect()
    try {
      const tools = await connection.#listTools(client)
      connection.#offered = new Map(tools.map((tool) => [tool.name, signatureOf(tool)]))
      connection.#client = client
      return { connection, tools }
    } catch (err) {
      await client.close().catch(() => {})
      throw err
    }
  }

  /**
   * Call a tool, passing the idempotency key in the request's `_meta`. A timeout, a protocol
   * error or a lost connection is thrown as an {@link McpServerError}; a cancelled `signal`
   * rethrows the cancellation.
   */
  async call(params: { tool: string; input: unknown; idempotencyKey: string; signal: AbortSignal }): Promise<McpCallResult> {
    const client = await this.#ready()
    const { tool } = params
    try {
      const request = { name: tool, arguments: params.input as Record<string, unknown>, _meta: { [IDEMPOTENCY_META_KEY]: params.idempotencyKey } }
      return (await client.callTool(request, undefined, { timeout: this.options.callTimeoutMs, signal: params.signal })) as McpCallResult
    } catch (err) {
      if (params.signal.aborted) throw err
      throw this.#callFailure(client, tool, err)
    }
  }

  /** End the connection (a stdio server's process exits). Calls after this fail. */
  async close(): Promise<void> {
    this.#closed = true
    const client = this.#client ?? (await this.#opening?.catch(() => undefined))
    this.#client = undefined
    await client?.close()
  }

  async #ready(): Promise<Client> {
    if (this.#closed) throw this.#error('mcp_connection', `the connection to MCP server ${this.options.name} was closed (server.close()); connect again with connectMcp`)
    if (this.#client) return this.#client
    this.#opening ??= this.#reopen().finally(() => (this.#opening = undefined))
    return this.#opening
  }

  /** Open the connection again and check the server still offers the same tools. */
  async #reopen(): Promise<Client> {
    const client = await this.#connect()
    try {
      const changed = this.#changes(await this.#listTools(client))
      if (changed.length > 0) {
        throw this.#error(
          'mcp_tools',
          `MCP server ${this.options.name} offers other tools than when the agent was built (${changed.join('; ')}); Cairn will not call it with the old definitions. Build the agent again with connectMcp (a resume then needs allowConfigChange: true)`,
        )
      }
    } catch (err) {
      await client.close().catch(() => {})
      throw err
    }
    if (this.#closed) {
      await client.close()
      throw this.#error('mcp_connection', `the connection to MCP server ${this.options.name} was closed (server.close()); connect again with connectMcp`)
    }
    this.#client = client
    return client
  }

  #changes(tools: readonly McpToolDescriptor[]): string[] {
    const now = new Map(tools.map((tool) => [tool.name, this.#signatureOf(tool)]))
    const changes: string[] = []
    for (const [name, signature] of this.#offered ?? []) {
      if (!now.has(name)) changes.push(`${name} was removed`)
      else if (now.get(name) !== signature) changes.push(`${name} changed`)
    }
    for (const name of now.keys()) if (!this.#offered?.has(name)) changes.push(`${name} was added`)
    return changes
  }

  async #connect(): Promise<Client> {
    const { name, connectTimeoutMs } = this.options
    const client = new this.#sdk.Client({ name: 'cairn', version: '1' }, { capabilities: {} })
    client.onclose = () => {
      if (this.#client === client) this.#client = undefined
    }
    // A transport error outside a request (a server writing garbage) closes the connection; calls see it.
    client.onerror = () => {}
    const transport = this.#transport()
    try {
      await bounded(client.connect(transport, { timeout: connectTimeoutMs }), connectTimeoutMs)
      return client
    } catch (err) {
      await transport.close().catch(() => {})
      const timedOut = err instanceof TimeoutError || (err as { code?: unknown } | undefined)?.code === REQUEST_TIMEOUT
      const reason = timedOut ? `did not complete the MCP handshake within ${connectTimeoutMs} ms (connectTimeoutMs)` : `could not be reached: ${(err as Error)?.message ?? String(err)}`
      throw this.#error('mcp_connection', `MCP server ${name} (${this.#where()}) ${reason}; check that it starts and speaks MCP`, undefined, err)
    }
  }

  async #listTools(client: Client): Promise<McpToolDescriptor[]> {
    const { name, connectTimeoutMs } = this.options
    const tools: McpToolDescriptor[] = []
    let cursor: string | undefined
    for (let page = 0; page < MAX_LIST_PAGES; page++) {
      let listed: Awaited<ReturnType<Client['listTools']>>
      try {
        listed = await bounded(client.listTools(cursor === undefined ? {} : { cursor }, { timeout: connectTimeoutMs }), connectTimeoutMs)
      } catch (err) {
        throw this.#error('mcp_connection', `MCP server ${name} did not list its tools within ${connectTimeoutMs} ms: ${(err as Error)?.message ?? String(err)}`, undefined, err)
      }
      tools.push(...(listed.tools as McpToolDescriptor[]))
      cursor = listed.nextCursor
      if (cursor === undefined) return tools
    }
    throw this.#error('mcp_tools', `MCP server ${name} listed more than ${MAX_LIST_PAGES} pages of tools; offer fewer tools`)
  }

  #transport(): Transport {
    const { transport } = this.options
    if (transport.kind === 'http') {
      return new this.#sdk.StreamableHTTPClientTransport(transport.url, { requestInit: { headers: { ...transport.headers } } })
    }
    const { command, args, env, cwd, stderr } = transport.options
    return new this.#sdk.StdioClientTransport({
      command,
      args: [...(args ?? [])],
      ...(env === undefined ? {} : { env: { ...env } }),
      ...(cwd === undefined ? {} : { cwd }),
      stderr: stderr ?? 'inherit',
    })
  }

  #callFailure(client: Client, tool: string, err: unknown): McpServerError {
    const { name, callTimeoutMs } = this.options
    const code = (err as { code?: unknown } | undefined)?.code
    const message = (err as Error)?.message ?? String(err)
    if (code === REQUEST_TIMEOUT) {
      return this.#error('mcp_call', `MCP tool ${tool} of server ${name} did not answer within ${callTimeoutMs} ms (callTimeoutMs); the request was cancelled and its outcome is unknown`, tool, err)
    }
    if (typeof code === 'number' && code !== CONNECTION_CLOSED) {
      return this.#error('mcp_call', `MCP server ${name} answered the call of tool ${tool} with a protocol error: ${message}`, tool, err)
    }
    // The connection is gone (a dead server process, a dropped HTTP session): the next call opens a new one.
    if (this.#client === client) this.#client = undefined
    void client.close().catch(() => {})
    return this.#error(
      'mcp_connection',
      `the connection to MCP server ${name} was lost during the call of tool ${tool} (${message}); the outcome of the call is unknown. The next call reconnects`,
      tool,
      err,
    )
  }

  #where(): string {
    const { transport } = this.options
    return transport.kind === 'http' ? transport.url.href : [transport.options.command, ...(transport.options.args ?? [])].join(' ')
  }

  #error(code: 'mcp_connection' | 'mcp_call' | 'mcp_tools', message: string, tool?: string, cause?: unknown): McpServerError {
    return new McpServerError({ code, server: this.options.name, message, ...(tool === undefined ? {} : { tool }), ...(cause === undefined ? {} : { cause }) })
  }
}

class TimeoutError extends Error {}

/** `promise`, or a rejection once `ms` have passed. */
async function bounded<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`timed out after ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}
