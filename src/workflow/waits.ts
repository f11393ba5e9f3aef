import { isPlainObject, type JsonValue } from '../core/codec.js'
import { CairnError } from '../core/errors.js'
import type { RunWaits } from '../store/waits/run-waits.js'
import type { WaitForEventOptions } from '../tools/tool.js'
import { eventMatchOf, eventTimeoutOf, sleepEnd, timeOf } from '../tools/time-args.js'

/**
 * One `ctx.sleep` or `ctx.waitForEvent` call of a handler, as recorded when the handler stopped:
 * a sleep's wake time, or an event wait's name, match and deadline. They are numbered in the
 * order the handler calls them, so a handler that runs again keeps the times first set.
 */
export type RecordedWait = { sleep: { wakeAt: number } } | { event: { name: string; match: string; expiresAt?: number; timedOut?: true } }

/**
 * Where a message's handler stopped (a sleep, or a wait for an event): kept with the message in
 * the checkpoint while the run is stopped, and read back when the handler runs again. `key`
 * names the handler's waits in the store (an event taken for it stays its own).
 */
export interface MessageStop {
  key: string
  /** Every wait the handler called, in order; the last is the one it stopped at. */
  waits: RecordedWait[]
}

/** What of the store's timers, events and waits (`store.waits`) a workflow uses. */
export type WorkflowWaits = Pick<RunWaits, 'takeEvent' | 'setTimer' | 'setWait' | 'clearRun'>

/** What a workflow needs for sleeps and event waits: a clock, and the store's events and timers. */
export interface WorkflowTime {
  now(): number
  /** Undefined for a store without them. */
  waits: WorkflowWaits | undefined
}

/** Thrown by `ctx.sleep` and `ctx.waitForEvent` to stop a handler. Never catch it in a handler. */
export class WorkflowStopSignal extends Error {
  readonly stop: MessageStop

  constructor(executorId: string, stop: MessageStop) {
    super(`executor ${executorId} stopped at ${describeWait(stop.waits[stop.waits.length - 1]!)}`)
    this.name = 'WorkflowStopSignal'
    this.stop = stop
  }
}

/** Build `ctx.sleep`, `ctx.sleepUntil` and `ctx.waitForEvent` for one handler call. */
export function handlerWaits(params: { runId: string; executorId: string; key: string; recorded: readonly RecordedWait[]; time: WorkflowTime | undefined }) {
  const { runId, executorId, key, recorded, time } = params
  const now = () => time?.now() ?? Date.now()
  const waits: RecordedWait[] = []
  const stop = (wait: RecordedWait): never => {
    waits.push(wait)
    throw new WorkflowStopSignal(executorId, { key, waits })
  }
  const sleepUntil = async (at: Date | number): Promise<void> => {
    requireTime(time, 'ctx.sleep')
    const before = recorded[waits.length]
    const wakeAt = before !== undefined && 'sleep' in before ? before.sleep.wakeAt : timeOf(at, 'ctx.sleepUntil time')
    if (now() >= wakeAt) {
      waits.push({ sleep: { wakeAt } })
      return
    }
    stop({ sleep: { wakeAt } })
  }
  return {
    sleepUntil,
    sleep: (ms: number): Promise<void> => {
      return sleepUntil(sleepEnd(ms, now()))
    },
    waitForEvent: async <T = JsonValue>(name: string, options: WaitForEventOptions = {}): Promise<T | undefined> => {
      const match = eventMatchOf(name, options)
      const timeoutMs = eventTimeoutOf(name, options)
      const host = requireTime(time, 'ctx.waitForEvent')
      const before = recorded[waits.length]
      const expiresAt = before !== undefined && 'event' in before ? before.event.expiresAt : timeoutMs === undefined ? undefined : now() + timeoutMs
      const wait = { event: { name, match, ...(expiresAt === undefined ? {} : { expiresAt }) } }
      // Timed out when the handler first got here: it does again, whatever came since.
      if (before !== undefined && 'event' in before && before.event.timedOut === true) {
        waits.push(before)
        return undefined
      }
      const taken = await host.waits!.takeEvent({ name, match, takenBy: takerOf(runId, key, waits.length) })
      if (taken) {
        waits.push(wait)
        return JSON.parse(taken.payload) as T
      }
      if (expiresAt !== undefined && now() >= expiresAt) {
        waits.push({ event: { ...wait.event, timedOut: true } })
        return undefined
      }
      return stop(wait)
    },
  }
}

