import { userInfo } from 'node:os'
import { runtimeOf } from '../engine.js'
import { toolUsesOf, type CheckpointStore, type JsonObject, type JsonValue, type Message, type RunRecord, type StoreReader } from '../index.js'

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

/** One question a paused run asks: an interrupt, with the tool call that raised it. */
export interface Question {
  interruptId: string
  name: string
  reason: JsonValue | null
  toolUseId: string
  /** The tool that asked, and its input (when the run's snapshot holds the call). */
  tool: string | null
  input: JsonValue | null
  /** Answers to pick from, when the interrupt names them (`retry`/`skip` for an unknown outcome). */
  choices: JsonValue[]
}

/** The questions of a run paused on interrupts (none for any other run). */
export async function questionsOf(store: StoreReader, run: RunRecord): Promise<Question[]> {
  if (run.status !== 'paused') return []
  const latest = await store.getLatest<Record<string, unknown>>({ runId: run.runId })
  if (!latest || latest.phase !== 'run_paused' || !Array.isArray(latest.payload.interrupts)) return []
  const runtime = runtimeOf(latest)
  const calls = new Map(callsOf(runtime?.pending_llm_response ?? runtime?.messages.findLast((m) => m.role === 'assistant')).map((use) => [use.toolUseId, use]))
  return (latest.payload.interrupts as JsonObject[]).map((interrupt) => {
    const toolUseId = text(interrupt.toolUseId)
    const call = calls.get(toolUseId)
    const reason = interrupt.reason ?? null
    return {
      interruptId: text(interrupt.id),
      name: text(interrupt.name),
      reason,
      toolUseId,
      tool: call?.name ?? null,
      input: (call?.input ?? null),
      choices: choicesOf(text(interrupt.name), reason),
    }
  })
}

/** The inspector's OS user: who answers when the page gives no name. */
export function osUser(): string {
  try {
    return userInfo().username
  } catch {
    return 'unknown'
  }
}

function callsOf(message: Message | null | undefined): ReturnType<typeof toolUsesOf> {
  return message ? toolUsesOf(message) : []
}

function text(value: JsonValue | undefined): string {
  return typeof value === 'string' ? value : ''
}

function choicesOf(name: string, reason: JsonValue): JsonValue[] {
  // The interrupt a non-idempotent call without a recorded outcome raises takes these two answers.
  if (name === 'effect_outcome_unknown') return ['retry', 'skip']
  if (typeof reason !== 'object' || reason === null || Array.isArray(reason)) return []
  const listed = reason.choices ?? reason.options
  return Array.isArray(listed) ? listed.filter((choice) => choice === null || typeof choice !== 'object') : []
}
