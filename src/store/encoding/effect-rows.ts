import { decodeValue, parseJson, serialize, type JsonValue } from '../../core/codec.js'
import { CairnError, CheckpointCorruptionError, CheckpointIntegrityError, InvalidArgumentError } from '../../core/errors.js'
import { digestMatches, matchesEncodedHash, sha256, STORED_DIGEST_CHARS } from '../../core/hash.js'
import type { EffectCompletion, EffectIntent, EffectRecord } from '../checkpoint-store.js'
import type { EffectCompletionRow, EffectRow } from '../engine/rows.js'
import { EFFECT_STATUSES } from '../store-types.js'
import { assertId, assertWellFormed } from './validate.js'

/** The engine row of an effect intent, checked: a new intent is `pending` with one attempt. */
export function intentRow(intent: EffectIntent, runId: string): EffectRow {
  assertOfRun(intent.runId, runId)
  for (const key of REQUIRED_TEXT) {
    if (typeof intent[key] !== 'string' || intent[key] === '') {
      throw new InvalidArgumentError(`effect intent needs a non-empty string ${key}`, { runId })
    }
    assertWellFormed(intent[key], `effect ${key}`, runId)
  }
  const { callId, name, inputHash, idempotencyKey } = intent
  const stored = withDigest(inputHash, intentDigest(runId, callId, name, inputHash, idempotencyKey))
  return { runId, callId, name, inputHash: stored, idempotencyKey, status: 'pending', output: null, outputHash: null, attempts: 1, startedAt: Date.now(), completedAt: null }
}

/** The engine row of an effect outcome, its output encoded and hashed. */
export function completionRow(completion: EffectCompletion, runId: string): EffectCompletionRow {
  assertOfRun(completion.runId, runId)
  const { callId, status } = completion
  if (status !== 'succeeded' && status !== 'failed') {
    throw new InvalidArgumentError(`effect status must be 'succeeded' or 'failed', got ${String(status)}`)
  }
  assertWellFormed(callId, 'effect callId', runId)
  const output = serialize(completion.output, 'effect output')
  const outputHash = `${TEXT_HASH}${sha256(output)}`
  return { runId, callId, status, output, outputHash: withDigest(outputHash, outcomeDigest(runId, callId, status, outputHash)), completedAt: Date.now() }
}

function assertOfRun(effectRunId: string, runId: string): void {
  assertId(effectRunId, 'runId')
  if (effectRunId !== runId) throw new InvalidArgumentError(`a write to run ${runId} holds an effect of run ${effectRunId}`, { runId })
}

/**
 * An effect row as callers see it, checked: its fields have their types, its status agrees with
 * whether it holds an outcome, and its output matches the hash written with it. Anything else is
 * a {@link CheckpointCorruptionError} naming the run and the call: a journaled outcome is handed
 * to the model as the tool's result on a resume, so an altered one must never be used.
 */
export function decodeEffectRow(row: EffectRow): EffectRecord {
  const plain = { ...row, ...checkDigests(row) }
  const output = plain.output === null ? undefined : decodeOutput(plain, plain.output)
  // Callers see the SHA-256 alone, of either form (see TEXT_HASH).
  const outputHash = plain.outputHash?.startsWith(TEXT_HASH) === true ? plain.outputHash.slice(TEXT_HASH.length) : plain.outputHash
  return { ...plain, output, outputHash }
}

/** The row's shape and digests checked; its input and output hashes split from their digests. */
function checkDigests(row: EffectRow): { inputHash: string; outputHash: string | null } {
  if (typeof row.inputHash === 'string' && row.inputHash.includes('|s1.')) {
    throw new CheckpointIntegrityError(
      `effect ${row.callId} of run ${row.runId} is signed, but this store has no keys: open it with its key ring ({ keys } or CAIRN_KEYS)`,
      { runId: row.runId },
    )
  }
  const problem = shapeProblem(row)
  if (problem !== undefined) throw effectCorrupt(row, problem)
  const [inputHash, intent] = splitDigest(row.inputHash)
  if (intent !== undefined && !digestMatches(intent, intentDigest(row.runId, row.callId, row.name, inputHash, row.idempotencyKey))) {
    throw effectCorrupt(row, 'has a name, input hash or idempotency key other than its intent recorded: the record was edited after it was written')
  }
  // A row written before intent digests holds the input's SHA-256 alone; anything else there was edited.
  if (intent === undefined && !LEGACY_INPUT_HASH.test(inputHash)) {
    throw effectCorrupt(row, 'has an input hash that is neither a SHA-256 nor followed by its intent digest: the record was edited after it was written')
  }
  if (row.outputHash === null) return { inputHash, outputHash: null }
  const [outputHash, outcome] = splitDigest(row.outputHash)
  if (outcome !== undefined && !digestMatches(outcome, outcomeDigest(row.runId, row.callId, row.status, outputHash))) {
    throw effectCorrupt(row, 'has a status other than its outcome recorded: the record was edited after it was written')
  }
  return { inputHash, outputHash }
}

