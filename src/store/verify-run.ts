import { CairnError } from '../core/errors.js'
import type { CheckpointInfo, StoreReader } from './checkpoint-store.js'
import { allCheckpoints } from './delegating-store.js'

/** What {@link verifyRun} found in one run. */
export interface VerifyReport {
  runId: string
  checkpoints: number
  ok: boolean
  /**
   * The first record that failed its digest, hash chain, shape or signature check, with the
   * error's code (`checkpoint_integrity`: its signature did not verify, or the store was opened
   * without the keys it was signed with).
   */
  firstBad: { checkpointId: string; seq: number; problem: string; code: string } | null
  /**
   * The run's effect journal checked against its log of transitions: an effect row put back to
   * `pending` or deleted (a resume would run its call again), with the error's code; null when
   * the journal is whole (or the store keeps no log).
   */
  rolledBack: { problem: string; code: string } | null
}

const CHUNK = 100
/** The errors of a record that a report names; any other (the store is down) ends the verification. */
const REPORTED = new Set(['checkpoint_corrupt', 'checkpoint_integrity', 'schema_version'])

/**
 * Read every checkpoint of a run, which checks each record's digest, the hash chain of its
 * stored lists and its shape, and report the first bad record. `onProgress` is told how many
 * checkpoints were read so far.
 */
export async function verifyRun(store: StoreReader, runId: string, onProgress?: (read: number, total: number) => void): Promise<VerifyReport> {
  // Unchecked: each record is loaded (and so checked) below, and the first bad one reported.
  const infos = await allCheckpoints(store, runId, { verify: false })
  const rolledBack = await journalRollback(store, runId)
  for (let at = 0; at < infos.length; at += CHUNK) {
    const chunk = infos.slice(at, at + CHUNK)
    try {
      await store.loadMany(chunk.map((info) => info.id))
    } catch {
      const bad = await firstBad(store, chunk)
      if (bad) return { runId, checkpoints: infos.length, ok: false, firstBad: bad, rolledBack }
    }
    onProgress?.(Math.min(at + CHUNK, infos.length), infos.length)
  }
  return { runId, checkpoints: infos.length, ok: rolledBack === null, firstBad: null, rolledBack }
}

/** What a read of the run's effects (checked against its log by the store) refuses, or null. */
async function journalRollback(store: StoreReader, runId: string): Promise<VerifyReport['rolledBack']> {
  try {
    await store.listEffects(runId)
    return null
  } catch (err) {
    if (!(err instanceof CairnError) || !REPORTED.has(err.code)) throw err
    return { problem: err.message, code: err.code }
  }
}

async function firstBad(store: StoreReader, chunk: readonly CheckpointInfo[]): Promise<VerifyReport['firstBad']> {
  for (const info of chunk) {
    try {
      await store.load(info.id)
    } catch (err) {
      if (err instanceof CairnError && !REPORTED.has(err.code)) throw err
      return { checkpointId: info.id, seq: info.seq, problem: err instanceof Error ? err.message : String(err), code: err instanceof CairnError ? err.code : 'checkpoint_corrupt' }
    }
  }
  return null
}
