import type { StoreAdmin, StoreReader, StoreWriter } from '../store/checkpoint-store.js'
import type { WorkflowWaits } from './waits.js'

/**
 * What the workflow engine reads and writes while it runs: any `RunStore` or `CheckpointStore`
 * (`MemoryStore`, `FileStore`, `SqliteStore`, a worker's fenced view, …), or your own object
 * with the four methods it needs. With `updateRun` the run's status follows the workflow
 * (`paused` while requests wait, `completed`, `failed`). With the lease protocol as well
 * (`leases`, `write` and `getRun`, as every Cairn store has), a run owns its run while it executes
 * and fences its writes with the lease's epoch; without it, the run takes no lease. With `waits`
 * (timers and events), executors can sleep and wait for events (`ctx.sleep`, `ctx.waitForEvent`).
 */
export type WorkflowStore = Pick<StoreReader, 'load' | 'listCheckpoints' | 'getLatest'> & Pick<StoreWriter, 'save'> & Partial<Pick<StoreWriter, 'updateRun'>> & { readonly waits?: WorkflowWaits | undefined }

/**
 * A {@link WorkflowStore} that can also delete checkpoints: what `workflow.deleteCheckpoint` and
 * `pruneWorkflowCheckpoints` need. With `prune` it is used for retention.
 */
export type CheckpointStorage = WorkflowStore & Pick<StoreAdmin, 'delete'> & Partial<Pick<StoreAdmin, 'prune'>>
