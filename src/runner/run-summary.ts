import type { JsonObject } from '../core/codec.js'
import type { RunRecord, RunStatus, StoreReader } from '../store/checkpoint-store.js'
import { RUNNER_KIND, type RuntimeSnapshot } from './phases.js'

/** One run in a listing: what `cairn runs` prints and the inspector's run list shows. */
export interface RunSummary {
  runId: string
  name: string | null
  status: RunStatus
  /** Model-loop steps (runner runs) or super steps (workflows) reached. */
  steps: number
  checkpoints: number
  toolCalls: number
  /** Input plus output tokens of every model call (runner runs). */
  tokens: number
  startedAt: number
  updatedAt: number
  /** The process (`pid@host`) or worker that last owned the run, when recorded. */
  owner: string
  /** The run this one was forked from. */
  forkedFrom: string | null
}

/**
 * Count a run's checkpoints and read its newest runtime snapshot (one load) to summarize it.
 */
export async function summarizeRun(store: StoreReader, run: RunRecord): Promise<RunSummary> {
  let checkpoints = 0
  let newestSnapshot: string | undefined
  let steps = 0
  let before: string | undefined
  for (;;) {
    const page = await store.listCheckpoints({ runId: run.runId, limit: 500, ...(before === undefined ? {} : { before }) })
    checkpoints += page.length
    for (const info of page) {
      if (newestSnapshot === undefined && info.kind === RUNNER_KIND && info.metadata.snapshot === true) newestSnapshot = info.id
      if (typeof info.metadata.step === 'number') steps = Math.max(steps, info.metadata.step + 1)
      if (typeof info.metadata.iterationCount === 'number') steps = Math.max(steps, info.metadata.iterationCount)
    }
    if (page.length < 500) break
    before = page[page.length - 1]?.id
  }
  let toolCalls = 0
  let tokens = 0
  if (newestSnapshot !== undefined) {
    const runtime = ((await store.load<Record<string, unknown>>(newestSnapshot)).payload.runtime ?? undefined) as RuntimeSnapshot | undefined
    toolCalls = runtime?.tool_calls ?? 0
    tokens = (runtime?.usage.inputTokens ?? 0) + (runtime?.usage.outputTokens ?? 0)
  } else {
    toolCalls = (await store.listEffects(run.runId)).length
  }
  const forked = run.metadata.forkedFrom as JsonObject | undefined
  return {
    runId: run.runId,
    name: run.name ?? run.workflowName,
    status: run.status,
    steps,
    checkpoints,
    toolCalls,
    tokens,
    startedAt: run.createdAt,
    updatedAt: run.updatedAt,
    owner: ownerOf(run.metadata),
    forkedFrom: forked && typeof forked.runId === 'string' ? forked.runId : null,
  }
}

function ownerOf(metadata: JsonObject): string {
  const job = metadata.cairn as JsonObject | undefined
  if (job && typeof job.owner === 'string') return job.owner
  if (typeof metadata.pid === 'number') return `${metadata.pid}@${typeof metadata.host === 'string' ? metadata.host : ''}`
  return ''
}
