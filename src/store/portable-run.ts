import { decodeValue, encodeValue, serialize, type JsonObject, type JsonValue } from '../core/codec.js'
import { CairnError, CheckpointError, InvalidArgumentError } from '../core/errors.js'
import { hashEncoded, sha256 } from '../core/hash.js'
import { limits, maxJsonDepth, valueDepthBeyond } from '../core/limits.js'
import type { CheckpointInput, EffectRecord, RunRecord, RunStore, StoreReader } from './checkpoint-store.js'
import { allCheckpoints } from './delegating-store.js'
import { EFFECT_STATUSES, type EffectStatus } from './store-types.js'

/** The format tag of a {@link RunDocument}. */
export const RUN_DOCUMENT_FORMAT = 'cairn-run'

/**
 * One run with its checkpoints and effect journal as one portable JSON document: what
 * `cairn export` writes and `cairn import` reads, from and to any store. Payloads and effect
 * outputs are in the codec's tagged JSON (Dates, Maps, bytes and BigInts survive).
 */
export interface RunDocument {
  format: typeof RUN_DOCUMENT_FORMAT
  version: 1
  run: RunRecord
  checkpoints: {
    id: string
    parentId: string | null
    seq: number
    kind: string
    phase: string
    schemaVersion: number
    createdAt: number
    workflowName: string | null
    terminal: boolean
    metadata: JsonObject
    payload: JsonValue
  }[]
  effects: (Omit<EffectRecord, 'output'> & { output: JsonValue })[]
}

const CHUNK = 200

/** Read a run into a {@link RunDocument}. `onProgress` is told how many checkpoints were read. */
export async function exportRun(store: StoreReader, runId: string, onProgress?: (done: number, total: number) => void): Promise<RunDocument> {
  const run = await store.getRun(runId)
  if (!run) throw new CairnError('run_not_found', `run ${runId} is not in this store; list the runs with \`cairn runs\``)
  const infos = await allCheckpoints(store, runId)
  const checkpoints: RunDocument['checkpoints'] = []
  for (let at = 0; at < infos.length; at += CHUNK) {
    for (const record of await store.loadMany(infos.slice(at, at + CHUNK).map((info) => info.id))) {
      const { checkpointId: _same, runId: _run, payload, ...fields } = record
      checkpoints.push({ ...fields, payload: encodeValue(payload, `checkpoint ${record.id}`) })
    }
    onProgress?.(checkpoints.length, infos.length)
  }
  const effects = (await store.listEffects(runId)).map((effect) => ({ ...effect, output: encodeValue(effect.output, `effect ${effect.callId}`) }))
  return { format: RUN_DOCUMENT_FORMAT, version: 1, run, checkpoints, effects }
}

/**
 * Write a {@link RunDocument} into `store` under the same run id, checkpoint ids, seqs and start
 * time. A run id the store already holds is refused, and so is a document that does not verify
 * (an effect of an unknown status, a finished effect without its output, an output that does not
 * match its `outputHash`), before anything is written. Effects keep their outcome; their times
 * become the import's.
 */
export async function importRun(store: RunStore, document: unknown, onProgress?: (done: number, total: number) => void): Promise<RunRecord> {
  const doc = assertDocument(document)
  const { runId, status, name, threadId, workflowName, configSignature, metadata, createdAt } = doc.run
  if (await store.getRun(runId)) {
    throw new CheckpointError('run_exists', `run ${runId} is already in this store; delete it first or import into another store`, { runId })
  }
  await store.createRun({ runId, status, name, threadId, workflowName, configSignature, metadata, ...(createdAt === undefined ? {} : { createdAt }) })
  const effects = doc.effects
  if (effects.length > 0) {
    const done = effects.filter((e) => e.status === 'succeeded' || e.status === 'failed')
    await store.write({
      runId,
      intents: effects.map((e) => ({ runId, callId: e.callId, name: e.name, inputHash: e.inputHash, idempotencyKey: e.idempotencyKey })),
      completions: done.map((e) => ({ runId, callId: e.callId, status: e.status as 'succeeded' | 'failed', output: decodeValue(e.output) })),
    })
    for (const e of effects.filter((x) => x.status === 'started')) await store.startEffect(runId, e.callId)
  }
  // After the effects: a tool result the conversation holds is then stored once, in its effect.
  for (let at = 0; at < doc.checkpoints.length; at += CHUNK) {
    const checkpoints: CheckpointInput[] = doc.checkpoints.slice(at, at + CHUNK).map((c) => ({ ...c, runId, payload: decodeValue(c.payload) }))
    await store.write({ runId, checkpoints })
    onProgress?.(Math.min(at + CHUNK, doc.checkpoints.length), doc.checkpoints.length)
  }
  return store.updateRun(runId, { status, metadata })
}

