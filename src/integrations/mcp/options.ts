import { InvalidArgumentError } from '../../core/errors.js'

/** When a call of a server's tool waits for a human's approval first. */
export type McpApprovalPolicy = 'never' | 'destructive' | 'always'

/** What the server says about a tool (the MCP tool annotations Cairn reads). All are hints. */
export interface McpToolAnnotations {
  title?: string
  /** The tool does not change its environment. */
  readOnlyHint?: boolean
  /** The tool may delete or overwrite (MCP's default for a tool that is not read-only). */
  destructiveHint?: boolean
  /** Calling it again with the same arguments has no further effect. */
  idempotentHint?: boolean
  /** The tool reaches outside the server (the web, other systems). */
  openWorldHint?: boolean
}

/** Corrections for one tool of a server, by its name on the server. */
export interface McpToolOverride {
  /**
   * Whether running the call twice with the same idempotency key has the effect of running it
   * once. Overrides the server's hints (by default: idempotent when `readOnlyHint` or
   * `idempotentHint` is true).
   */
  idempotent?: boolean
  /** Whether a call waits for a human's approval first. Overrides the server's `approval` policy. */
  approval?: boolean
}

/** What every MCP server connection takes. */
export interface McpServerOptionsBase {
  /**
   * The server's name: it prefixes its tools' names (`files__read_file`), so tools of two
   * servers never collide, and the run's effect journal shows which server each call went to.
   * 1-40 letters, digits, `_` or `-`.
   */
  name: string
  /** Put before each tool's name. Default `<name>__`; `''` offers the tools under their own names. */
  prefix?: string
  /** Offer only these tools (names on the server). Default: all of them. */
  include?: readonly string[]
  /** How long starting or reaching the server and its handshake and tool listing may take. Default 10 s. */
  connectTimeoutMs?: number
  /**
   * How long one tool call may take. Cairn then cancels the request and the model sees an error
   * result saying the outcome is unknown. Default 60 s.
   */
  callTimeoutMs?: number
  /**
   * Which calls wait for a human's approval (an `mcp_approval` interrupt) before they reach the
   * server: `'never'` (default), `'destructive'` (tools that are not read-only and do not say
   * `destructiveHint: false`), or `'always'`. A tool's own `approval` override wins.
   */
  approval?: McpApprovalPolicy
  /** Corrections for tools whose annotations are wrong or missing, by their name on the server. */
  tools?: Readonly<Record<string, McpToolOverride>>
}

/** A server Cairn starts as a child process and speaks to over its stdin and stdout. */
export interface McpStdioServerOptions extends McpServerOptionsBase {
  command: string
  args?: readonly string[]
  /**
   * Variables added to the child's environment. The child does not inherit the whole
   * environment of this process, only a few safe variables (PATH, HOME, …) plus these.
   */
  env?: Readonly<Record<string, string>>
  cwd?: string
  /** The child's standard error: shown in this process's (`'inherit'`, default) or discarded. */
  stderr?: 'inherit' | 'ignore'
}

/** A server reached over Streamable HTTP. */
export interface McpHttpServerOptions extends McpServerOptionsBase {
  url: string | URL
  /** Sent with every request (an `Authorization` header, say). */
  headers?: Readonly<Record<string, string>>
}

/** How to reach an MCP server. */
export type McpServerOptions = McpStdioServerOptions | McpHttpServerOptions

/** The options with defaults applied and checked. */
export interface ResolvedOptions {
  name: string
  prefix: string
  include: ReadonlySet<string> | undefined
  connectTimeoutMs: number
  callTimeoutMs: number
  approval: McpApprovalPolicy
  overrides: Readonly<Record<string, McpToolOverride>>
  transport: { kind: 'stdio'; options: McpStdioServerOptions } | { kind: 'http'; url: URL; headers: Readonly<Record<string, string>> }
}

const SERVER_NAME = /^[A-Za-z0-9_-]{1,40}$/
const POLICIES: readonly McpApprovalPolicy[] = ['never', 'destructive', 'always']

/** Apply defaults and reject options that cannot work, naming the option. */
export function resolveOptions(options: McpServerOptions): ResolvedOptions {
  if (typeof options?.name !== 'string' || !SERVER_NAME.test(options.name)) {
    throw new InvalidArgumentError(`connectMcp needs a server name of 1-40 letters, digits, _ or - (it prefixes the tools' names), got ${JSON.stringify(options?.name)}`)
  }
  const { name } = options
  const hasCommand = 'command' in options && options.command !== undefined
  const hasUrl = 'url' in options && options.url !== undefined
  if (hasCommand === hasUrl) throw new InvalidArgumentError(`MCP server ${name}: give either command (a stdio server) or url (a Streamable HTTP server)`)
  const approval = options.approval ?? 'never'
  if (!POLICIES.includes(approval)) throw new InvalidArgumentError(`MCP server ${name}: approval must be one of ${POLICIES.join(', ')}, got ${JSON.stringify(approval)}`)
  const prefix = options.prefix ?? `${name}__`
  if (typeof prefix !== 'string' || !/^[A-Za-z0-9_-]*$/.test(prefix)) throw new InvalidArgumentError(`MCP server ${name}: prefix may hold only letters, digits, _ or -, got ${JSON.stringify(prefix)}`)
  return {
    name,
    prefix,
    include: options.include === undefined ? undefined : new Set(options.include),
    connectTimeoutMs: positive(options.connectTimeoutMs, 10_000, `MCP server ${name}: connectTimeoutMs`),
    callTimeoutMs: positive(options.callTimeoutMs, 60_000, `MCP server ${name}: callTimeoutMs`),
    approval,
    overrides: options.tools ?? {},
    transport: hasCommand ? { kind: 'stdio', options: options } : httpTransport(options as McpHttpServerOptions),
  }
}

function httpTransport(options: McpHttpServerOptions): ResolvedOptions['transport'] {
  let url: URL
  try {
    url = new URL(options.url)
  } catch (err) {
    throw new InvalidArgumentError(`MCP server ${options.name}: url ${JSON.stringify(String(options.url))} is not a URL`, { cause: err })
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidArgumentError(`MCP server ${options.name}: url must be http: or https:, got ${url.protocol}`)
  return { kind: 'http', url, headers: options.headers ?? {} }
}

function positive(value: number | undefined, fallback: number, what: string): number {
  if (value === undefined) return fallback
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) throw new InvalidArgumentError(`${what} must be a positive number of ms, got ${String(value)}`)
  return value
}
