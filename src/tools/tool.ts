import type { JsonObject, JsonValue } from '../core/codec.js'
import { encodeValue } from '../core/codec.js'
import { CheckpointError } from '../core/errors.js'
import { hashValue } from '../core/hash.js'
import type { ToolResultBlock, ToolResultContent, ToolUseBlock } from '../model/messages.js'
import type { ToolSpec } from '../model/model.js'
import { jsonSchemaOf, validateInput, type InferInput, type InputSchema } from './input-schema.js'
import { InvalidArgumentError } from '../core/errors.js'

/** What a tool raises to pause the agent for a human (see {@link ToolContext.interrupt}). */
export interface InterruptRequest {
  /** What is being asked, e.g. `approve_payment`. */
  name: string
  /** Details for whoever answers. */
  reason?: JsonValue
  /** A deadline (a `Date` or Unix ms): past it, `onExpiry` happens and a late answer is refused. */
  expiresAt?: Date | number
  /**
   * What happens at `expiresAt`: `{ answer }` continues as if that were the answer; `'fail'`
   * (the default) fails the run with `InterruptExpiredError`; `{ escalate }` raises a new
   * interrupt (to someone else) in its place, with a deadline and policy of its own.
   */
  onExpiry?: InterruptExpiry
}

/** What happens when an interrupt's deadline passes (see {@link InterruptRequest.onExpiry}). */
export type InterruptExpiry = 'fail' | { answer: JsonValue } | { escalate: InterruptRequest }

/** What {@link ToolContext.waitForEvent} takes. */
export interface WaitForEventOptions {
  /** Only an event sent with this `match` (an order id, say). Default: one sent without a match. */
  match?: string
  /** Give up after this long: the call then returns `undefined`. Default: wait without a deadline. */
  timeoutMs?: number
}

/**
 * What durable time needs from the runner executing a tool: its clock and the store's events.
 * Cairn's runner provides it; applications do not implement it.
 */
export interface ToolTimeHost {
  now(): number
  /** The event this wait took before, else a free one it takes now; undefined when none is there. */
  takeEvent(request: { waitId: string; name: string; match: string }): Promise<{ payload: JsonValue } | undefined>
}

/** Key-value state of the agent, persisted in its snapshot. */
export interface AgentState {
  get<T = JsonValue>(key: string): T | undefined
  set(key: string, value: JsonValue): void
  delete(key: string): void
  toJSON(): JsonObject
}

/** What a tool's callback receives besides its input. */
export interface ToolContext {
  /** The call being made. */
  toolUse: ToolUseBlock['toolUse']
  /** Fires when the invocation is cancelled. */
  signal: AbortSignal
  /** Stable across attempts of this call (resumes, retries): pass it to the outside world to deduplicate. */
  idempotencyKey: string
  /** Per-invocation scratch space; set `stopEventLoop = true` to end the loop after this batch. */
  requestState: Record<string, unknown> & { stopEventLoop?: boolean }
  /** The agent's persisted key-value state. */
  agentState: AgentState
  /**
   * Pause for a human: the first time, the agent stops with `stopReason: 'interrupt'`; when the
   * caller resumes with an `interruptResponse` for this interrupt, the tool runs again and this
   * call returns the response. Do not catch the error it throws.
   */
  interrupt<R = JsonValue>(request: InterruptRequest): R
  /**
   * Sleep durably for `ms`: the run is stored `sleeping` with its wake time and its process, lease
   * and connection are let go; a worker resumes it at (never before) the wake time, and this tool
   * runs again from its start, this call returning at once. Code before the call runs again, as
   * before an interrupt; code after it runs once. Needs a `Runner` (or a worker) over a store with
   * `waits` (memory, SQLite, Postgres).
   */
  sleep(ms: number): Promise<void>
  /** {@link ToolContext.sleep} until `time` (a `Date` or Unix ms). */
  sleepUntil(time: Date | number): Promise<void>
  /**
   * Wait durably for an event sent with `client.send(name, payload, { match })` (or `cairn send`),
   * and return its payload: an event sent before this call is kept and taken now; else the run is
   * stored `waiting` and resumed when one arrives, this tool running again from its start. Each
   * event is taken by one wait only. With `timeoutMs`, returns `undefined` once it passed.
   */
  waitForEvent<T = JsonValue>(name: string, options?: WaitForEventOptions): Promise<T | undefined>
}

