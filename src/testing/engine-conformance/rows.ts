import type { CommitRequest } from '../../store/engine/storage-engine.js'
import type { CheckpointRow, EffectRow, ListAppend, RunRow } from '../../store/engine/rows.js'

/** A run row with plain defaults. */
export function runRow(fields: Partial<RunRow> & { runId: string }): RunRow {
  return {
    status: 'running',
    name: null,
    threadId: null,
    workflowName: null,
    configSignature: null,
    lastSeq: 0,
    createdAt: 1,
    updatedAt: fields.createdAt ?? 1,
    metadata: '{}',
    ...fields,
  }
}

/** A checkpoint row whose `lists` refs cover `appends` (the engine never checks body or digest). */
export function checkpointRow(fields: Partial<CheckpointRow> & { id: string; runId: string; seq: number }, appends: readonly ListAppend[] = []): CheckpointRow {
  return {
    parentId: null,
    kind: 'demo',
    phase: 'p',
    schemaVersion: 1,
    createdAt: 10 + fields.seq,
    workflowName: null,
    terminal: false,
    metadata: '{}',
    body: '{}',
    lists: JSON.stringify(appends.map((append) => ({ id: append.listId, n: append.expectedLength + append.items.length, h: '' }))),
    digest: 'd',
    ...fields,
  }
}

/** A commit of one checkpoint of `runId` with its appends and effect intents. */
export function commitOne(params: { runId: string; id: string; seq: number; appends?: ListAppend[]; intents?: EffectRow[] }): CommitRequest {
  const { runId, id, seq, appends = [], intents } = params
  const row = checkpointRow({ id, runId, seq }, appends)
  return { rows: [row], appends, run: runRow({ runId, createdAt: row.createdAt }), ...(intents ? { effects: { intents } } : {}) }
}

/** A pending effect row with plain defaults. */
export function effectRow(fields: Partial<EffectRow> & { runId: string; callId: string }): EffectRow {
  return {
    name: 'tool',
    inputHash: 'in',
    idempotencyKey: `${fields.runId}:${fields.callId}`,
    status: 'pending',
    output: null,
    outputHash: null,
    attempts: 1,
    startedAt: 1,
    completedAt: null,
    ...fields,
  }
}
