import { InvalidArgumentError } from '../../core/errors.js'
import { RUN_STATUSES, type CheckpointInput, type Fence, type RunStatus } from '../store-types.js'

const ID_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,199}$/

/**
 * Ids (run, checkpoint, cursor) are 1–200 characters of letters, digits and `_ . : @ -`, not
 * starting with `.` or `-`: safe as file names and never a path.
 */
export function assertId(value: unknown, name: string): asserts value is string {
  if (typeof value !== 'string' || !ID_PATTERN.test(value) || value.includes('..')) {
    throw new InvalidArgumentError(
      `${name} ${shown(value)} is not a valid id: use 1-200 letters, digits or _ . : @ - (not starting with . or -, no '..')`,
    )
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/**
 * Strings a store keeps in columns of their own must be well-formed UTF-16: a lone surrogate
 * (half of a character, as when an emoji is cut in the middle) has no UTF-8 form, so a SQL
 * backend would store a replacement character or a record it cannot read back. Refused on every
 * backend alike. (Payloads, metadata and effect outputs are stored as JSON, which escapes them.)
 */
export function assertWellFormed(value: unknown, field: string, runId?: string): void {
  if (typeof value !== 'string') return
  const at = value.search(LONE_SURROGATE)
  if (at < 0) return
  throw new InvalidArgumentError(
    `${field} holds a lone UTF-16 surrogate at index ${at} (half of a character, as when a string is cut in the middle of an emoji); cut strings at code-point boundaries, or drop the broken character`,
    { runId },
  )
}

export function assertCheckpointInput(input: CheckpointInput<unknown>): void {
  if (typeof input !== 'object' || input === null) throw new InvalidArgumentError('save needs a checkpoint object')
  assertId(input.runId, 'runId')
  if (input.id !== undefined) assertId(input.id, 'id')
  if (input.parentId !== undefined && input.parentId !== null) assertId(input.parentId, 'parentId')
  for (const key of ['kind', 'phase'] as const) {
    if (typeof input[key] !== 'string' || input[key] === '' || input[key].includes('\u0000')) {
      throw new InvalidArgumentError(`checkpoint ${key} must be a non-empty string without NUL characters`, { runId: input.runId })
    }
    assertWellFormed(input[key], `checkpoint ${key}`, input.runId)
  }
  assertWellFormed(input.workflowName, 'checkpoint workflowName', input.runId)
  if (typeof input.workflowName === 'string' && (input.workflowName === '' || input.workflowName.includes('\u0000'))) {
    throw new InvalidArgumentError('workflowName must be a non-empty string without NUL characters', { runId: input.runId })
  }
  if (input.seq !== undefined && (!Number.isSafeInteger(input.seq) || input.seq < 1)) {
    throw new InvalidArgumentError(`seq must be a positive integer, got ${String(input.seq)}`, { runId: input.runId })
  }
  if (input.schemaVersion !== undefined && (!Number.isInteger(input.schemaVersion) || input.schemaVersion < 1)) {
    throw new InvalidArgumentError(`schemaVersion must be a positive integer, got ${String(input.schemaVersion)}`, {
      runId: input.runId,
    })
  }
  if (input.createdAt !== undefined && !Number.isFinite(input.createdAt)) {
    throw new InvalidArgumentError('createdAt must be Unix milliseconds', { runId: input.runId })
  }
  if (!Object.prototype.hasOwnProperty.call(input, 'payload')) {
    throw new InvalidArgumentError('checkpoint needs a payload', { runId: input.runId })
  }
}

/** A fence names a run, a non-empty owner and an integer epoch. */
export function assertFence(fence: Fence): void {
  assertId(fence?.runId, 'runId')
  if (typeof fence.owner !== 'string' || fence.owner === '' || !Number.isSafeInteger(fence.epoch)) {
    throw new InvalidArgumentError('a fence needs a run id, a non-empty owner and an integer epoch', { runId: fence.runId })
  }
}

export function assertRunPatch(patch: { status?: unknown; name?: unknown; threadId?: unknown; workflowName?: unknown; configSignature?: unknown }): void {
  if (patch.status !== undefined && !RUN_STATUSES.includes(patch.status as RunStatus)) {
    throw new InvalidArgumentError(`run status must be one of ${RUN_STATUSES.join(', ')}, got ${shown(patch.status)}`)
  }
  for (const key of ['name', 'threadId', 'workflowName', 'configSignature'] as const) {
    const value = patch[key]
    if (value !== undefined && value !== null && (typeof value !== 'string' || value.includes('\u0000'))) {
      throw new InvalidArgumentError(`run ${key} must be a string without NUL characters, or null`)
    }
    assertWellFormed(value, `run ${key}`)
  }
}

/** A value as a message shows it: a string quoted and cut short, anything else by its type. */
function shown(value: unknown): string {
  if (typeof value === 'string') return value.length > 80 ? `${JSON.stringify(value.slice(0, 80))}…` : JSON.stringify(value)
  if (value === null || typeof value === 'number' || typeof value === 'boolean') return String(value)
  return Array.isArray(value) ? 'a list' : `a value of type ${typeof value}`
}
