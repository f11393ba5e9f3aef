/**
 * Cairn's optional peer dependencies are loaded here and nowhere else: a driver, a provider's
 * client, LangGraph, OpenTelemetry, tsx. Importing `cairn-agents` loads none of them; the entry
 * point or feature that needs one loads it through {@link importPeer} or {@link requirePeer}, and
 * a package that is not installed becomes a {@link MissingDependencyError} naming it and the
 * command that installs it, instead of a module-resolution error from deep inside Cairn.
 */
import { createRequire } from 'node:module'
import { MissingDependencyError } from './errors.js'

/** The optional packages Cairn loads when a feature needs them. */
export type OptionalPeer = 'better-sqlite3' | 'pg' | 'openai' | '@anthropic-ai/sdk' | '@ai-sdk/provider' | '@langchain/langgraph-checkpoint' | '@opentelemetry/api' | '@modelcontextprotocol/sdk' | 'tsx'

/** Which peer to load, for what, and from where. */
export interface PeerRequest {
  /** The package. */
  name: OptionalPeer
  /** A module inside it (`esm/api` for `tsx/esm/api`); default its main entry. */
  subpath?: string
  /** What needs it, for the message: `cairn-agents/sqlite`, `cairn resume --agents ./agents.ts`. */
  neededBy: string
  /** A development dependency (`npm install -D`). */
  dev?: boolean
}

/**
 * The peer as an ES module: the same instance the application gets from its own `import`, so
 * classes and `instanceof` agree with the application's copy.
 */
export async function importPeer<T>(peer: PeerRequest): Promise<T> {
  const specifier = specifierOf(peer)
  try {
    return (await import(specifier)) as T
  } catch (err) {
    throw missingOr(peer, err)
  }
}

/** The peer through `require`, synchronously: for CommonJS packages (a driver). */
export function requirePeer<T>(peer: PeerRequest): T {
  try {
    return createRequire(import.meta.url)(specifierOf(peer)) as T
  } catch (err) {
    throw missingOr(peer, err)
  }
}

function specifierOf(peer: PeerRequest): string {
  return peer.subpath === undefined ? peer.name : `${peer.name}/${peer.subpath}`
}

/** A MissingDependencyError when `err` says the peer itself cannot be found; any other failure as it is. */
function missingOr(peer: PeerRequest, err: unknown): unknown {
  const code = (err as { code?: unknown } | null)?.code
  const notFound = (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && err instanceof Error && err.message.includes(`'${peer.name}`)
  if (!notFound) return err
  return new MissingDependencyError({ packageName: peer.name, neededBy: peer.neededBy, ...(peer.dev === true ? { dev: true } : {}), cause: err })
}
