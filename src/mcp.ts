/**
 * `cairn-agents/mcp`: the tools of MCP servers as Cairn tools, every call journaled like any
 * tool's (an optional peer dependency, loaded on the first connection:
 * `npm install @modelcontextprotocol/sdk`).
 */
export {
  connectMcp,
  IDEMPOTENCY_META_KEY,
  MCP_APPROVAL,
  McpServerError,
  type McpApprovalPolicy,
  type McpApprovalRequest,
  type McpApprovalResponse,
  type McpHttpServerOptions,
  type McpServerConnection,
  type McpServerOptions,
  type McpServerOptionsBase,
  type McpStdioServerOptions,
  type McpTool,
  type McpToolAnnotations,
  type McpToolOverride,
} from './integrations/mcp/index.js'
