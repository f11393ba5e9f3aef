import type { EffectStatus } from '../checkpoint-store.js'
import type { CommitRequest, CommitResult } from './storage-engine.js'

/**
 * The `effect_not_pending` answer of a commit whose `starts` include an effect that is not
 * `pending` (see `CommitRequest.effects.starts`), or undefined when every start may go ahead.
 * `statusOf` reads the stored status; an intent in the same commit counts as `pending`.
 */
export function firstNotPending(
  effects: CommitRequest['effects'],
  statusOf: (callId: string) => EffectStatus | undefined,
): Extract<CommitResult, { reason: 'effect_not_pending' }> | undefined {
  for (const callId of effects?.starts ?? []) {
    const status = statusOf(callId) ?? (effects?.intents?.some((intent) => intent.callId === callId) ? 'pending' : null)
    if (status !== 'pending') return { ok: false, reason: 'effect_not_pending', callId, status }
  }
  return undefined
}
