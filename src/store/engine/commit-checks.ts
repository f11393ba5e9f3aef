import type { EffectStatus } from '../store-types.js'
import type { EffectRow } from './rows.js'
import type { CommitRequest, CommitResult } from './storage-engine.js'

/** What the checks of a commit read of the stored run, under the engine's lock; synchronous, so nothing gets in between. */
export interface CommitView {
  /** The run's stored `lastSeq` (0 for a run that does not exist). */
  lastSeq: number
  /** Whether a checkpoint with this id exists, in any run. */
  hasCheckpoint(checkpointId: string): boolean
  /** How many items the run's list holds (0 when none). Absent: the engine checks the appends itself. */
  listLength?(listId: string): number
  /** The stored status of the run's effect, undefined when it has none. */
  effectStatus(callId: string): EffectStatus | undefined
}

/** A refused commit's answer. */
export type CommitRefusal = Exclude<CommitResult, { ok: true }>

/**
 * The checks every commit passes before anything is written (see `StorageEngine.commit`), in the
 * order every engine answers them (`duplicate_id`, `stale_seq`, `list_conflict`,
 * `effect_not_pending`); undefined when the commit may go ahead. The engine checks the fence first.
 *
 * @example
 * ```ts
 * const refused = checkCommit(request, { lastSeq: run?.lastSeq ?? 0, hasCheckpoint: (id) => rows.has(id), listLength: (id) => lists.get(id)?.length ?? 0, effectStatus: (id) => effects.get(id)?.status })
 * if (refused) return refused
 * ```
 */
export function checkCommit(request: { rows: CommitRequest['rows']; appends: CommitRequest['appends']; effects?: CommitRequest['effects'] | undefined }, view: CommitView): CommitRefusal | undefined {
  const { rows, appends, effects } = request
  for (const row of rows) if (view.hasCheckpoint(row.id)) return { ok: false, reason: 'duplicate_id' }
  const first = rows[0]
  if (first && first.seq <= view.lastSeq) return { ok: false, reason: 'stale_seq', lastSeq: view.lastSeq }
  for (const append of view.listLength ? appends : []) if (view.listLength!(append.listId) !== append.expectedLength) return { ok: false, reason: 'list_conflict' }
  for (const callId of effects?.starts ?? []) {
    const status = view.effectStatus(callId) ?? (effects?.intents?.some((intent) => intent.callId === callId) ? 'pending' : null)
    if (status !== 'pending') return { ok: false, reason: 'effect_not_pending', callId, status }
  }
  return undefined
}

/**
 * The effect rows a checked commit changes, by call id: each intent (a new row, or one more
 * attempt), each start, each completion of a row still `pending` or `started` (the first outcome
 * wins). `stored` reads a row as it was before the commit.
 */
export function effectWrites(runId: string, effects: CommitRequest['effects'], stored: (callId: string) => EffectRow | undefined): Map<string, EffectRow> {
  const changed = new Map<string, EffectRow>()
  const current = (callId: string) => changed.get(callId) ?? stored(callId)
  for (const intent of effects?.intents ?? []) {
    const row = current(intent.callId)
    changed.set(intent.callId, row ? { ...row, attempts: row.attempts + 1 } : { ...intent })
  }
  for (const callId of effects?.starts ?? []) {
    const row = current(callId)
    if (row?.status === 'pending') changed.set(callId, { ...row, status: 'started' })
  }
  for (const completion of effects?.completions ?? []) {
    const row = current(completion.callId)
    if (!row || (row.status !== 'pending' && row.status !== 'started')) continue
    const { status, output, outputHash, completedAt } = completion
    changed.set(completion.callId, { ...row, runId, status, output, outputHash, completedAt })
  }
  return changed
}
