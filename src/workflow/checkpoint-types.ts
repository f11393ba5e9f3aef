/** The types a workflow checkpoint holds, imported by the checkpoint codec and the graph alike. */

/**
 * What an executor persists in a workflow checkpoint: a plain object of codec-serializable
 * values (Date, Map, Set, bytes and BigInt included).
 */
export type ExecutorState = Record<string, unknown>

/**
 * The topology a checkpoint is tied to: the start executor, each executor's kind, and the edge
 * groups with their condition and selection names. Its hash is stored in every checkpoint.
 */
export interface GraphSignature {
  start: string
  /** Executor id → its `signature()` (the class name by default). */
  executors: Record<string, string>
  /** One canonical JSON text per edge group, sorted. */
  edgeGroups: string[]
}
