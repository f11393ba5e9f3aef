import type { JsonObject } from '../core/codec.js'
import { CheckpointError } from '../core/errors.js'
import { limits, maxJsonDepth, valueDepthBeyond } from '../core/limits.js'
import { assertSnapshot, type AgentSnapshot } from './snapshot.js'

/** Where in a cycle a checkpoint was taken: after the model asked for tools, or after they ran. */
export type CheckpointPosition = 'after_model' | 'after_tools'

/** The version of the checkpoint format this code writes and reads. */
export const CHECKPOINT_SCHEMA_VERSION = '1.0'

/** A checkpoint as plain JSON: what `toJSON` returns and `fromJSON` takes. */
export interface CheckpointJSON {
  position: CheckpointPosition
  cycleIndex: number
  schemaVersion: string
  snapshot: AgentSnapshot
  appData: JsonObject
}

const KNOWN_KEYS = new Set(['position', 'cycleIndex', 'schemaVersion', 'snapshot', 'appData'])

/**
 * A pause point of an agent run, returned in `result.checkpoint` when `stopReason` is
 * `'checkpoint'`. Persist `toJSON()` anywhere and resume with
 * `agent.invoke([{ checkpointResume: { checkpoint } }])` on an agent built with the same model,
 * tools and system prompt. The snapshot is opaque: do not edit it.
 */
export class Checkpoint {
  readonly position: CheckpointPosition
  /** Zero-based index of the cycle (model call plus tools) that emitted this checkpoint. */
  readonly cycleIndex: number
  readonly schemaVersion: string = CHECKPOINT_SCHEMA_VERSION
  /** Messages, agent state, conversation-manager state, interrupt state and configuration signature. */
  readonly snapshot: AgentSnapshot
  /** Your own JSON, carried unchanged. */
  appData: JsonObject

  constructor(params: { position: CheckpointPosition; cycleIndex?: number; snapshot: AgentSnapshot; appData?: JsonObject }) {
    this.position = params.position
    this.cycleIndex = params.cycleIndex ?? 0
    this.snapshot = params.snapshot
    this.appData = params.appData ?? {}
  }

  /** Plain JSON that survives `JSON.parse(JSON.stringify(...))`. */
  toJSON(): CheckpointJSON {
    return structuredClone({
      position: this.position,
      cycleIndex: this.cycleIndex,
      schemaVersion: this.schemaVersion,
      snapshot: this.snapshot,
      appData: this.appData,
    })
  }

  /**
   * Rebuild a checkpoint from `toJSON()` output. A missing or different `schemaVersion` is a
   * `CheckpointError` with code `'schema_mismatch'`; unknown keys are reported with a warning
   * and ignored. The snapshot's shape is checked before anything reads it: a malformed one is a
   * `CheckpointError` (`checkpoint_invalid`) naming the path.
   */
  static fromJSON(data: unknown): Checkpoint {
    if (typeof data !== 'object' || data === null || Array.isArray(data)) {
      throw new CheckpointError('checkpoint_invalid', 'a checkpoint must be the object produced by checkpoint.toJSON()')
    }
    const deep = valueDepthBeyond(data, maxJsonDepth())
    if (deep !== undefined) {
      throw new CheckpointError('checkpoint_invalid', `checkpoint${deep.slice(0, 120)} nests deeper than the limits allow (maxDepth ${limits().maxDepth})`, { path: `checkpoint${deep}` })
    }
    const record = data as Record<string, unknown>
    if (record.schemaVersion !== CHECKPOINT_SCHEMA_VERSION) {
      throw new CheckpointError(
        'schema_mismatch',
        record.schemaVersion === undefined
          ? `checkpoint has no schemaVersion; this version of Cairn reads checkpoints of schema ${CHECKPOINT_SCHEMA_VERSION}`
          : `checkpoint has schemaVersion ${JSON.stringify(record.schemaVersion)}, but this version of Cairn reads ${CHECKPOINT_SCHEMA_VERSION}`,
      )
    }
    const unknown = Object.keys(record).filter((key) => !KNOWN_KEYS.has(key))
    if (unknown.length > 0) process.emitWarning(`ignoring unknown checkpoint keys: ${unknown.join(', ')}`, 'CairnWarning')
    if (record.position !== 'after_model' && record.position !== 'after_tools') {
      throw new CheckpointError('checkpoint_invalid', `checkpoint position must be 'after_model' or 'after_tools', got ${JSON.stringify(record.position)}`)
    }
    const cycleIndex = record.cycleIndex ?? 0
    if (!Number.isInteger(cycleIndex) || (cycleIndex as number) < 0) {
      throw new CheckpointError('checkpoint_invalid', `checkpoint cycleIndex must be a non-negative integer, got ${JSON.stringify(cycleIndex)}`)
    }
    if (typeof record.snapshot !== 'object' || record.snapshot === null) throw new CheckpointError('checkpoint_invalid', 'checkpoint has no snapshot')
    assertSnapshot(record.snapshot as AgentSnapshot)
    const appData = record.appData ?? {}
    if (typeof appData !== 'object' || appData === null || Array.isArray(appData)) {
      throw new CheckpointError('checkpoint_invalid', 'checkpoint appData must be an object')
    }
    return new Checkpoint({
      position: record.position,
      cycleIndex: cycleIndex as number,
      snapshot: structuredClone(record.snapshot) as AgentSnapshot,
      appData: structuredClone(appData) as JsonObject,
    })
  }
}
