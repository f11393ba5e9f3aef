import type { JsonObject } from '../core/codec.js'
import { CheckpointCorruptionError, CheckpointError } from '../core/errors.js'
import { limits, maxJsonDepth, valueDepthBeyond } from '../core/limits.js'
import { validateJsonSchema } from '../tools/json-schema.js'

// The shapes of what a resume reads, as JSON Schemas checked by the same validator tool inputs
// use. Values Cairn carries without reading (tool inputs, JSON results, agent state values,
// provider metadata contents) are not constrained beyond the codec's limits.

const STRING = { type: 'string' }
const COUNT = { type: 'integer', minimum: 0 }
const OBJECT = { type: 'object' }
const PROVIDER_METADATA = { type: 'object', additionalProperties: OBJECT }

/** One tool result: what `toolResult` blocks and an interrupted batch's completed results hold. */
export const TOOL_RESULT_SCHEMA: JsonObject = {
  type: 'object',
  required: ['toolUseId', 'status', 'content'],
  properties: {
    toolUseId: STRING,
    status: { enum: ['success', 'error'] },
    content: { type: 'array', items: { type: 'object', anyOf: [{ required: ['text'], properties: { text: STRING } }, { required: ['json'] }] } },
  },
}

const MEDIA = {
  type: 'object',
  required: ['mediaType', 'source'],
  properties: {
    mediaType: STRING,
    name: STRING,
    source: { type: 'object', anyOf: [{ required: ['bytes'], properties: { bytes: OBJECT } }, { required: ['url'], properties: { url: STRING } }] },
  },
}

const block = (key: string, schema: JsonObject): JsonObject => ({ required: [key], properties: { [key]: schema, providerMetadata: PROVIDER_METADATA } })

/** One content block of a stored message. */
export const CONTENT_BLOCK_SCHEMA: JsonObject = {
  type: 'object',
  anyOf: [
    block('text', STRING),
    block('toolUse', { type: 'object', required: ['toolUseId', 'name'], properties: { toolUseId: STRING, name: STRING } }),
    block('toolResult', TOOL_RESULT_SCHEMA),
    block('reasoning', { type: 'object', required: ['text'], properties: { text: STRING, signature: STRING, redactedContent: STRING } }),
    block('image', MEDIA),
    block('document', MEDIA),
  ],
}

/** One stored message. */
export const MESSAGE_SCHEMA: JsonObject = {
  type: 'object',
  required: ['role', 'content'],
  properties: { role: { enum: ['user', 'assistant'] }, content: { type: 'array', items: CONTENT_BLOCK_SCHEMA } },
}

/** An agent's interrupt state. */
export const INTERRUPT_STATE_SCHEMA: JsonObject = {
  type: 'object',
  required: ['pending', 'completed', 'responses', 'cycleIndex'],
  properties: {
    pending: { type: 'array', items: { type: 'object', required: ['id', 'name', 'toolUseId'], properties: { id: STRING, name: STRING, toolUseId: STRING } } },
    completed: { type: 'array', items: TOOL_RESULT_SCHEMA },
    responses: OBJECT,
    cycleIndex: COUNT,
  },
}

/** An agent's configuration signature. */
export const CONFIG_SIGNATURE_SCHEMA: JsonObject = {
  type: 'object',
  required: ['hash', 'modelId', 'systemPrompt', 'tools'],
  properties: { hash: STRING, modelId: STRING, systemPrompt: STRING, tools: { type: 'object', additionalProperties: STRING } },
}

/** An agent snapshot; which data fields must be present is checked separately. */
export const AGENT_SNAPSHOT_SCHEMA: JsonObject = {
  type: 'object',
  required: ['scope', 'schemaVersion', 'data'],
  properties: {
    scope: { const: 'agent' },
    schemaVersion: STRING,
    createdAt: STRING,
    appData: OBJECT,
    data: {
      type: 'object',
      required: ['config'],
      properties: {
        messages: { type: 'array', items: MESSAGE_SCHEMA },
        state: OBJECT,
        conversationManager: OBJECT,
        interrupts: INTERRUPT_STATE_SCHEMA,
        config: CONFIG_SIGNATURE_SCHEMA,
      },
    },
  },
}

/**
 * Check a value a caller handed over (a checkpoint, a snapshot) before anything reads it: nested
 * deeper than the limits allow, or not of `schema`'s shape, is a {@link CheckpointError} (code
 * `checkpoint_invalid`) whose `path` and message name the place.
 */
export function assertShape(schema: JsonObject, value: unknown, what: string): void {
  const problem = shapeProblem(schema, value, what)
  if (problem !== undefined) {
    throw new CheckpointError('checkpoint_invalid', `${what} is malformed: ${problem.message}; pass it unchanged as Cairn wrote it`, { path: problem.path })
  }
}

/**
 * {@link assertShape} for a record read from a store: a problem is a
 * {@link CheckpointCorruptionError} naming the run and checkpoint.
 */
export function assertStoredShape(schema: JsonObject, value: unknown, where: { what: string; root: string; runId: string; checkpointId?: string }): void {
  const problem = shapeProblem(schema, value, where.root)
  if (problem !== undefined) {
    throw new CheckpointCorruptionError(`${where.what} is malformed: ${problem.message}`, { runId: where.runId, checkpointId: where.checkpointId, path: problem.path })
  }
}

function shapeProblem(schema: JsonObject, value: unknown, root: string): { message: string; path: string } | undefined {
  const deep = valueDepthBeyond(value, maxJsonDepth())
  if (deep !== undefined) return { message: `${root}${deep.slice(0, 120)} nests deeper than the limits allow (maxDepth ${limits().maxDepth})`, path: `${root}${deep}` }
  const problem = validateJsonSchema(schema, value, root)
  if (problem === undefined) return undefined
  const colon = problem.indexOf(': ')
  return { message: problem, path: colon < 0 ? root : problem.slice(0, colon) }
}
