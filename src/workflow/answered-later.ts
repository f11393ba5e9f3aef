import { readWorkflowCheckpoint } from './checkpoint.js'
import type { WorkflowStore } from './checkpoint-storage.js'
import { WorkflowError } from './errors.js'

const PAGE = 100

/**
 * Refuse answers, given from an older checkpoint, to requests a later checkpoint of the same
 * run shows answered: a request leaves the pending set only when it is answered, so a later
 * `responses` checkpoint without it means the run already went on with an answer. Answering it
 * again would start a second branch of the run; `allowReanswer` lets a caller do so on purpose.
 */
export async function refuseAnsweredLater(params: { storage: WorkflowStore; workflowName: string; runId: string; checkpointId: string; requestIds: readonly string[] }): Promise<void> {
  const { storage, workflowName, runId, checkpointId } = params
  for (const later of await laterResponseCheckpoints(storage, runId, checkpointId)) {
    const pending = readWorkflowCheckpoint(await storage.load(later)).pendingRequestInfoEvents
    const answered = params.requestIds.find((requestId) => !(requestId in pending))
    if (answered === undefined) continue
    throw new WorkflowError(
      'request_answered',
      `workflow ${workflowName}: request ${answered} of run ${runId} was already answered after checkpoint ${checkpointId} (see checkpoint ${later}); ` +
        'resume from the latest checkpoint (workflow.getLatestCheckpoint()), or pass allowReanswer: true to answer it again from this older one',
      { workflowName, runId, requestId: answered },
    )
  }
}

/** Ids of the run's `responses` checkpoints written after `checkpointId`, newest first. */
async function laterResponseCheckpoints(storage: WorkflowStore, runId: string, checkpointId: string): Promise<string[]> {
  const ids: string[] = []
  let before: string | undefined
  for (;;) {
    const page = await storage.listCheckpoints({ runId, limit: PAGE, ...(before === undefined ? {} : { before }) })
    for (const info of page) {
      if (info.id === checkpointId) return ids
      if (info.phase === 'responses') ids.push(info.id)
    }
    if (page.length < PAGE) return ids
    before = page[page.length - 1]?.id
  }
}
