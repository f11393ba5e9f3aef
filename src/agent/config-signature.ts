import { ConfigMismatchError } from '../core/errors.js'
import { hashValue, sha256 } from '../core/hash.js'
import type { Tool } from '../tools/tool.js'

/**
 * The configuration an agent was running under, as hashes: what a resume compares so that a
 * checkpoint is not silently continued by a different agent.
 */
export interface ConfigSignature {
  /** Hash of everything below. */
  hash: string
  modelId: string
  systemPrompt: string
  /** Tool name → hash of its spec (name, description, input schema; an MCP tool adds its annotations). */
  tools: Record<string, string>
}

/** Sign an agent's configuration. */
export function signConfig(params: { modelId: string; systemPrompt: string | undefined; tools: readonly Tool[] }): ConfigSignature {
  const parts = {
    modelId: params.modelId,
    systemPrompt: sha256(params.systemPrompt ?? ''),
    tools: Object.fromEntries(params.tools.map((t) => [t.name, t.signature])),
  }
  return { hash: hashValue(parts), ...parts }
}

/** Throw a {@link ConfigMismatchError} naming every difference, unless there is none. */
export function assertSameConfig(stored: ConfigSignature, current: ConfigSignature): void {
  if (stored.hash === current.hash) return
  const differences: string[] = []
  if (stored.modelId !== current.modelId) differences.push(`model changed from ${stored.modelId} to ${current.modelId}`)
  if (stored.systemPrompt !== current.systemPrompt) differences.push('system prompt changed')
  for (const name of Object.keys(stored.tools)) {
    if (!(name in current.tools)) differences.push(`tool ${name} was removed`)
    else if (stored.tools[name] !== current.tools[name]) differences.push(`tool ${name} changed (its description, input schema or, for an MCP tool, annotations)`)
  }
  for (const name of Object.keys(current.tools)) if (!(name in stored.tools)) differences.push(`tool ${name} was added`)
  throw new ConfigMismatchError({
    message: `this checkpoint was written by an agent with a different configuration: ${differences.join('; ') || 'signature differs'}. Build the agent with the same model, tools and system prompt, or pass allowConfigChange: true to resume anyway`,
    expected: stored.hash,
    actual: current.hash,
  })
}
