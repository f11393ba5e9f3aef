import { LeaseLostError } from '../core/errors.js'
import type { CheckpointInput, RunRecord, RunStore, UpdateRunInput } from '../store/checkpoint-store.js'
import { RunOwnership, type WaitForOwner } from '../runner/run-ownership.js'
import type { WorkflowStore } from './checkpoint-storage.js'

/** How long a workflow run's lease lasts between two renewals when no `leaseMs` is given. */
export const DEFAULT_WORKFLOW_LEASE_MS = 60_000

/** A workflow run's hold on its run: the ownership, and the store view whose writes carry its fence. */
export interface OwnedWorkflowRun {
  ownership: RunOwnership
  storage: WorkflowStore
}

/** A store with the lease protocol: what a workflow run needs to own its run. */
type LeasedStore = WorkflowStore & Pick<RunStore, 'leases' | 'write' | 'getRun'>

/**
 * Take the lease of a workflow run, when its store has the lease protocol (every Cairn store
 * does; a worker's fenced view and a store of your own may not, and run as before). A live owner
 * elsewhere makes this throw `RunBusyError` at once, or wait with `waitForOwner`; a run whose owner
 * died is taken over. The run row is created with the lease when it does not exist yet.
 */
export async function ownWorkflowRun(params: {
  storage: WorkflowStore | undefined
  runId: string
  workflowName: string
  leaseMs: number
  waitForOwner: WaitForOwner | undefined
}): Promise<OwnedWorkflowRun | undefined> {
  const store = leasedStore(params.storage)
  if (store === undefined) return undefined
  const ownership = await RunOwnership.acquire({
    store: store as RunStore,
    runId: params.runId,
    leaseMs: params.leaseMs,
    create: { workflowName: params.workflowName },
    ...(params.waitForOwner === undefined ? {} : { waitForOwner: params.waitForOwner }),
  })
  // `create` makes a missing run; an undefined ownership means the run vanished in between.
  if (ownership === undefined) return undefined
  return { ownership, storage: fencedView(store, ownership) }
}

function leasedStore(storage: WorkflowStore | undefined): LeasedStore | undefined {
  const candidate = storage as Partial<LeasedStore> | undefined
  if (candidate?.leases === undefined || typeof candidate.write !== 'function' || typeof candidate.getRun !== 'function') return undefined
  return candidate as LeasedStore
}

/**
 * The store as the owning execution writes to it: every checkpoint and run change carries the
 * lease's fence, so once another execution took the run over nothing more is written and the
 * write throws `LeaseLostError`. Reads go straight through.
 */
function fencedView(store: LeasedStore, ownership: RunOwnership): WorkflowStore {
  const guarded = async <T>(write: () => Promise<T>): Promise<T> => {
    if (ownership.lost) throw ownership.lost
    try {
      return await write()
    } catch (error) {
      if (error instanceof LeaseLostError) ownership.noteLost(error)
      throw error
    }
  }
  const view: WorkflowStore = {
    load: store.load.bind(store),
    listCheckpoints: store.listCheckpoints.bind(store),
    getLatest: store.getLatest.bind(store),
    save: <P>(record: CheckpointInput<P>) =>
      guarded(async () => {
        const [id] = await store.write({ runId: record.runId, checkpoints: [record], fence: ownership.fence })
        return id!
      }),
  }
  if (store.updateRun === undefined) return view
  return {
    ...view,
    updateRun: (runId: string, patch: UpdateRunInput): Promise<RunRecord> =>
      guarded(async () => {
        await store.write({ runId, run: patch, fence: ownership.fence })
        const run = await store.getRun(runId)
        return run!
      }),
  }
}
