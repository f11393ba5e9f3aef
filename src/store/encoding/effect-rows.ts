import { decodeValue, encodeValue, parseJson } from '../../core/codec.js'
import { CheckpointError, CheckpointIntegrityError } from '../../core/errors.js'
import { hashValue } from '../../core/hash.js'
import type { EffectCompletion, EffectIntent, EffectRecord } from '../checkpoint-store.js'
import type { EffectCompletionRow, EffectRow } from '../engine/rows.js'
import { assertId, assertWellFormed } from './validate.js'

/** The engine row of an effect intent, checked: a new intent is `pending` with one attempt. */
export function intentRow(intent: EffectIntent, runId: string): EffectRow {
  assertId(intent.runId, 'runId')
  if (intent.runId !== runId) throw new CheckpointError('invalid_argument', `a write to run ${runId} holds an effect of run ${intent.runId}`, { runId })
  for (const key of ['callId', 'name', 'inputHash', 'idempotencyKey'] as const) {
    if (typeof intent[key] !== 'string' || intent[key] === '') {
      throw new CheckpointError('invalid_argument', `effect intent needs a non-empty string ${key}`, { runId })
    }
    assertWellFormed(intent[key], `effect ${key}`, runId)
  }
  return {
    runId,
    callId: intent.callId,
    name: intent.name,
    inputHash: intent.inputHash,
    idempotencyKey: intent.idempotencyKey,
    status: 'pending',
    output: null,
    outputHash: null,
    attempts: 1,
    startedAt: Date.now(),
    completedAt: null,
  }
}

/** The engine row of an effect outcome, its output encoded and hashed. */
export function completionRow(completion: EffectCompletion, runId: string): EffectCompletionRow {
  assertId(completion.runId, 'runId')
  if (completion.runId !== runId) throw new CheckpointError('invalid_argument', `a write to run ${runId} holds an effect of run ${completion.runId}`, { runId })
  if (completion.status !== 'succeeded' && completion.status !== 'failed') {
    throw new CheckpointError('invalid_argument', `effect status must be 'succeeded' or 'failed', got ${String(completion.status)}`)
  }
  assertWellFormed(completion.callId, 'effect callId', runId)
  return {
    runId,
    callId: completion.callId,
    status: completion.status,
    output: JSON.stringify(encodeValue(completion.output, 'effect output')),
    outputHash: hashValue(completion.output),
    completedAt: Date.now(),
  }
}

export function decodeEffectRow(row: EffectRow): EffectRecord {
  if (typeof row.inputHash === 'string' && row.inputHash.includes('|s1.')) {
    throw new CheckpointIntegrityError(
      `effect ${row.callId} of run ${row.runId} is signed, but this store has no keys: open it with its key ring ({ keys } or CAIRN_KEYS)`,
      { runId: row.runId },
    )
  }
  const context = { runId: row.runId, what: `output of effect ${row.callId}` }
  return { ...row, output: row.output === null ? undefined : decodeValue(parseJson(row.output, context), context) }
}
