import type { CheckpointStore, JsonValue, RunRecord } from '../index.js'

/** The run metadata key that lists the answers given to a run's interrupts. */
export const ANSWERS_KEY = 'cairnAnswers'

/** One answer to one interrupt, as kept with the run: what was answered, by whom, when and from where. */
export interface AnswerRecord {
  interruptId: string
  response: JsonValue
  by: string
  /** Unix milliseconds. */
  at: number
  /** `cli` (`cairn resume --response`) or `inspector`. */
  via: string
}

/**
 * Keep the answers to a paused run's interrupts with the run (its metadata), before the run is
 * resumed with them: who gave each, when and from where, for every later reader of the run.
 */
export async function recordAnswers(store: CheckpointStore, runId: string, params: { responses: Record<string, JsonValue>; by: string; via: string }): Promise<AnswerRecord[]> {
  const run = await store.getRun(runId)
  if (!run) return []
  const at = Date.now()
  const added: AnswerRecord[] = Object.entries(params.responses).map(([interruptId, response]) => ({ interruptId, response, by: params.by, at, via: params.via }))
  await store.updateRun(runId, { metadata: { ...run.metadata, [ANSWERS_KEY]: [...answersOf(run), ...added] as unknown as JsonValue[] } })
  return added
}

/** The answers kept with a run, oldest first. */
export function answersOf(run: RunRecord): AnswerRecord[] {
  const list = run.metadata[ANSWERS_KEY]
  return Array.isArray(list) ? (list.filter((item) => typeof item === 'object' && item !== null && !Array.isArray(item)) as unknown as AnswerRecord[]) : []
}
