import { readWorkflowCheckpoint, summarize, summarizeHeader, type WorkflowCheckpoint, type WorkflowCheckpointSummary } from './checkpoint.js'
import type { CheckpointStorage, WorkflowStore } from './checkpoint-storage.js'
import { InvalidArgumentError } from '../core/errors.js'

/** Which workflow checkpoints to list, newest first. `before` is an exclusive checkpoint-id cursor. */
export interface ListWorkflowCheckpointsOptions {
  workflowName: string
  runId?: string
  limit?: number
  before?: string
}

/** A retention policy for one workflow's checkpoints. */
export interface PruneWorkflowCheckpointsOptions {
  workflowName: string
  /** Keep this many newest checkpoints of each run (default 1; the latest is always kept). */
  keepLast?: number
  /** Only delete checkpoints created before this time. */
  olderThan?: Date | number
}

const PAGE = 500

/**
 * List a workflow's checkpoints from their headers (no payload is read): id, run, phase,
 * iteration, timestamp, lineage, graph hash, message count, state keys, pending request count.
 *
 * @example
 * ```ts
 * for (const cp of await listWorkflowCheckpoints(storage, { workflowName: 'data-pipeline' })) {
 *   console.log(cp.checkpointId, cp.timestamp, cp.iterationCount, cp.stateKeys)
 * }
 * ```
 */
export async function listWorkflowCheckpoints(storage: WorkflowStore, options: ListWorkflowCheckpointsOptions): Promise<WorkflowCheckpointSummary[]> {
  const { workflowName, runId, limit, before } = options
  const infos = await storage.listCheckpoints({
    workflowName,
    ...(runId === undefined ? {} : { runId }),
    ...(limit === undefined ? {} : { limit }),
    ...(before === undefined ? {} : { before }),
  })
  return infos.flatMap((info) => {
    const summary = info.workflowName === workflowName ? summarizeHeader(info) : undefined
    return summary ? [summary] : []
  })
}

/** Every checkpoint id of a workflow, newest first. */
export async function listWorkflowCheckpointIds(storage: WorkflowStore, options: { workflowName: string }): Promise<string[]> {
  const ids: string[] = []
  let before: string | undefined
  for (;;) {
    const page = await storage.listCheckpoints({ workflowName: options.workflowName, limit: PAGE, ...(before === undefined ? {} : { before }) })
    ids.push(...page.filter((info) => summarizeHeader(info) !== undefined).map((info) => info.id))
    if (page.length < PAGE) return ids
    before = page[page.length - 1]?.id
  }
}

/**
 * Load a workflow checkpoint, its shape checked. Throws `CheckpointNotFoundError` when absent.
 *
 * @example
 * ```ts
 * const cp = await loadWorkflowCheckpoint(storage, checkpointId)
 * console.log(cp.workflowName, cp.iterationCount, cp.graphSignatureHash, cp.messages.length, cp.state)
 * ```
 */
export async function loadWorkflowCheckpoint(storage: WorkflowStore, checkpointId: string): Promise<WorkflowCheckpoint & { runId: string }> {
  const record = await storage.load(checkpointId)
  return { ...readWorkflowCheckpoint(record), runId: record.runId }
}

/** A workflow's newest checkpoint (across its runs), or undefined when it has none. */
export async function getLatestWorkflowCheckpoint(
  storage: WorkflowStore,
  options: { workflowName: string },
): Promise<(WorkflowCheckpoint & { runId: string }) | undefined> {
  const record = await storage.getLatest({ workflowName: options.workflowName })
  return record && { ...readWorkflowCheckpoint(record), runId: record.runId }
}

/** Inspect one checkpoint from its full payload: name, iteration, hash, message count, state keys, pending requests. */
export async function inspectWorkflowCheckpoint(storage: WorkflowStore, checkpointId: string): Promise<WorkflowCheckpointSummary> {
  return summarize(await loadWorkflowCheckpoint(storage, checkpointId))
}

/**
 * Delete a workflow's old checkpoints, run by run: all but the `keepLast` newest of each run
 * (only those older than `olderThan`, when given). The latest checkpoint of a run is always
 * kept, so every run can still be resumed. Returns how many were deleted.
 */
export async function pruneWorkflowCheckpoints(storage: CheckpointStorage, options: PruneWorkflowCheckpointsOptions): Promise<number> {
  const keepLast = Math.max(1, options.keepLast ?? 1)
  if (!Number.isSafeInteger(keepLast)) throw new InvalidArgumentError(`keepLast must be an integer, got ${String(options.keepLast)}`)
  const olderThan = options.olderThan === undefined ? undefined : Number(options.olderThan)
  let deleted = 0
  for (const runId of await runsOf(storage, options.workflowName)) {
    if (storage.prune !== undefined) {
      deleted += (await storage.prune({ runId, keepLast, ...(olderThan === undefined ? {} : { olderThan }) })).checkpointsDeleted
      continue
    }
    const history = await storage.listCheckpoints({ runId })
    for (const info of history.slice(keepLast)) {
      if ((olderThan === undefined || info.createdAt < olderThan) && (await storage.delete(info.id))) deleted++
    }
  }
  return deleted
}

async function runsOf(storage: WorkflowStore, workflowName: string): Promise<string[]> {
  const runs = new Set<string>()
  let before: string | undefined
  for (;;) {
    const page = await storage.listCheckpoints({ workflowName, limit: PAGE, ...(before === undefined ? {} : { before }) })
    for (const info of page) if (info.workflowName === workflowName) runs.add(info.runId)
    if (page.length < PAGE) return [...runs]
    before = page[page.length - 1]?.id
  }
}
