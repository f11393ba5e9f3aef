import type { JsonValue } from '../../core/codec.js'
import { hashValue } from '../../core/hash.js'
import type { ToolSpec } from '../../model/model.js'
import { validateJsonSchema } from '../../tools/json-schema.js'
import { errorResult, type Tool } from '../../tools/tool.js'
import type { McpConnection, McpToolDescriptor } from './connection.js'
import { McpServerError } from './errors.js'
import type { McpToolAnnotations, ResolvedOptions } from './options.js'
import { toToolResult } from './results.js'

/** The name of the interrupt a call raises when it waits for a human's approval. */
export const MCP_APPROVAL = 'mcp_approval'

/**
 * The answer to an `mcp_approval` interrupt: `'approve'` sends the call to the server; `'deny'`
 * (or `{ deny: reason }`, whose reason the model is told) gives the model an error result instead.
 */
export type McpApprovalResponse = 'approve' | 'deny' | { deny: string }

/** What an approval interrupt tells whoever answers it (its `reason`). */
export interface McpApprovalRequest {
  server: string
  /** The tool's name on the server. */
  tool: string
  input: JsonValue
  destructive: boolean
  message: string
}

/** A Cairn tool that calls a tool of an MCP server. */
export interface McpTool extends Tool {
  /** The server's name (as given to `connectMcp`). */
  readonly server: string
  /** The tool's name on the server (`name` is this with the server's prefix). */
  readonly mcpName: string
  /** The server's hints about the tool, as listed. */
  readonly annotations: McpToolAnnotations
  /** Not read-only and not marked `destructiveHint: false` (MCP's reading of the hints). */
  readonly destructive: boolean
  /** Whether a call waits for a human's approval first (an `mcp_approval` interrupt). */
  readonly requiresApproval: boolean
}

const NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/

/** The Cairn tools for a server's listed tools, after its `include` filter. */
export function mcpTools(connection: McpConnection, listed: readonly McpToolDescriptor[]): McpTool[] {
  const { options } = connection
  const offered = options.include === undefined ? listed : listed.filter((tool) => options.include!.has(tool.name))
  const missing = [...(options.include ?? [])].filter((name) => !listed.some((tool) => tool.name === name))
  if (missing.length > 0) throw toolsError(options, `MCP server ${options.name} offers no tool ${missing.join(', ')} (include); it offers ${listed.map((t) => t.name).join(', ') || 'none'}`)
  const unknown = Object.keys(options.overrides).filter((name) => !listed.some((tool) => tool.name === name))
  if (unknown.length > 0) throw toolsError(options, `MCP server ${options.name} offers no tool ${unknown.join(', ')} (tools overrides); it offers ${listed.map((t) => t.name).join(', ') || 'none'}`)
  const tools = offered.map((descriptor) => mcpTool(connection, descriptor))
  const seen = new Map<string, string>()
  for (const tool of tools) {
    const other = seen.get(tool.name)
    if (other !== undefined) throw toolsError(options, `MCP server ${options.name}: tools ${other} and ${tool.mcpName} both become ${tool.name}; leave one out with include`)
    seen.set(tool.name, tool.mcpName)
  }
  return tools
}

/** Hash of what the server says about a tool: name, description, schemas and hints. */
export function descriptorSignature(tool: McpToolDescriptor): string {
  return hashValue({
    name: tool.name,
    description: tool.description ?? null,
    inputSchema: tool.inputSchema,
    outputSchema: tool.outputSchema ?? null,
    annotations: hintsOf(tool.annotations),
  })
}

function mcpTool(connection: McpConnection, descriptor: McpToolDescriptor): McpTool {
  const { options } = connection
  const name = cairnName(options, descriptor.name)
  const annotations = hintsOf(descriptor.annotations)
  const override = options.overrides[descriptor.name] ?? {}
  const destructive = annotations.readOnlyHint !== true && annotations.destructiveHint !== false
  const idempotent = override.idempotent ?? (annotations.readOnlyHint === true || annotations.idempotentHint === true)
  const requiresApproval = override.approval ?? (options.approval === 'always' || (options.approval === 'destructive' && destructive))
  const description = descriptor.description ?? descriptor.title ?? annotations.title ?? `Tool ${descriptor.name} of MCP server ${options.name}`
  // `$schema` names the dialect; it is not part of what the model is asked for.
  const { $schema: _dialect, ...inputSchema } = descriptor.inputSchema
  const spec: ToolSpec = { name, description, inputSchema }
  return {
    name,
    description,
    idempotent,
    spec,
    signature: hashValue({ spec, mcp: descriptorSignature(descriptor) }),
    server: options.name,
    mcpName: descriptor.name,
    annotations,
    destructive,
    requiresApproval,
    async run(toolUse, ctx) {
      const problem = validateJsonSchema(inputSchema, toolUse.input)
      if (problem !== undefined) return errorResult(toolUse.toolUseId, `Invalid input for tool ${name}: ${problem}`)
      if (requiresApproval) {
        const request: McpApprovalRequest = {
          server: options.name,
          tool: descriptor.name,
          input: toolUse.input,
          destructive,
          message: `${name} calls tool ${descriptor.name} of MCP server ${options.name}${destructive ? ', which may change or delete data' : ''}. Answer 'approve' to run it or 'deny' (or { deny: reason }) to refuse.`,
        }
        const answer = ctx.interrupt<McpApprovalResponse>({ name: MCP_APPROVAL, reason: request as unknown as JsonValue })
        if (answer !== 'approve') return errorResult(toolUse.toolUseId, denial(name, answer))
      }
      const result = await connection.call({ tool: descriptor.name, input: toolUse.input, idempotencyKey: ctx.idempotencyKey, signal: ctx.signal })
      return toToolResult(toolUse.toolUseId, result, name)
    },
  }
}

function cairnName(options: ResolvedOptions, mcpName: string): string {
  // MCP allows dots and slashes in tool names; model providers do not.
  const name = `${options.prefix}${mcpName.replace(/[^A-Za-z0-9_-]/g, '_')}`
  if (!NAME_PATTERN.test(name)) {
    throw toolsError(options, `MCP server ${options.name}: tool ${mcpName} would be named ${name}, longer than the 64 characters model providers accept; give the server a shorter name or prefix, or leave the tool out with include`)
  }
  return name
}

function hintsOf(annotations: McpToolAnnotations | undefined): McpToolAnnotations {
  const hints: McpToolAnnotations = {}
  for (const key of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'] as const) {
    if (typeof annotations?.[key] === 'boolean') hints[key] = annotations[key]
  }
  if (typeof annotations?.title === 'string') hints.title = annotations.title
  return hints
}

function denial(name: string, answer: unknown): string {
  const reason = typeof answer === 'object' && answer !== null && typeof (answer as { deny?: unknown }).deny === 'string' ? `: ${(answer as { deny: string }).deny}` : ''
  return `The call of ${name} was not approved by a human, so it did not run${reason}`
}

function toolsError(options: ResolvedOptions, message: string): McpServerError {
  return new McpServerError({ code: 'mcp_tools', server: options.name, message })
}
