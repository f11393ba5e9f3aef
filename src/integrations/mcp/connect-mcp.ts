import { McpConnection } from './connection.js'
import { descriptorSignature, mcpTools, type McpTool } from './mcp-tool.js'
import { resolveOptions, type McpServerOptions } from './options.js'

/** A connected MCP server: its tools, ready to give to an `Agent`. */
export interface McpServerConnection {
  /** The server's name, as given. */
  readonly name: string
  /** Cairn tools calling the server's tools, named `<name>__<tool>` (see `prefix`). */
  readonly tools: readonly McpTool[]
  /** End the connection; a stdio server's process exits. Bounded: a server that ignores it is killed. */
  close(): Promise<void>
}

/**
 * Connect to an MCP server (a command run over stdio, or a Streamable HTTP URL) and make its
 * tools Cairn tools. Every call then goes through a managed run's effect journal like any tool:
 * a tool the server marks `readOnlyHint` or `idempotentHint` is re-run after a crash with the
 * same idempotency key (sent to the server as `_meta['cairn/idempotencyKey']`); any other call
 * whose outcome a crash left unknown becomes an `effect_outcome_unknown` interrupt for a human.
 *
 * The connection is opened now, to list the tools (their names, input schemas and annotations
 * are part of the run's configuration signature); when it is lost, the next call opens it again.
 *
 * @example
 * ```ts
 * const files = await connectMcp({ name: 'files', command: 'node', args: ['files-server.js'], approval: 'destructive' })
 * const agent = new Agent({ model, tools: files.tools })
 * try {
 *   await runner.run(agent, { input: 'Tidy the notes folder', runId: 'tidy' })
 * } finally {
 *   await files.close()
 * }
 * ```
 */
export async function connectMcp(options: McpServerOptions): Promise<McpServerConnection> {
  const resolved = resolveOptions(options)
  const { connection, tools: listed } = await McpConnection.open(resolved, descriptorSignature)
  let tools: McpTool[]
  try {
    tools = mcpTools(connection, listed)
  } catch (err) {
    await connection.close()
    throw err
  }
  return { name: resolved.name, tools, close: () => connection.close() }
}
