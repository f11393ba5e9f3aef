/**
 * The parts of a commit an engine-backed store builds around its rows, the checks of a write's
 * arguments, and the errors of a refused commit.
 */
import { EffectStartedError, InvalidArgumentError, type CairnError } from '../core/errors.js'
import type { EffectRecord, WriteBatch } from './checkpoint-store.js'
import type { Fence } from './engine/lease-engine.js'
import type { RunRow } from './engine/rows.js'
import { runDigest, runProgressDigest } from './engine/run-digest.js'
import { assertId, assertWellFormed } from './encoding/validate.js'

/** The run a commit creates when it does not exist yet, with its digest and the progress digest of `seq`, the seq the commit leaves it at. */
export function newRunRow(runId: string, workflowName: string | null, now: number, seq: number): RunRow {
  const row: RunRow = {
    runId,
    status: 'running' as const,
    name: null,
    threadId: null,
    workflowName,
    configSignature: null,
    lastSeq: 0,
    createdAt: now,
    updatedAt: now,
    metadata: '{}',
  }
  return { ...row, digest: runDigest(row), seal: runProgressDigest(runId, seq) }
}

/** A fence names a run, a non-empty owner and an integer epoch. */
export function assertFence(fence: Fence): void {
  assertId(fence?.runId, 'runId')
  if (typeof fence.owner !== 'string' || fence.owner === '' || !Number.isSafeInteger(fence.epoch)) {
    throw new InvalidArgumentError('a fence needs a run id, a non-empty owner and an integer epoch', { runId: fence.runId })
  }
}

/** The call ids of a write's effect starts, checked. */
export function startIds(starts: readonly string[]): string[] {
  for (const callId of starts) {
    if (typeof callId !== 'string' || callId === '') throw new InvalidArgumentError(`an effect start needs a call id, got ${JSON.stringify(callId)}`)
    assertWellFormed(callId, 'effect callId')
  }
  return [...starts]
}

/** The error of a commit whose effect start found the effect not `pending`. */
export function notPendingError(runId: string, result: { callId: string; status: EffectRecord['status'] | null }): CairnError {
  if (result.status === null || result.status === 'pending') {
    return new InvalidArgumentError(`run ${runId} has no intent for effect ${result.callId}; record the intent before the effect starts`, { runId })
  }
  return new EffectStartedError({ runId, callId: result.callId, status: result.status })
}

/** The error of pending writes on an engine that has no place for them. */
export function noWritesError(runId: string): CairnError {
  return new InvalidArgumentError(`run ${runId}: this store's backend has no place for pending writes; use a built-in store or give the engine putWrites and listWrites`, { runId })
}

/** A batch's durability for the engine: only `async` is passed on (the default is `sync`). */
export function durabilityOf(batch: WriteBatch): { durability?: 'async' } {
  if (batch.durability === undefined || batch.durability === 'sync') return {}
  if (batch.durability === 'async') return { durability: 'async' }
  throw new InvalidArgumentError(`durability must be 'async' or 'sync', got ${JSON.stringify(batch.durability)}`, { runId: batch.runId })
}
