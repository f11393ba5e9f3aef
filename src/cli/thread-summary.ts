import { summarizeThread, type RunRecord, type StoreReader } from '../index.js'

/**
 * A LangGraph thread namespace (a run `CairnSaver` wrote) as a row of `cairn runs` and of the
 * inspector's list: its thread id (and namespace) as the name, its state as the status,
 * LangGraph's steps, and `thread: true`; undefined for any other run.
 */
export async function threadRunSummary(store: StoreReader, run: RunRecord) {
  const thread = await summarizeThread(store, run)
  if (!thread) return undefined
  const name = `thread ${thread.threadId}${thread.checkpointNs === '' ? '' : ` ns ${thread.checkpointNs}`}`
  const status = thread.state === 'pending' ? `next: ${thread.next.join(',')}` : thread.state
  return { runId: run.runId, name, status, steps: thread.step === null ? 0 : thread.step + 1, checkpoints: thread.checkpoints, stored: thread.checkpoints, toolCalls: null, tokens: null, startedAt: run.createdAt, updatedAt: thread.updatedAt, owner: 'langgraph', thread: true as const }
}