function assertDocument(value: unknown): RunDocument {
  const doc = value as Partial<RunDocument> | null
  if (typeof doc !== 'object' || doc === null || doc.format !== RUN_DOCUMENT_FORMAT || doc.version !== 1 || !doc.run || !Array.isArray(doc.checkpoints) || !Array.isArray(doc.effects)) {
    throw new InvalidArgumentError(`not a Cairn run document (expected {"format":"${RUN_DOCUMENT_FORMAT}","version":1,...}); make one with \`cairn export RUN\``)
  }
  const problem = documentProblem(doc as RunDocument)
  if (problem !== undefined) throw new InvalidArgumentError(`the run document is malformed: ${problem}; import a document made by \`cairn export RUN\` unchanged`)
  return doc as RunDocument
}

/** The first place where a run document is not of the shape `cairn export` writes, if any. */
function documentProblem(doc: RunDocument): string | undefined {
  const deep = valueDepthBeyond(doc, maxJsonDepth())
  if (deep !== undefined) return `document${deep.slice(0, 120)} nests deeper than the limits allow (maxDepth ${limits().maxDepth})`
  const run = doc.run as unknown as Record<string, unknown>
  if (typeof run !== 'object' || typeof run.runId !== 'string' || typeof run.status !== 'string') return 'run needs a runId and a status'
  for (const key of ['name', 'threadId', 'workflowName', 'configSignature'] as const) if (run[key] !== undefined && run[key] !== null && typeof run[key] !== 'string') return `run.${key} is not a string`
  if (run.metadata !== undefined && !isObject(run.metadata)) return 'run.metadata is not an object'
  for (const [i, c] of (doc.checkpoints as unknown[]).entries()) {
    if (!isObject(c)) return `checkpoints[${i}] is not an object`
    for (const key of ['id', 'kind', 'phase'] as const) if (typeof c[key] !== 'string') return `checkpoints[${i}].${key} is not a string`
    if (!Number.isSafeInteger(c.seq)) return `checkpoints[${i}].seq is not an integer`
    if (c.metadata !== undefined && !isObject(c.metadata)) return `checkpoints[${i}].metadata is not an object`
  }
  if (run.createdAt !== undefined && (!Number.isSafeInteger(run.createdAt) || (run.createdAt as number) < 0)) return 'run.createdAt is not a time in Unix milliseconds'
  const callIds = new Set<string>()
  for (const [i, e] of (doc.effects as unknown[]).entries()) {
    if (!isObject(e)) return `effects[${i}] is not an object`
    for (const key of ['callId', 'name', 'inputHash', 'idempotencyKey', 'status'] as const) if (typeof e[key] !== 'string') return `effects[${i}].${key} is not a string`
    if (callIds.has(e.callId as string)) return `effects[${i}] (call ${JSON.stringify(e.callId)}) appears twice; a journal holds one effect per call`
    callIds.add(e.callId as string)
    const problem = effectProblem(e)
    if (problem !== undefined) return `effects[${i}] (call ${JSON.stringify(e.callId)}) ${problem}`
  }
  return undefined
}

/**
 * Why an effect of a document cannot be imported as it is, if it cannot: its status is not one a
 * journal holds, or its outcome does not agree with its status and its hash. An imported outcome
 * is handed to the model on a resume as the tool's result, and a keyed store signs it: an output
 * that does not match the hash it was exported with was altered, and is refused.
 */
function effectProblem(e: Record<string, unknown>): string | undefined {
  const status = e.status as EffectStatus
  if (!EFFECT_STATUSES.includes(status)) return `has an unknown status ${JSON.stringify(status).slice(0, 80)}; a journal holds ${EFFECT_STATUSES.join(', ')}`
  let output: unknown
  try {
    // Decoding rewrites its input in place: decode a copy, the document is decoded again to import it.
    output = e.output === undefined ? undefined : decodeValue(structuredClone(e.output), { what: `output of effect ${String(e.callId)}` })
  } catch (err) {
    return `has an output that cannot be read (${(err as Error).message})`
  }
  if (status === 'pending' || status === 'started') {
    // `cairn export` writes the absent output of an unfinished effect as the codec's undefined.
    if ((output !== undefined && output !== null) || (e.outputHash !== undefined && e.outputHash !== null)) return `is ${status} but holds an outcome`
    return undefined
  }
  if (e.output === undefined) return `is ${status} but has no output`
  if (typeof e.outputHash !== 'string') return `is ${status} but has no outputHash`
  const text = serialize(output, `output of effect ${String(e.callId)}`)
  // The hash of the output's text as stored, or (written before that form) of its canonical JSON.
  if (sha256(text) !== e.outputHash && hashEncoded(e.output as JsonValue) !== e.outputHash) {
    return 'has an output that does not match its outputHash: the document was altered after `cairn export` wrote it'
  }
  return undefined
}


function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
