import { canonicalJson, hashValue } from '../core/hash.js'
import { describeGroup, sourcesOf, type EdgeGroup, type FanInGroup } from './edges.js'
import type { Executor } from './executor.js'
import type { GraphSignature } from './checkpoint-types.js'

export type { GraphSignature } from './checkpoint-types.js'

/** A built workflow's executors and edges, as the engine reads them. */
export interface WorkflowGraph {
  name: string
  startId: string
  executors: ReadonlyMap<string, Executor>
  /** Executor ids in the order they joined the graph: the deterministic order of each super step. */
  order: readonly string[]
  groups: readonly EdgeGroup[]
  bySource: ReadonlyMap<string, readonly EdgeGroup[]>
  fanIn: ReadonlyMap<string, FanInGroup>
  signature: GraphSignature
  signatureHash: string
}

/** Assemble the graph of a workflow and sign it. */
export function createGraph(params: { name: string; start: Executor; executors: ReadonlyMap<string, Executor>; groups: readonly EdgeGroup[] }): WorkflowGraph {
  const bySource = new Map<string, EdgeGroup[]>()
  const fanIn = new Map<string, FanInGroup>()
  for (const group of params.groups) {
    for (const source of sourcesOf(group)) bySource.set(source, [...(bySource.get(source) ?? []), group])
    if (group.type === 'fan_in') fanIn.set(group.id, group)
  }
  const signature: GraphSignature = {
    start: params.start.id,
    executors: Object.fromEntries([...params.executors.values()].map((e) => [e.id, e.signature()])),
    edgeGroups: params.groups.map((group) => canonicalJson(describeGroup(group))).sort(),
  }
  return {
    name: params.name,
    startId: params.start.id,
    executors: params.executors,
    order: [...params.executors.keys()],
    groups: params.groups,
    bySource,
    fanIn,
    signature,
    signatureHash: hashValue(signature),
  }
}

/** What differs between a stored signature and the current one, in words. */
export function describeGraphChanges(stored: unknown, current: GraphSignature): string[] {
  if (!isSignature(stored)) return []
  const changes: string[] = []
  if (stored.start !== current.start) changes.push(`the start executor changed from ${stored.start} to ${current.start}`)
  for (const [id, kind] of Object.entries(stored.executors)) {
    const now = current.executors[id]
    if (now === undefined) changes.push(`executor ${id} was removed`)
    else if (now !== kind) changes.push(`executor ${id} changed from ${kind} to ${now}`)
  }
  for (const id of Object.keys(current.executors)) if (!(id in stored.executors)) changes.push(`executor ${id} was added`)
  for (const group of stored.edgeGroups) if (!current.edgeGroups.includes(group)) changes.push(`edge group ${summarizeGroup(group)} was removed or changed`)
  for (const group of current.edgeGroups) if (!stored.edgeGroups.includes(group)) changes.push(`edge group ${summarizeGroup(group)} was added or changed`)
  return changes
}

function summarizeGroup(text: string): string {
  try {
    const group = JSON.parse(text) as { type: string; sources: string[]; targets: string[] }
    return `${group.type} ${group.sources.join(',')} → ${group.targets.join(',')}`
  } catch {
    return text
  }
}

function isSignature(value: unknown): value is GraphSignature {
  const s = value as Partial<GraphSignature> | null
  return (
    typeof s === 'object' &&
    s !== null &&
    typeof s.start === 'string' &&
    typeof s.executors === 'object' &&
    s.executors !== null &&
    Array.isArray(s.edgeGroups) &&
    s.edgeGroups.every((g) => typeof g === 'string')
  )
}
