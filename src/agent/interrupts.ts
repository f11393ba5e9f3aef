import type { JsonValue } from '../core/codec.js'
import type { ToolResultBlock, ToolUseBlock } from '../model/messages.js'
import type { InterruptRequest } from '../tools/tool.js'
import { InvalidArgumentError } from '../core/errors.js'

/** A pause raised by a tool, waiting for a human's response. */
export interface Interrupt {
  /** Answer it with `{ interruptResponse: { interruptId: id, response } }`. */
  id: string
  name: string
  reason?: JsonValue
  /** The tool call that raised it. */
  toolUseId: string
}

/** The agent's interrupt state: persisted in snapshots. */
export interface InterruptState {
  /** Interrupts raised and not yet answered. */
  pending: Interrupt[]
  /** Results of the interrupted batch's tools that had completed; they are not run again. */
  completed: ToolResultBlock['toolResult'][]
  /** Responses given so far, by interrupt id. */
  responses: Record<string, JsonValue>
  /** The cycle whose tools were interrupted. */
  cycleIndex: number
}

/** Thrown by `ctx.interrupt` to stop a tool until a response arrives. Never catch it in a tool. */
export class InterruptSignal extends Error {
  readonly interrupt: Interrupt

  constructor(interrupt: Interrupt) {
    super(`tool ${interrupt.toolUseId} raised interrupt ${interrupt.name}`)
    this.name = 'InterruptSignal'
    this.interrupt = interrupt
  }
}

/** An empty interrupt state. */
export function noInterrupts(): InterruptState {
  return { pending: [], completed: [], responses: {}, cycleIndex: 0 }
}

/** The stable id of an interrupt: the same call raising the same name gets the same id. */
export function interruptId(toolUse: ToolUseBlock['toolUse'], name: string): string {
  return `${toolUse.toolUseId}:${name}`
}

/** Build `ctx.interrupt` for one tool call. */
export function interruptFunction(toolUse: ToolUseBlock['toolUse'], responses: Record<string, JsonValue>) {
  return <R = JsonValue>(request: InterruptRequest): R => {
    if (typeof request?.name !== 'string' || request.name === '') throw new InvalidArgumentError('ctx.interrupt needs a name')
    const id = interruptId(toolUse, request.name)
    if (Object.prototype.hasOwnProperty.call(responses, id)) return responses[id] as R
    throw new InterruptSignal({ id, name: request.name, toolUseId: toolUse.toolUseId, ...(request.reason === undefined ? {} : { reason: request.reason }) })
  }
}
