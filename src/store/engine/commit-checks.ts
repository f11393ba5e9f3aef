import type { EffectStatus } from '../store-types.js'
import type { EffectRow } from './rows.js'
import type { CommitRequest, CommitResult } from './storage-engine.js'

/**
 * What the checks of a commit read of the stored run, under the engine's lock. Synchronous, so
 * an engine in the process checks and writes without yielding (a claim never gets in between);
 * an engine that reads files reads what the checks need first.
 */
export interface CommitView {
  /** The run's stored `lastSeq` (0 for a run that does not exist). */
  lastSeq: number
  /** Whether a checkpoint with this id exists, in any run. */
  hasCheckpoint(checkpointId: string): boolean
  /**
   * How many items the run's list holds (0 for a list that does not exist). Absent: the engine
   * checks the appends as it plans them (a file engine, whose list files may hold a torn tail).
   */
  listLength?(listId: string): number
  /** The stored status of the run's effect, undefined when it has none. */
  effectStatus(callId: string): EffectStatus | undefined
}

/** A refused commit's answer. */
export type CommitRefusal = Exclude<CommitResult, { ok: true }>

/**
 * The checks every commit passes before anything is written (see `StorageEngine.commit`), in
 * the order every engine answers them: no row's id exists (`duplicate_id`), the first row's seq
 * is past the run's `lastSeq` (`stale_seq`), every append's `expectedLength` is its list's length
 * (`list_conflict`), every effect start finds its effect `pending`, stored or an intent of this
 * commit (`effect_not_pending`). Undefined when the commit may go ahead. The fence is the
 * engine's to check first, as it holds the leases.
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
 * The effect rows a checked commit leaves, by call id, in the order they change: each intent (a
 * new row, or the stored one with one more attempt), each start (`pending` to `started`), each
 * completion applied to a row still `pending` or `started` (the first outcome wins; one for an
 * effect without a row changes nothing). `stored` reads a row as it was before the commit. Only
 * rows that change are in the answer: write each of them.
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