/** How to define a tool. */
export interface ToolDefinition<S extends InputSchema> {
  name: string
  description: string
  /** A Standard Schema (zod, valibot, arktype) or a JSON Schema object. */
  inputSchema: S
  /**
   * Returns the result: a string becomes a text block, anything else a JSON block. A thrown
   * error becomes an error result the model sees.
   */
  callback: (input: InferInput<S>, ctx: ToolContext) => unknown
  /**
   * True when running the tool twice with the same `ctx.idempotencyKey` has the effect of
   * running it once. The runner re-runs an idempotent tool whose outcome is unknown after a
   * crash; any other tool is surfaced to a human instead. Default false.
   */
  idempotent?: boolean
}

/** A tool the agent can call. */
export interface Tool {
  readonly name: string
  readonly description: string
  readonly idempotent: boolean
  /** True for an agent run as a tool by the runner (a child run). */
  readonly subagent?: boolean
  /** The spec sent to the model. */
  readonly spec: ToolSpec
  /** Hash of the spec, for configuration signatures. */
  readonly signature: string
  /** Validate the input (a bad input is an error result naming the field) and run the callback, which may throw. */
  run(toolUse: ToolUseBlock['toolUse'], ctx: ToolContext): Promise<ToolResultBlock['toolResult']>
}

const NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/

/**
 * Define a tool.
 *
 * @example
 * ```ts
 * const getWeather = tool({
 *   name: 'get_weather',
 *   description: 'Return the current weather for the given city.',
 *   inputSchema: z.object({ city: z.string() }),
 *   callback: async ({ city }) => `sunny in ${city}`,
 * })
 * ```
 */
export function tool<S extends InputSchema>(definition: ToolDefinition<S>): Tool {
  const { name, description, inputSchema, callback } = definition
  if (typeof name !== 'string' || !NAME_PATTERN.test(name)) {
    throw new InvalidArgumentError(`tool name ${JSON.stringify(name)} must be 1-64 letters, digits, _ or - (what model providers accept)`)
  }
  if (typeof callback !== 'function') throw new InvalidArgumentError(`tool ${name} needs a callback function`)
  const spec: ToolSpec = { name, description, inputSchema: jsonSchemaOf(inputSchema, name) }
  return {
    name,
    description,
    idempotent: definition.idempotent === true,
    spec,
    signature: hashValue(spec),
    async run(toolUse, ctx) {
      const validation = await validateInput(inputSchema, structuredClone(toolUse.input))
      if (!validation.ok) return errorResult(toolUse.toolUseId, `Invalid input for tool ${name}: ${validation.problem}`)
      const output: unknown = await callback(validation.value as InferInput<S>, ctx)
      let content: ToolResultContent[]
      try {
        content = toContent(output, name)
      } catch (err) {
        // A value no checkpoint can hold is the tool's answer being wrong, not the run failing.
        if (err instanceof CheckpointError) return errorResult(toolUse.toolUseId, unstorableResultText(name, err))
        throw err
      }
      return { toolUseId: toolUse.toolUseId, status: 'success', content }
    },
  }
}

/** An error tool result with one text block. */
export function errorResult(toolUseId: string, text: string): ToolResultBlock['toolResult'] {
  return { toolUseId, status: 'error', content: [{ text }] }
}

/** What the model is told when a tool's result cannot be stored (a cycle, a function, too deep, a BigInt too long). */
export function unstorableResultText(toolName: string, err: Error): string {
  return `Tool ${toolName} returned a result that cannot be stored, so none of it was kept: ${err.message}. The tool must return plain data (text, or JSON within Cairn's limits).`
}

function toContent(output: unknown, name: string): ToolResultContent[] {
  if (typeof output === 'string') return [{ text: output }]
  if (output === undefined) return [{ text: '' }]
  return [{ json: encodeValue(output, `result of tool ${name}`) }]
}
