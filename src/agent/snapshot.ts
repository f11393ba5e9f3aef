import type { JsonObject } from '../core/codec.js'
import { CheckpointError, InvalidArgumentError } from '../core/errors.js'
import type { Message } from '../model/messages.js'
import type { ConfigSignature } from './config-signature.js'
import type { InterruptState } from './interrupts.js'
import { AGENT_SNAPSHOT_SCHEMA, assertShape } from './snapshot-schema.js'

/** The version of the snapshot envelope. */
export const SNAPSHOT_SCHEMA_VERSION = '1.0'

/**
 * Everything an agent needs to continue, in a versioned envelope. Opaque to callers: persist it
 * as it is.
 */
export interface AgentSnapshot {
  scope: 'agent'
  schemaVersion: string
  /** ISO time. */
  createdAt: string
  data: {
    messages: Message[]
    state: JsonObject
    conversationManager: JsonObject
    interrupts: InterruptState
    config: ConfigSignature
  }
  appData: JsonObject
}

/** The parts of an agent's state a snapshot can hold (the configuration signature always goes in). */
export type SnapshotField = 'messages' | 'state' | 'conversationManager' | 'interrupts'

/** Every snapshot field; the `session` preset. */
export const SNAPSHOT_FIELDS: readonly SnapshotField[] = ['messages', 'state', 'conversationManager', 'interrupts']

/** A snapshot holding only some fields, as `agent.takeSnapshot({ include, exclude })` returns. */
export interface PartialAgentSnapshot extends Omit<AgentSnapshot, 'data'> {
  data: Partial<Omit<AgentSnapshot['data'], 'config'>> & { config: ConfigSignature }
}

/** Which fields a selection keeps: `include` (default: the `session` preset) minus `exclude`; never empty. */
export function selectFields(options: { preset?: 'session'; include?: readonly SnapshotField[]; exclude?: readonly SnapshotField[] }): SnapshotField[] {
  if (options.preset !== undefined && options.preset !== 'session') throw new InvalidArgumentError(`unknown snapshot preset ${JSON.stringify(options.preset)}; the preset is 'session'`)
  for (const field of [...(options.include ?? []), ...(options.exclude ?? [])]) {
    if (!SNAPSHOT_FIELDS.includes(field)) throw new InvalidArgumentError(`unknown snapshot field ${JSON.stringify(field)}; fields are ${SNAPSHOT_FIELDS.join(', ')}`)
  }
  const selected = (options.include ?? SNAPSHOT_FIELDS).filter((field) => !(options.exclude ?? []).includes(field))
  if (selected.length === 0) {
    throw new InvalidArgumentError('the snapshot selection is empty: include at least one of messages, state, conversationManager, interrupts')
  }
  return selected
}

/** Take a snapshot (deep copies). */
export function takeSnapshot(data: AgentSnapshot['data']): AgentSnapshot {
  return { scope: 'agent', schemaVersion: SNAPSHOT_SCHEMA_VERSION, createdAt: new Date().toISOString(), data: structuredClone(data), appData: {} }
}

/**
 * Check a snapshot before restoring from it — its envelope, then the shape of everything a
 * restore reads (messages, interrupt state, configuration signature) — so a malformed one is a
 * `CheckpointError` naming the path, never an error from deep inside. A checkpoint's snapshot
 * must hold every field.
 */
export function assertSnapshot(snapshot: AgentSnapshot | PartialAgentSnapshot, complete = true): void {
  const data = typeof snapshot === 'object' && snapshot !== null ? (snapshot as Partial<AgentSnapshot>).data : undefined
  if (typeof snapshot !== 'object' || snapshot === null || snapshot.scope !== 'agent' || typeof data !== 'object' || data === null) {
    throw new CheckpointError('checkpoint_invalid', 'checkpoint snapshot is not an agent snapshot; pass checkpoint.toJSON() unchanged')
  }
  if (snapshot.schemaVersion !== SNAPSHOT_SCHEMA_VERSION) {
    throw new CheckpointError('schema_mismatch', `snapshot schemaVersion ${JSON.stringify(snapshot.schemaVersion)} is not ${SNAPSHOT_SCHEMA_VERSION}`)
  }
  if (typeof data.config?.hash !== 'string') throw new CheckpointError('checkpoint_invalid', 'snapshot has no configuration signature')
  const missing = SNAPSHOT_FIELDS.filter((field) => data[field] === undefined)
  if (complete && missing.length > 0) throw new CheckpointError('checkpoint_invalid', `checkpoint snapshot is missing ${missing.join(', ')}`)
  if (data.messages !== undefined && !Array.isArray(data.messages)) throw new CheckpointError('checkpoint_invalid', 'snapshot messages must be a list')
  assertShape(AGENT_SNAPSHOT_SCHEMA, snapshot, 'snapshot')
}
