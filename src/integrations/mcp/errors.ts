import { CairnError, type CairnErrorCode } from '../../core/errors.js'

/**
 * Something went wrong between Cairn and an MCP server. `code` says what:
 * - `mcp_connection`: the server could not be started or reached, did not answer the handshake
 *   in time, or closed the connection (a server process that died);
 * - `mcp_call`: a tool call timed out or the server answered it with a protocol error;
 * - `mcp_tools`: the server's tools cannot be offered as they are (two names collide, a name
 *   is not one a model accepts) or changed while the connection was reopened.
 *
 * Inside a tool call the error becomes the error result the model sees (and the journal
 * records); from `connectMcp` it is thrown to the caller.
 */
export class McpServerError extends CairnError {
  /** The server's name, as given to `connectMcp`. */
  readonly server: string
  /** The MCP tool (its name on the server), when the error is about one call. */
  readonly tool: string | undefined

  constructor(params: { code: Extract<CairnErrorCode, 'mcp_connection' | 'mcp_call' | 'mcp_tools'>; server: string; tool?: string; message: string; cause?: unknown }) {
    super(params.code, params.message, { cause: params.cause })
    this.server = params.server
    this.tool = params.tool
  }
}