/** The status a run whose handlers stopped at these waits is stored with. */
export function stoppedStatusOf(stops: readonly MessageStop[]): 'sleeping' | 'waiting' {
  return stops.every((stop) => 'sleep' in stop.waits[stop.waits.length - 1]!) ? 'sleeping' : 'waiting'
}

/** When the run should be looked at again: the earliest wake time or deadline its handlers stopped at. */
export function nextTimeOfStops(stops: readonly MessageStop[]): number | undefined {
  const times = stops.flatMap((stop) => {
    const last = stop.waits[stop.waits.length - 1]!
    return 'sleep' in last ? [last.sleep.wakeAt] : last.event.expiresAt === undefined ? [] : [last.event.expiresAt]
  })
  return times.length === 0 ? undefined : Math.min(...times)
}

/** The event waits the run's handlers stopped at, with the ids their takes use. */
export function eventWaitsOf(runId: string, stops: readonly MessageStop[]): { waitId: string; takenBy: string; name: string; match: string; expiresAt?: number }[] {
  return stops.flatMap((stop) => {
    const index = stop.waits.length - 1
    const last = stop.waits[index]!
    if (!('event' in last)) return []
    return [{ waitId: `${stop.key}/${index}`, takenBy: takerOf(runId, stop.key, index), ...last.event }]
  })
}

/**
 * Whether a stopped run may go on: a wake time or a deadline it stopped at has passed, or an
 * event one of its waits is for is there (taken for that wait now; its handler gets it when it runs again).
 */
export async function stopsDue(runId: string, stops: readonly MessageStop[], time: WorkflowTime | undefined): Promise<boolean> {
  const now = time?.now() ?? Date.now()
  const next = nextTimeOfStops(stops)
  if (next !== undefined && now >= next) return true
  for (const wait of eventWaitsOf(runId, stops)) {
    if (time?.waits && (await time.waits.takeEvent({ name: wait.name, match: wait.match, takenBy: wait.takenBy }))) return true
  }
  return false
}

/** A message's stop as read from a checkpoint, checked; undefined when absent. */
export function isMessageStop(value: unknown): value is MessageStop {
  if (!isPlainObject(value) || typeof value.key !== 'string' || !Array.isArray(value.waits) || value.waits.length === 0) return false
  return value.waits.every(
    (wait) =>
      isPlainObject(wait) &&
      ((isPlainObject(wait.sleep) && typeof wait.sleep.wakeAt === 'number') ||
        (isPlainObject(wait.event) && typeof wait.event.name === 'string' && typeof wait.event.match === 'string' && (wait.event.expiresAt === undefined || typeof wait.event.expiresAt === 'number') && (wait.event.timedOut === undefined || wait.event.timedOut === true))),
  )
}

function takerOf(runId: string, key: string, index: number): string {
  return `${runId}/${key}/${index}`
}

function describeWait(wait: RecordedWait): string {
  if ('sleep' in wait) return `a sleep until ${new Date(wait.sleep.wakeAt).toISOString()}`
  return `a wait for event ${wait.event.name}${wait.event.match === '' ? '' : `[${wait.event.match}]`}`
}

function requireTime(time: WorkflowTime | undefined, what: string): WorkflowTime {
  if (time?.waits) return time
  throw new CairnError('time_unavailable', `${what} in a workflow needs a store that keeps waits (MemoryStore, SqliteStore, PostgresStore): build the workflow with one, or run it on a Worker`)
}
