import type { JsonValue } from '../core/codec.js'
import type { ToolResultBlock, ToolUseBlock } from '../model/messages.js'
import type { InterruptExpiry, InterruptRequest, ToolContext, ToolTimeHost, WaitForEventOptions } from '../tools/tool.js'
import { CairnError, InterruptExpiredError, InvalidArgumentError } from '../core/errors.js'
import { eventMatchOf, eventTimeoutOf, sleepEnd, timeOf } from '../tools/time-args.js'

/** A pause raised by a tool, waiting for a human's response. */
export interface Interrupt {
  /** Answer it with `{ interruptResponse: { interruptId: id, response } }`. */
  id: string
  name: string
  reason?: JsonValue
  /** The tool call that raised it. */
  toolUseId: string
  /** A sleep (`ctx.sleep`): the run continues at this time (Unix ms), not before. */
  wakeAt?: number
  /** A wait for an external event (`ctx.waitForEvent`): its name and match. */
  event?: { name: string; match: string }
  /** A deadline (Unix ms): an event wait's timeout, or an interrupt's `expiresAt`. */
  expiresAt?: number
  /** What happens at `expiresAt` for an interrupt asked of a human. */
  onExpiry?: InterruptExpiry
}

/** The name of the interrupts `ctx.sleep` raises (numbered in the call: `cairn.sleep.1`, …). */
export const SLEEP_INTERRUPT = 'cairn.sleep'
/** The name of the interrupts `ctx.waitForEvent` raises (`cairn.event.1`, …). */
export const EVENT_INTERRUPT = 'cairn.event'

/** Whether an interrupt waits for time or an event rather than for a human. */
export function isTimed(interrupt: Interrupt): boolean {
  return interrupt.wakeAt !== undefined || interrupt.event !== undefined
}

/** The status a run stopped at these interrupts is stored with: sleeping, waiting for an event, or paused for a human. */
export function waitingStatusOf(interrupts: readonly Interrupt[]): 'sleeping' | 'waiting' | 'paused' {
  if (interrupts.length > 0 && interrupts.every((i) => i.wakeAt !== undefined)) return 'sleeping'
  if (interrupts.length > 0 && interrupts.every(isTimed)) return 'waiting'
  return 'paused'
}

/** When the run should be looked at again: the earliest wake time or deadline of its interrupts. */
export function nextTimeOf(interrupts: readonly Interrupt[]): number | undefined {
  const times = interrupts.flatMap((i) => [i.wakeAt, i.expiresAt]).filter((t): t is number => t !== undefined)
  return times.length === 0 ? undefined : Math.min(...times)
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

/** What building the waiting parts of one call's context takes. */
export interface WaitScope {
  toolUse: ToolUseBlock['toolUse']
  /** Answers given so far, by interrupt id. */
  responses: Record<string, JsonValue>
  /** The interrupts the last execution stopped at (their wake times and deadlines stay as first set). */
  pending: readonly Interrupt[]
  /** The runner's clock and events; absent when the agent runs without a runner. */
  time: ToolTimeHost | undefined
}

/** Build `ctx.interrupt`, `ctx.sleep`, `ctx.sleepUntil` and `ctx.waitForEvent` for one tool call. */
export function waitFunctions(scope: WaitScope): Pick<ToolContext, 'interrupt' | 'sleep' | 'sleepUntil' | 'waitForEvent'> {
  const { toolUse, responses, pending, time } = scope
  const answered = (id: string) => Object.prototype.hasOwnProperty.call(responses, id)
  const before = (id: string) => pending.find((interrupt) => interrupt.id === id)
  const now = () => time?.now() ?? Date.now()
  let sleeps = 0
  let waits = 0
  const interrupt = <R = JsonValue>(request: InterruptRequest): R => {
    if (typeof request?.name !== 'string' || request.name === '') throw new InvalidArgumentError('ctx.interrupt needs a name')
    const id = interruptId(toolUse, request.name)
    if (answered(id)) return responses[id] as R
    const expiresAt = before(id)?.expiresAt ?? (request.expiresAt === undefined ? undefined : timeOf(request.expiresAt, 'ctx.interrupt expiresAt'))
    if (expiresAt !== undefined && now() >= expiresAt) {
      const policy = request.onExpiry ?? 'fail'
      if (policy === 'fail') throw new InterruptExpiredError({ interruptId: id, expiresAt, message: `interrupt ${id} (${request.name}) was not answered by ${new Date(expiresAt).toISOString()}; the run fails, as its onExpiry says` })
      if ('answer' in policy) return policy.answer as R
      return interrupt<R>(policy.escalate)
    }
    throw new InterruptSignal({
      id,
      name: request.name,
      toolUseId: toolUse.toolUseId,
      ...(request.reason === undefined ? {} : { reason: request.reason }),
      ...(expiresAt === undefined ? {} : { expiresAt, onExpiry: request.onExpiry ?? 'fail' }),
    })
  }
  const sleepUntil = async (at: Date | number): Promise<void> => {
    const name = `${SLEEP_INTERRUPT}.${++sleeps}`
    const id = interruptId(toolUse, name)
    requireTime(time, 'ctx.sleep')
    if (answered(id)) return
    const wakeAt = before(id)?.wakeAt ?? timeOf(at, 'ctx.sleepUntil time')
    if (now() >= wakeAt) return
    throw new InterruptSignal({ id, name, toolUseId: toolUse.toolUseId, wakeAt, reason: { sleepUntil: new Date(wakeAt).toISOString() } })
  }
  return {
    interrupt,
    sleepUntil,
    sleep: (ms) => {
      return sleepUntil(sleepEnd(ms, now()))
    },
    waitForEvent: async <T = JsonValue>(eventName: string, options: WaitForEventOptions = {}): Promise<T | undefined> => {
      const match = eventMatchOf(eventName, options)
      const name = `${EVENT_INTERRUPT}.${++waits}`
      const id = interruptId(toolUse, name)
      const host = requireTime(time, 'ctx.waitForEvent')
      const given = answered(id) ? (responses[id] as { payload?: JsonValue; timedOut?: boolean } | null) : undefined
      if (given?.timedOut === true) return undefined
      const taken = await host.takeEvent({ waitId: id, name: eventName, match })
      if (taken) return taken.payload as T
      const timeoutMs = eventTimeoutOf(eventName, options)
      const expiresAt = before(id)?.expiresAt ?? (timeoutMs === undefined ? undefined : now() + timeoutMs)
      if (expiresAt !== undefined && now() >= expiresAt) return undefined
      throw new InterruptSignal({
        id,
        name,
        toolUseId: toolUse.toolUseId,
        event: { name: eventName, match },
        reason: { waitForEvent: eventName, ...(match === '' ? {} : { match }) },
        ...(expiresAt === undefined ? {} : { expiresAt }),
      })
    },
  }
}

function requireTime(time: ToolTimeHost | undefined, what: string): ToolTimeHost {
  if (time) return time
  throw new CairnError('time_unavailable', `${what} needs a durable runner: run the agent with a Runner or a Worker over a store that keeps waits (MemoryStore, SqliteStore, PostgresStore)`)
}
