import { isDeepStrictEqual } from 'node:util'
import { join } from 'node:path'
import type { ContentBlock, Message, ToolResultBlock } from '../src/index.js'
import { SqliteStore } from '../src/sqlite.js'
import { NON_IDEMPOTENT_TOOLS, plannerTurn, researcherTurn } from './script.js'
import { EffectLog, type EffectLine } from './side-effects.js'
import type { WorkerResult } from './protocol.js'

type ToolResult = ToolResultBlock['toolResult']

/**
 * Keys and transcripts are compared across runs with different ids, so both are keyed by their
 * part after the run id: `''` is the planner's own run, `:c1-research` its child run, and an
 * effect key `:c0-charge` or `:c1-research:r0-ticket` names one call.
 */
export type Transcripts = Record<string, Message[]>

/** What a run that was never killed did: the yardstick of every scenario. */
export interface Reference {
  transcripts: Transcripts
  /** Normalized keys of the effects that ran, by tool idempotence. */
  idempotentKeys: Set<string>
  nonIdempotentKeys: Set<string>
}

/** What the harness knows about a finished scenario besides its final result. */
export interface ScenarioFacts {
  runId: string
  dir: string
  final: WorkerResult
  /** Normalized keys answered 'skip', and how many times each key was answered 'retry'. */
  skipped: Set<string>
  retries: Map<string, number>
  /** Normalized keys of non-idempotent calls found started with no outcome after a kill. */
  unknownAtKill: Set<string>
  /** Normalized keys surfaced as `effect_outcome_unknown` interrupts. */
  surfaced: Set<string>
}

/** Build the reference from a completed, never-killed run. */
export function referenceOf(runId: string, final: WorkerResult, effects: readonly EffectLine[]): Reference {
  const idempotentKeys = new Set<string>()
  const nonIdempotentKeys = new Set<string>()
  for (const line of effects) (line.idempotent ? idempotentKeys : nonIdempotentKeys).add(normalize(runId, line.key))
  return { transcripts: normalizeTranscripts(runId, final.transcripts), idempotentKeys, nonIdempotentKeys }
}

/**
 * Problems with a reference run: the scripted model must reproduce its own transcript (so a
 * transcript can be predicted after a skipped call), and every effect ran exactly once.
 */
export function checkReference(reference: Reference, effects: readonly EffectLine[]): string[] {
  const problems: string[] = []
  const predicted = expectedTranscripts(reference, new Map())
  for (const [suffix, messages] of Object.entries(reference.transcripts)) {
    if (!isDeepStrictEqual(predicted[suffix], messages)) problems.push(`the scripted model does not reproduce the reference transcript of run '${suffix}'`)
  }
  const keys = effects.map((line) => line.key)
  if (new Set(keys).size !== keys.length) problems.push('the reference run executed an effect twice')
  return problems
}

/** Every way a finished scenario differs from what the runner promises. Empty when it kept every promise. */
export function checkScenario(reference: Reference, facts: ScenarioFacts): string[] {
  const problems: string[] = []
  const { final, runId } = facts
  if (final.state !== 'completed') return [`the run ended ${final.state}, not completed`]
  for (const [id, status] of Object.entries(final.statuses)) {
    if (status !== 'completed') problems.push(`run ${id} is recorded as ${status} after the run completed`)
  }
  if (final.live && !isDeepStrictEqual(final.live, final.transcripts[runId])) {
    problems.push('the stored transcript differs from the agent messages of the process that finished the run')
  }
  problems.push(...checkTranscripts(reference, facts))
  problems.push(...checkEffects(reference, facts))
  for (const key of facts.unknownAtKill) if (!facts.surfaced.has(key)) problems.push(`the unknown outcome of ${key} was never surfaced as an interrupt`)
  for (const key of facts.surfaced) if (!facts.unknownAtKill.has(key)) problems.push(`${key} was surfaced as an unknown outcome, but no kill left it started without an outcome`)
  return problems
}

/**
 * Normalized keys of the non-idempotent calls of every run in `dir` that are marked started and
 * have no outcome: unknown outcomes, which the next resume must surface.
 */
export async function unknownOutcomes(dir: string, runId: string): Promise<string[]> {
  const store = new SqliteStore({ path: join(dir, 'cairn.db') })
  try {
    const runs = (await store.listRuns()).filter((r) => r.runId === runId || r.runId.startsWith(`${runId}:`))
    const keys: string[] = []
    for (const run of runs) {
      for (const effect of await store.listEffects(run.runId)) {
        if (effect.status === 'started' && NON_IDEMPOTENT_TOOLS.has(effect.name)) keys.push(normalize(runId, effect.idempotencyKey))
      }
    }
    return keys
  } finally {
    await store.close()
  }
}

/** The part of a key or child run id after the run id. */
export function normalize(runId: string, key: string): string {
  if (!key.startsWith(runId)) throw new Error(`${key} does not belong to run ${runId}`)
  return key.slice(runId.length)
}

/**
 * Transcripts match the reference, except a call answered 'skip': it must hold an error result,
 * and the model's later turns are predicted from the conversation with that result in it (the
 * script is a pure function of the conversation, checked on the reference).
 */
