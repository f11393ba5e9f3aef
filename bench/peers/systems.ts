/** Every system the peers benchmark measures, in table order, and the driver of each. */
import type { SystemDriver } from './protocol.js'

/** Who makes it. */
export type Family = 'cairn' | 'langgraph' | 'dbos'
/** Where it keeps its checkpoints. */
export type Backend = 'none' | 'memory' | 'file' | 'sqlite' | 'postgres'

/** One row of the benchmark. */
export interface SystemSpec {
  id: string
  label: string
  family: Family
  backend: Backend
  /** The no-persistence loop its added time is measured against (a baseline has none). */
  baseline: string | null
  /** Whether its data outlives the process, so resume is measured in a fresh one. */
  persistent: boolean
}

const baseline = (family: Family, label: string, id = `${family}-baseline`): SystemSpec => ({ id, label, family, backend: 'none', baseline: null, persistent: false })
const cairn = (backend: Exclude<Backend, 'none'>, store: string, durability: 'async' | 'sync'): SystemSpec => ({
  id: `cairn-${backend}-${durability}`,
  label: `Cairn ${store} (${durability})`,
  family: 'cairn',
  backend,
  baseline: 'cairn-baseline',
  persistent: backend !== 'memory',
})
const langgraph = (backend: 'memory' | 'sqlite' | 'postgres', saver: string, delta: boolean): SystemSpec => ({
  id: `langgraph-${backend}${delta ? '-delta' : ''}`,
  label: `LangGraph ${saver}${delta ? ' + delta channel' : ''}`,
  family: 'langgraph',
  backend,
  baseline: delta ? 'langgraph-delta-baseline' : 'langgraph-baseline',
  persistent: backend !== 'memory',
})

/** LangGraph's graph on `CairnSaver` (`cairn-agents/langgraph`), measured against the graph without a checkpointer. */
const cairnSaver = (backend: 'sqlite' | 'postgres', store: string): SystemSpec => ({
  id: `langgraph-cairn-${backend}`,
  label: `LangGraph CairnSaver (${store})`,
  family: 'langgraph',
  backend,
  baseline: 'langgraph-baseline',
  persistent: true,
})

/** Table order: baselines, then Cairn, then its peers. */
export const SYSTEMS: readonly SystemSpec[] = [
  baseline('cairn', 'Cairn agent.invoke, no persistence'),
  baseline('langgraph', 'LangGraph, no checkpointer'),
  baseline('langgraph', 'LangGraph + delta channel, no checkpointer', 'langgraph-delta-baseline'),
  baseline('dbos', 'DBOS steps as plain calls, no DBOS'),
  cairn('memory', 'MemoryStore', 'async'),
  cairn('memory', 'MemoryStore', 'sync'),
  cairn('file', 'FileStore', 'async'),
  cairn('file', 'FileStore', 'sync'),
  cairn('sqlite', 'SqliteStore', 'async'),
  cairn('sqlite', 'SqliteStore', 'sync'),
  cairn('postgres', 'PostgresStore', 'async'),
  cairn('postgres', 'PostgresStore', 'sync'),
  langgraph('memory', 'MemorySaver', false),
  langgraph('sqlite', 'SqliteSaver', false),
  langgraph('sqlite', 'SqliteSaver', true),
  langgraph('postgres', 'PostgresSaver', false),
  langgraph('postgres', 'PostgresSaver', true),
  cairnSaver('sqlite', 'SqliteStore'),
  cairnSaver('postgres', 'PostgresStore'),
  { id: 'dbos', label: 'DBOS Transact workflow', family: 'dbos', backend: 'postgres', baseline: 'dbos-baseline', persistent: true },
]

/** The spec of `id`. */
export function specOf(id: string): SystemSpec {
  const spec = SYSTEMS.find((s) => s.id === id)
  if (!spec) throw new Error(`unknown system ${id}; known: ${SYSTEMS.map((s) => s.id).join(', ')}`)
  return spec
}

/** Load only the driver's own family, so a child's memory holds one system's code. */
export async function driverFor(id: string): Promise<SystemDriver> {
  switch (specOf(id).family) {
    case 'cairn':
      return (await import('./systems/cairn.js')).cairnDriver(id)
    case 'langgraph':
      return (await import('./systems/langgraph.js')).langgraphDriver(id)
    case 'dbos':
      return (await import('./systems/dbos.js')).dbosDriver(id)
  }
}