/** A stored value and the digest after it (undefined: a row written before digests). */
function splitDigest(stored: string): [string, string | undefined] {
  const at = stored.lastIndexOf(DIGEST)
  return at < 0 ? [stored, undefined] : [stored.slice(0, at), stored.slice(at + DIGEST.length)]
}

/** The output of a finished effect, checked against its hash; anything thrown that is not a Cairn error is damage too. */
function decodeOutput(row: EffectRow, output: string): unknown {
  const textHash = row.outputHash?.startsWith(TEXT_HASH) === true
  const mismatch = () => effectCorrupt(row, 'has an output that does not match its hash: the record was edited or damaged after it was written')
  if (textHash && row.outputHash !== `${TEXT_HASH}${sha256(output)}`) throw mismatch()
  const context = { runId: row.runId, what: `output of effect ${row.callId} of run ${row.runId}` }
  try {
    const parsed = parseJson(output, context) as JsonValue
    if (!textHash && !matchesEncodedHash(parsed, output, row.outputHash!)) throw mismatch()
    return decodeValue(parsed, context)
  } catch (err) {
    if (err instanceof CairnError) throw err
    throw effectCorrupt(row, `has an output that cannot be read (${(err as Error).message})`, err)
  }
}

/**
 * An output hash of this form is the SHA-256 of the output's text as stored (so a check needs no
 * parse, and the writer no second walk of the value); one without it, written before, is the
 * SHA-256 of the output's canonical JSON (`hashValue`).
 */
const TEXT_HASH = 't1.'

const REQUIRED_TEXT = ['callId', 'name', 'inputHash', 'idempotencyKey'] as const

/**
 * A digest rides after the value it protects (`<value>|d1.<sha256>`), so the row keeps its
 * columns: over an intent's run, call, name, input hash and idempotency key (stored with the
 * input hash), and over an outcome's run, call, status and output hash (stored with the output
 * hash). Rows written before digests have none and are read as they are.
 */
const DIGEST = '|d1.'
/** The input hash of a row written before intent digests: a SHA-256 in hex. */
const LEGACY_INPUT_HASH = /^[0-9a-f]{64}$/

function withDigest(value: string, digest: string): string {
  return `${value}${DIGEST}${digest.slice(0, STORED_DIGEST_CHARS)}`
}

function intentDigest(runId: string, callId: string, name: string, inputHash: string, idempotencyKey: string): string {
  return sha256(JSON.stringify(['effect-intent', runId, callId, name, inputHash, idempotencyKey]))
}

function outcomeDigest(runId: string, callId: string, status: string, outputHash: string): string {
  return sha256(JSON.stringify(['effect-outcome', runId, callId, status, outputHash]))
}

function shapeProblem(row: EffectRow): string | undefined {
  const missing = REQUIRED_TEXT.find((key) => typeof row[key] !== 'string' || row[key] === '')
  if (missing !== undefined) return `has no ${missing}`
  if (!EFFECT_STATUSES.includes(row.status)) return `has an unknown status ${JSON.stringify(row.status)}`
  if (!Number.isSafeInteger(row.attempts) || row.attempts < 1) return `has a malformed attempt count (${String(row.attempts)})`
  const done = row.status === 'succeeded' || row.status === 'failed'
  if (!done && (row.output !== null || row.outputHash !== null)) {
    return `is marked ${row.status} but holds an outcome: its status was rolled back (a resume would run the call again)`
  }
  if (done && (typeof row.output !== 'string' || typeof row.outputHash !== 'string')) return `is marked ${row.status} but holds no output or no output hash`
  return undefined
}

function effectCorrupt(row: Pick<EffectRow, 'runId' | 'callId'>, problem: string, cause?: unknown): CheckpointCorruptionError {
  return new CheckpointCorruptionError(`effect ${String(row.callId)} of run ${String(row.runId)} ${problem}`, { runId: typeof row.runId === 'string' ? row.runId : undefined, cause })
}