function checkTranscripts(reference: Reference, facts: ScenarioFacts): string[] {
  const actual = normalizeTranscripts(facts.runId, facts.final.transcripts)
  const skippedResults = new Map<string, ToolResult>()
  const problems: string[] = []
  for (const key of facts.skipped) {
    const { suffix, toolUseId } = splitKey(key)
    const result = resultsOf(actual[suffix] ?? []).get(toolUseId)
    if (!result) problems.push(`the skipped call ${key} has no tool result in the transcript`)
    else if (result.status !== 'error') problems.push(`the skipped call ${key} has a ${result.status} result, not an error: ${JSON.stringify(result.content)}`)
    else skippedResults.set(key, result)
  }
  const expected = expectedTranscripts(reference, skippedResults)
  for (const suffix of new Set([...Object.keys(expected), ...Object.keys(actual)])) {
    const want = expected[suffix]
    const got = actual[suffix]
    if (!isDeepStrictEqual(want, got)) problems.push(`transcript of run '${suffix}' differs from the never-killed run: ${firstDifference(want ?? [], got ?? [])}`)
  }
  return problems
}

/**
 * Non-idempotent keys: each ran once (at most once when skipped, at most 1 + retries when
 * answered 'retry'). Idempotent keys: applied exactly once each, under the reference's keys.
 */
function checkEffects(reference: Reference, facts: ScenarioFacts): string[] {
  const problems: string[] = []
  const lines = new EffectLog(join(facts.dir, 'effects.log')).read()
  const runs = new Map<string, number>()
  const applied = new Map<string, number>()
  for (const line of lines) {
    const key = normalize(facts.runId, line.key)
    if (line.idempotent) {
      if (!reference.idempotentKeys.has(key)) problems.push(`idempotent effect under an unexpected key ${key}`)
      if (line.applied) applied.set(key, (applied.get(key) ?? 0) + 1)
    } else {
      if (!reference.nonIdempotentKeys.has(key)) problems.push(`non-idempotent effect under an unexpected key ${key}`)
      runs.set(key, (runs.get(key) ?? 0) + 1)
    }
  }
  for (const key of reference.idempotentKeys) {
    if (applied.get(key) !== 1) problems.push(`idempotent effect ${key} landed ${applied.get(key) ?? 0} times`)
  }
  for (const key of reference.nonIdempotentKeys) {
    const n = runs.get(key) ?? 0
    const most = 1 + (facts.retries.get(key) ?? 0)
    const least = facts.skipped.has(key) ? 0 : 1
    if (n > most) problems.push(`non-idempotent effect ${key} ran ${n} times (allowed ${most}${facts.retries.has(key) ? ', with retries' : ''}${facts.skipped.has(key) ? ', answered skip' : ''})`)
    if (n < least) problems.push(`non-idempotent effect ${key} never ran`)
  }
  return problems
}

/** The transcripts the script produces when every call returns its reference result, or its skipped error. */
function expectedTranscripts(reference: Reference, skipped: ReadonlyMap<string, ToolResult>): Transcripts {
  const out: Transcripts = {}
  const simulate = (suffix: string): Message[] => {
    const known = reference.transcripts[suffix]
    if (!known?.[0]) return []
    const results = resultsOf(known)
    const turn = suffix === '' ? plannerTurn : researcherTurn
    const messages: Message[] = [known[0]]
    for (let cycle = 0; cycle < 16; cycle++) {
      const content = turn(messages)
      messages.push({ role: 'assistant', content })
      const uses = content.flatMap((b) => ('toolUse' in b ? [b.toolUse] : []))
      if (uses.length === 0) break
      const blocks: ContentBlock[] = uses.map((use) => {
        const key = `${suffix}:${use.toolUseId}`
        const skip = skipped.get(key)
        if (skip) return { toolResult: skip }
        if (use.name === 'research') {
          const child = (out[key] ??= simulate(key))
          const text = child.at(-1)?.content.flatMap((b) => ('text' in b ? [b.text] : [])).join('') ?? ''
          return { toolResult: { toolUseId: use.toolUseId, status: 'success', content: [{ text }] } }
        }
        return { toolResult: results.get(use.toolUseId) ?? { toolUseId: use.toolUseId, status: 'error', content: [{ text: 'no reference result' }] } }
      })
      messages.push({ role: 'user', content: blocks })
    }
    return messages
  }
  out[''] = simulate('')
  return out
}

function normalizeTranscripts(runId: string, transcripts: Record<string, Message[]>): Transcripts {
  return Object.fromEntries(Object.entries(transcripts).map(([id, messages]) => [normalize(runId, id), messages]))
}

function resultsOf(messages: readonly Message[]): Map<string, ToolResult> {
  return new Map(messages.flatMap((m) => m.content.flatMap((b) => ('toolResult' in b ? [[b.toolResult.toolUseId, b.toolResult] as const] : []))))
}

function splitKey(key: string): { suffix: string; toolUseId: string } {
  const at = key.lastIndexOf(':')
  return { suffix: key.slice(0, at), toolUseId: key.slice(at + 1) }
}

function firstDifference(want: readonly Message[], got: readonly Message[]): string {
  for (let i = 0; i < Math.max(want.length, got.length); i++) {
    if (!isDeepStrictEqual(want[i], got[i])) return `message ${i}: expected ${clip(want[i])}, got ${clip(got[i])}`
  }
  return 'same messages'
}

function clip(value: unknown): string {
  const text = JSON.stringify(value) ?? 'nothing'
  return text.length > 240 ? `${text.slice(0, 240)}…` : text
}
