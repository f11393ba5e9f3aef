import type { JsonObject } from '../core/codec.js'
import { CheckpointCorruptionError, CheckpointNotFoundError } from '../core/errors.js'
import { assertStoredShape, CONFIG_SIGNATURE_SCHEMA, INTERRUPT_STATE_SCHEMA, MESSAGE_SCHEMA } from '../agent/snapshot-schema.js'
import { toolUsesOf, type Message } from '../model/messages.js'
import type { CheckpointRecord, EffectRecord, RunRecord, StoreReader } from '../store/checkpoint-store.js'
import { RUNNER_KIND, RUNNER_PHASES, type RunnerPhase, type RuntimeSnapshot } from './phases.js'

/** What a resume found in the store. */
export type StoredRunState = (
  | { kind: 'terminal'; record: CheckpointRecord<Record<string, unknown>> }
  | { kind: 'resumable'; latest: CheckpointRecord<Record<string, unknown>>; runtime: RuntimeSnapshot; snapshotId: string }
) & {
  /** The run and its effects, read with the checkpoints (`openRun`). */
  opened: { run: RunRecord | undefined; effects: EffectRecord[] }
}

/** Whether a listed checkpoint holds a runtime snapshot a resume goes on from. */
export const isSnapshot = (info: { kind: string; metadata: Record<string, unknown> }): boolean => info.kind === RUNNER_KIND && info.metadata.snapshot === true

/**
 * The calls a resume may meet in the journal: those of the model response the run's snapshot
 * holds pending (the batch it goes on with). Every later call is new; earlier ones are answered in
 * the snapshot's messages. A record that is not a runner snapshot reads every effect: the checks
 * after the read report what is wrong with it.
 */
export function callsUnderWay({ latest, base }: { latest: CheckpointRecord | undefined; base: CheckpointRecord | undefined }): readonly string[] | 'all' {
  if (!latest) return []
  if (latest.kind === RUNNER_KIND && latest.phase === 'run_terminal') return []
  const source = latest.metadata.snapshot === true ? latest : base
  const runtime = (source?.payload as { runtime?: { pending_llm_response?: unknown } } | undefined)?.runtime
  if (source?.kind !== RUNNER_KIND || typeof runtime !== 'object' || runtime === null) return 'all'
  const pending = runtime.pending_llm_response
  if (pending === null || pending === undefined) return []
  return isToolUseMessage(pending) ? toolUsesOf(pending).map((use) => use.toolUseId) : 'all'
}

/** Every tool call id the run made, from its runtime record (which no conversation manager trims), read when first asked for. */
export function* callIdsOf(runtime: Pick<RuntimeSnapshot, 'tool_executions' | 'subagent_executions'>): Generator<string> {
  for (const execution of runtime.tool_executions) yield execution.tool_call_id
  for (const execution of runtime.subagent_executions ?? []) yield execution.tool_call_id
}

/**
 * The resume steps: load the latest checkpoint (none is `CheckpointNotFoundError`);
 * validate its shape; stop at a terminal one; otherwise find the newest runtime snapshot and
 * validate it, including a pending model response, which must decode — it is never replaced by
 * a fresh model call.
 */
export async function loadRunState(store: StoreReader, runId: string): Promise<StoredRunState> {
  // One read of the store: the run, its latest checkpoint, the snapshot it rests on, the effects of the calls under way.
  const opened = await store.openRun<Record<string, unknown>>(runId, { base: isSnapshot, effects: callsUnderWay })
  const { latest, base } = opened
  const read = { opened: { run: opened.run, effects: opened.effects } }
  if (!latest) {
    throw new CheckpointNotFoundError(`run ${runId} has no checkpoint to resume from: it never started, or its checkpoints were deleted; start it with runner.run`, { runId })
  }
  assertRunnerRecord(latest)
  if (latest.phase === 'run_terminal') {
    if (typeof latest.payload.state !== 'string') throw corrupt(latest, 'is a terminal checkpoint without a state')
    return { kind: 'terminal', record: latest, ...read }
  }
  const source = latest.metadata.snapshot === true ? latest : base ? (assertRunnerRecord(base), base) : await newestSnapshot(store, latest)
  const runtime = (source.payload as { runtime?: unknown }).runtime
  assertRuntime(runtime, source)
  return { kind: 'resumable', latest, runtime, snapshotId: source.id, ...read }
}

async function newestSnapshot(store: StoreReader, latest: CheckpointRecord): Promise<CheckpointRecord<Record<string, unknown>>> {
  let before: string | undefined = latest.id
  for (;;) {
    const page = await store.listCheckpoints({ runId: latest.runId, limit: 16, ...(before === undefined ? {} : { before }) })
    const found = page.find((info) => info.metadata.snapshot === true)
    if (found) {
      const record = await store.load<Record<string, unknown>>(found.id)
      assertRunnerRecord(record)
      return record
    }
    if (page.length < 16) throw corrupt(latest, 'has no runtime snapshot before it to resume from')
    before = page[page.length - 1]?.id
  }
}

