import { sha256 } from '../core/hash.js'
import { InvalidArgumentError } from '../core/errors.js'

/** Decides whether a message goes along an edge. Called when the message is sent. */
export type EdgeCondition<M = unknown> = (message: M) => boolean | Promise<boolean>

/** Picks which targets of a fan-out get a message. Called when the message is sent. */
export type FanOutSelection<M = unknown> = (message: M, targetIds: readonly string[]) => readonly string[] | Promise<readonly string[]>

/** One case of a switch-case edge group: the first case whose condition holds gets the message. */
export interface SwitchCaseRoute {
  condition: EdgeCondition
  /** Identifies the condition in the graph signature (default: the function's name, else its source). */
  conditionName: string
  target: string
}

/**
 * The edge groups a workflow is made of. `id` is stable for the same graph, so a fan-in group's
 * waiting messages can be persisted and found again after a restore.
 */
export type EdgeGroup =
  | { type: 'single'; id: string; source: string; target: string; condition?: EdgeCondition; conditionName?: string }
  | { type: 'fan_out'; id: string; source: string; targets: string[]; selection?: FanOutSelection; selectionName?: string }
  | { type: 'fan_in'; id: string; sources: string[]; target: string }
  | { type: 'switch_case'; id: string; source: string; cases: SwitchCaseRoute[]; defaultTarget?: string }

/** A fan-in edge group. */
export type FanInGroup = Extract<EdgeGroup, { type: 'fan_in' }>

/** The sources of a group. */
export function sourcesOf(group: EdgeGroup): string[] {
  return group.type === 'fan_in' ? group.sources : [group.source]
}

/** Every target a group can reach. */
export function targetsOf(group: EdgeGroup): string[] {
  switch (group.type) {
    case 'single':
    case 'fan_in':
      return [group.target]
    case 'fan_out':
      return group.targets
    case 'switch_case':
      return [...group.cases.map((c) => c.target), ...(group.defaultTarget === undefined ? [] : [group.defaultTarget])]
  }
}

/** The targets a message sent into `group` goes to. */
export async function routeThrough(group: EdgeGroup, message: unknown): Promise<string[]> {
  switch (group.type) {
    case 'single':
      return group.condition === undefined || (await group.condition(message)) ? [group.target] : []
    case 'fan_in':
      return [group.target]
    case 'fan_out': {
      if (group.selection === undefined) return group.targets
      const picked = await group.selection(message, group.targets)
      const unknown = picked.filter((id) => !group.targets.includes(id))
      if (unknown.length > 0) {
        throw new InvalidArgumentError(`the selection of fan-out ${group.id} picked ${unknown.join(', ')}, which are not among its targets ${group.targets.join(', ')}`)
      }
      return group.targets.filter((id) => picked.includes(id))
    }
    case 'switch_case': {
      for (const route of group.cases) if (await route.condition(message)) return [route.target]
      return group.defaultTarget === undefined ? [] : [group.defaultTarget]
    }
  }
}

/**
 * How a condition or selection function is identified in the graph signature: the `name` given,
 * else the function's own name, else (an anonymous arrow function) a hash of its source text.
 * Name your conditions to keep checkpoints compatible when their code is reformatted.
 */
export function functionName(fn: (...args: never[]) => unknown, given: string | undefined, generic: string): string {
  if (given !== undefined) {
    if (typeof given !== 'string' || given === '') throw new InvalidArgumentError(`a ${generic} name is a non-empty string`)
    return given
  }
  if (typeof fn !== 'function') throw new InvalidArgumentError(`a ${generic} must be a function`)
  if (fn.name !== '' && fn.name !== generic) return fn.name
  return `source:${sha256(fn.toString()).slice(0, 16)}`
}

/** The part of the graph signature that describes one edge group (sorted, names only). */
export function describeGroup(group: EdgeGroup): Record<string, unknown> {
  const base = { type: group.type, sources: [...sourcesOf(group)].sort(), targets: [...targetsOf(group)].sort() }
  switch (group.type) {
    case 'single':
      return { ...base, edges: [{ source: group.source, target: group.target, condition: group.conditionName ?? null }] }
    case 'fan_out':
      return { ...base, edges: group.targets.map((t) => ({ source: group.source, target: t, condition: null })), selection: group.selectionName ?? null }
    case 'fan_in':
      return { ...base, edges: group.sources.map((s) => ({ source: s, target: group.target, condition: null })) }
    case 'switch_case':
      return {
        ...base,
        // Case order matters (the first match wins), so cases keep their order.
        cases: group.cases.map((c) => ({ target: c.target, condition: c.conditionName })),
        default: group.defaultTarget ?? null,
      }
  }
}

/** The executors the edge groups leaving `executorId` can reach (`bySource` as a graph keeps it). */
export function reachableFrom(bySource: ReadonlyMap<string, readonly EdgeGroup[]>, executorId: string): string[] {
  return [...new Set((bySource.get(executorId) ?? []).flatMap(targetsOf))]
}
