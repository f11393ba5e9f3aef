import type { JsonObject } from '../core/codec.js'
import { CairnError } from '../core/errors.js'
import type { RunRecord, RunStatus, StoreReader } from '../store/checkpoint-store.js'
import { expandPhases } from './phase-log.js'
import { RUNNER_KIND, type RuntimeSnapshot } from './phases.js'

/** One run in a listing: what `cairn runs` prints and the inspector's run list shows. */
export interface RunSummary {
  runId: string
  name: string | null
  status: RunStatus
  /** Model-loop steps (runner runs) or super steps (workflows) reached. */
  steps: number
  /** Checkpoints in the run's history, every phase (what `cairn show` lists). */
  checkpoints: number
  /** How many of them are stored checkpoints; the others are light phases in their phase logs. */
  stored: number
  /** Null when the contents cannot be read: a signed store opened without its keys. */
  toolCalls: number | null
  /** Input plus output tokens of every model call (runner runs); null as `toolCalls`. */
  tokens: number | null
  startedAt: number
  updatedAt: number
  /** The process (`pid@host`) or worker that last owned the run, when recorded. */
  owner: string
  /** The run this one was forked from. */
  forkedFrom: string | null
}

/**
 * Count a run's checkpoints from their headers and read the counters of its newest runtime
 * snapshot (none of its conversation) to summarize it. On a signed store opened without its
 * keys, ids, counts and times are listed and the contents (tool calls, tokens) are null.
 */
export async function summarizeRun(store: StoreReader, run: RunRecord): Promise<RunSummary> {
  // Counts come from the headers alone; the contents from the newest snapshot, read without its
  // lists' items. A signed store opened without its keys cannot check that record, so its
  // contents are left out.
  const { checkpoints, stored, steps, newestSnapshot } = await countCheckpoints(store, run.runId)
  const { toolCalls, tokens } = await contentCounts(store, run.runId, newestSnapshot).catch((err: unknown) => {
    if (err instanceof CairnError && err.code === 'checkpoint_integrity') return { toolCalls: null, tokens: null }
    throw err
  })
  const forked = run.metadata.forkedFrom as JsonObject | undefined
  return {
    runId: run.runId,
    name: run.name ?? run.workflowName,
    status: run.status,
    steps,
    checkpoints,
    stored,
    toolCalls,
    tokens,
    startedAt: run.createdAt,
    updatedAt: run.updatedAt,
    owner: ownerOf(run.metadata),
    forkedFrom: forked && typeof forked.runId === 'string' ? forked.runId : null,
  }
}

/** A run's checkpoints counted page by page from their headers, with its step count and newest runtime snapshot. */
async function countCheckpoints(store: StoreReader, runId: string): Promise<{ checkpoints: number; stored: number; steps: number; newestSnapshot: string | undefined }> {
  let checkpoints = 0
  let stored = 0
  let newestSnapshot: string | undefined
  let steps = 0
  let before: string | undefined
  for (;;) {
    const page = await store.listCheckpoints({ runId, limit: 500, verify: false, ...(before === undefined ? {} : { before }) })
    stored += page.length
    const phases = page.flatMap((info) => expandPhases(info))
    checkpoints += phases.length
    for (const info of phases) {
      if (newestSnapshot === undefined && info.kind === RUNNER_KIND && info.metadata.snapshot === true) newestSnapshot = info.id
      if (typeof info.metadata.step === 'number') steps = Math.max(steps, info.metadata.step + 1)
      if (typeof info.metadata.iterationCount === 'number') steps = Math.max(steps, info.metadata.iterationCount)
    }
    if (page.length < 500) break
    before = page[page.length - 1]?.id
  }
  return { checkpoints, stored, steps, newestSnapshot }
}

/** Tool calls and tokens, from the newest runtime snapshot (or the effect journal). */
async function contentCounts(store: StoreReader, runId: string, newestSnapshot: string | undefined): Promise<{ toolCalls: number; tokens: number }> {
  if (newestSnapshot === undefined) return { toolCalls: (await store.listEffects(runId)).length, tokens: 0 }
  // Its counters only: no item of its lists (the conversation) is read.
  const [tail] = await store.loadTails<Record<string, unknown>>([newestSnapshot], { after: newestSnapshot })
  const runtime = (tail?.record.payload.runtime ?? undefined) as RuntimeSnapshot | undefined
  return { toolCalls: runtime?.tool_calls ?? 0, tokens: (runtime?.usage.inputTokens ?? 0) + (runtime?.usage.outputTokens ?? 0) }
}

function ownerOf(metadata: JsonObject): string {
  const job = metadata.cairn as JsonObject | undefined
  if (job && typeof job.owner === 'string') return job.owner
  if (typeof metadata.pid === 'number') return `${metadata.pid}@${typeof metadata.host === 'string' ? metadata.host : ''}`
  return ''
}