function assertRunnerRecord(record: CheckpointRecord): asserts record is CheckpointRecord<Record<string, unknown>> {
  if (record.kind !== RUNNER_KIND) throw corrupt(record, `is a ${record.kind} checkpoint, not a runner checkpoint`)
  if (!RUNNER_PHASES.includes(record.phase as RunnerPhase)) throw corrupt(record, `has an unknown phase ${JSON.stringify(record.phase)}`)
  if (typeof record.payload !== 'object' || record.payload === null || Array.isArray(record.payload)) throw corrupt(record, 'has no payload object')
}

function assertRuntime(runtime: unknown, record: CheckpointRecord): asserts runtime is RuntimeSnapshot {
  if (typeof runtime !== 'object' || runtime === null) throw corrupt(record, 'lost its runtime snapshot')
  const rt = runtime as Partial<RuntimeSnapshot>
  const ok =
    Array.isArray(rt.messages) &&
    Number.isInteger(rt.step) &&
    (rt.next === 'model' || rt.next === 'tools') &&
    typeof rt.agent === 'object' &&
    rt.agent !== null &&
    typeof rt.agent.config?.hash === 'string' &&
    Array.isArray(rt.tool_executions)
  if (!ok) throw corrupt(record, 'has a malformed runtime snapshot (messages, step, next, agent or tool_executions)')
  if (rt.pending_llm_response !== null && rt.pending_llm_response !== undefined && !isToolUseMessage(rt.pending_llm_response)) {
    throw corrupt(record, 'holds a pending model response that cannot be decoded; refusing to call the model again for it')
  }
  assertStoredShape(RUNTIME_SCHEMA, runtime, { what: `the runtime snapshot of checkpoint ${record.id} of run ${record.runId}`, root: 'runtime', runId: record.runId, checkpointId: record.id })
  if (rt.next === 'tools' && !rt.pending_llm_response) throw corrupt(record, 'expects tool calls but holds no pending model response')
}

const COUNT = { type: 'integer', minimum: 0 }
const NUMBER = { type: 'number' }
const STRING = { type: 'string' }

/** The shape of everything a resume reads from a runtime snapshot. */
const RUNTIME_SCHEMA: JsonObject = {
  type: 'object',
  required: ['messages', 'step', 'next', 'agent', 'tool_executions'],
  properties: {
    messages: { type: 'array', items: MESSAGE_SCHEMA },
    step: COUNT,
    next: { enum: ['model', 'tools'] },
    context: { type: 'object' },
    llm_calls: COUNT,
    tool_calls: COUNT,
    started_at_s: NUMBER,
    usage: { type: 'object', additionalProperties: NUMBER },
    total_cost_usd: NUMBER,
    session_token: { type: ['string', 'null'] },
    checkpoint_token: { type: ['string', 'null'] },
    pending_llm_response: { anyOf: [{ type: 'null' }, MESSAGE_SCHEMA] },
    tool_executions: {
      type: 'array',
      items: {
        type: 'object',
        required: ['tool_call_id', 'tool_name', 'status'],
        properties: { tool_call_id: STRING, tool_name: STRING, step: COUNT, status: { enum: ['success', 'error'] }, replayed: { type: 'boolean' }, answer: { enum: ['retry', 'skip'] } },
      },
    },
    subagent_executions: {
      type: 'array',
      items: { type: 'object', required: ['tool_call_id', 'child_run_id'], properties: { tool_call_id: STRING, child_run_id: STRING, agent_name: STRING, step: COUNT, state: STRING } },
    },
    requested_model: STRING,
    normalized_model: STRING,
    provider_adapter: STRING,
    final_text: STRING,
    replayed_effect_count: COUNT,
    agent: {
      type: 'object',
      required: ['state', 'conversation_manager', 'interrupts', 'config'],
      properties: { state: { type: 'object' }, conversation_manager: { type: 'object' }, interrupts: INTERRUPT_STATE_SCHEMA, config: CONFIG_SIGNATURE_SCHEMA },
    },
  },
}

function isToolUseMessage(value: unknown): value is Message {
  if (typeof value !== 'object' || value === null) return false
  const message = value as Partial<Message>
  if (message.role !== 'assistant' || !Array.isArray(message.content)) return false
  try {
    return toolUsesOf(message as Message).every((use) => typeof use.toolUseId === 'string' && typeof use.name === 'string') && toolUsesOf(message as Message).length > 0
  } catch {
    return false
  }
}

function corrupt(record: CheckpointRecord, problem: string): CheckpointCorruptionError {
  return new CheckpointCorruptionError(`checkpoint ${record.id} of run ${record.runId} ${problem}`, { runId: record.runId, checkpointId: record.id })
}
