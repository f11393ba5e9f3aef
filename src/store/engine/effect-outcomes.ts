import type { EffectRow } from './rows.js'
import type { CommitRequest } from './storage-engine.js'

/**
 * The intent rows of a commit as an engine writes them: an intent whose outcome the same commit
 * carries (a call that started and finished between two background writes) is written with that
 * outcome, so its row is written once instead of inserted and then updated (on Postgres, an
 * update leaves a dead row version behind). The commit's completions are still applied after
 * the intents, as ever: one that meets a row already finished changes nothing (the first outcome
 * wins), and one for an intent that was already stored (not inserted now) records the outcome.
 */
export function intentRowsOf(effects: CommitRequest['effects']): readonly EffectRow[] {
  const intents = effects?.intents ?? []
  const completions = effects?.completions ?? []
  if (intents.length === 0 || completions.length === 0) return intents
  const outcomes = new Map<string, (typeof completions)[number]>()
  for (const completion of completions) if (!outcomes.has(completion.callId)) outcomes.set(completion.callId, completion)
  return intents.map((intent) => {
    const outcome = outcomes.get(intent.callId)
    return outcome === undefined ? intent : { ...intent, status: outcome.status, output: outcome.output, outputHash: outcome.outputHash, completedAt: outcome.completedAt }
  })
}
