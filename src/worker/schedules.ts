import { Cron } from 'croner'
import type { JsonValue } from '../core/codec.js'
import { InvalidArgumentError } from '../core/errors.js'
import type { ContentBlock } from '../model/messages.js'
import type { ScheduleRow } from '../store/waits/run-waits.js'

/** What `CairnClient.schedule` takes. */
export interface ScheduleOptions {
  /** The schedule's id: its runs are `<id>@<tick as ISO time>`. */
  id: string
  /** 5 fields (minute first), or 6 with seconds first, as `croner` reads them. */
  cron: string
  /** An IANA time zone the cron fields are read in (`Europe/Paris`). Default UTC. */
  timezone?: string
  /** The agent registered on the workers under this name (give `agent` or `workflow`). */
  agent?: string
  /** The workflow registered on the workers under this name. */
  workflow?: string
  /** Each run's input: the agent's prompt or content blocks, the workflow's message. */
  input: string | ContentBlock[] | JsonValue
  /**
   * After ticks were missed (no worker was up for more than `missedAfterMs` past them):
   * `skip` (default) runs none of them and waits for the next tick; `latest` runs the latest once.
   */
  catchUp?: 'skip' | 'latest'
  /** How late a tick may still be run under `skip`. Default 60 s. */
  missedAfterMs?: number
  /** The queue its runs go to. Default `default`. */
  queue?: string
}

/** A stored schedule, as `CairnClient.schedules()` lists it. */
export interface ScheduleInfo {
  id: string
  cron: string
  timezone: string
  /** The agent or workflow name its runs are enqueued under. */
  name: string
  input: JsonValue
  catchUp: 'skip' | 'latest'
  paused: boolean
  /** The last tick handled (run or skipped). */
  lastTick: Date
  /** The next tick after now, unless paused (or the cron has no more). */
  nextTick: Date | undefined
}

/** The stored body of a schedule. */
export interface ScheduleBody {
  cron: string
  timezone: string
  name: string
  input: JsonValue
  catchUp: 'skip' | 'latest'
  missedAfterMs: number
  queue?: string
}

/** Check the options and build what is stored; a bad cron or time zone is an `InvalidArgumentError`. */
export function scheduleBodyOf(options: ScheduleOptions): ScheduleBody {
  if (typeof options?.id !== 'string' || !/^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,150}$/.test(options.id)) {
    throw new InvalidArgumentError(`schedule id ${JSON.stringify(options?.id)} must be 1-151 letters, digits and _ . : - (it starts every run id of the schedule)`)
  }
  const name = options.agent ?? options.workflow
  if ((options.agent === undefined) === (options.workflow === undefined) || typeof name !== 'string' || name === '') {
    throw new InvalidArgumentError(`schedule ${options.id} needs exactly one of agent or workflow: the name a worker registered`)
  }
  if (options.input === undefined) throw new InvalidArgumentError(`schedule ${options.id} needs an input for its runs`)
  const catchUp = options.catchUp ?? 'skip'
  if (catchUp !== 'skip' && catchUp !== 'latest') throw new InvalidArgumentError(`schedule ${options.id}: catchUp must be 'skip' or 'latest', got ${JSON.stringify(catchUp)}`)
  const missedAfterMs = options.missedAfterMs ?? 60_000
  if (typeof missedAfterMs !== 'number' || !Number.isFinite(missedAfterMs) || missedAfterMs < 0) {
    throw new InvalidArgumentError(`schedule ${options.id}: missedAfterMs must be a non-negative number of ms, got ${String(missedAfterMs)}`)
  }
  const body: ScheduleBody = { cron: options.cron, timezone: options.timezone ?? 'UTC', name, input: options.input as JsonValue, catchUp, missedAfterMs, ...(options.queue === undefined ? {} : { queue: options.queue }) }
  cronOf(body, options.id)
  return body
}

/** The schedule's cron, checked. */
export function cronOf(body: Pick<ScheduleBody, 'cron' | 'timezone'>, id: string): Cron {
  try {
    return new Cron(body.cron, { timezone: body.timezone, paused: true, mode: '5-or-6-parts' })
  } catch (err) {
    throw new InvalidArgumentError(`schedule ${id}: ${JSON.stringify(body.cron)} in ${body.timezone} is not a cron this schedule can use (5 fields, or 6 with seconds first): ${(err as Error).message}`, { cause: err })
  }
}

/** What a schedule does now: nothing, or run (or skip) the tick `tick`; `lastTick` moves to `tick` either way. */
export function dueTick(row: ScheduleRow, body: ScheduleBody, now: number): { tick: number; run: boolean } | undefined {
  const cron = cronOf(body, row.id)
  let next = cron.nextRun(new Date(row.lastTick))
  if (!next || next.getTime() > now) return undefined
  let latest = next.getTime()
  let missed = 0
  // The latest tick at or before now (bounded: a long downtime of a seconds cron is not walked whole).
  for (let i = 0; i < 10_000; i++) {
    next = cron.nextRun(new Date(latest))
    if (!next || next.getTime() > now) break
    latest = next.getTime()
    missed++
  }
  if (missed === 10_000) {
    const previous = cron.previousRuns(1, new Date(now))[0]
    if (previous) latest = previous.getTime()
  }
  const late = now - latest > body.missedAfterMs
  return { tick: latest, run: body.catchUp === 'latest' || !late }
}

/** The run id of a schedule's tick. */
export function scheduledRunId(id: string, tick: number): string {
  return `${id}@${new Date(tick).toISOString()}`
}

/** A stored schedule as listed. */
export function scheduleInfoOf(row: ScheduleRow, now: number): ScheduleInfo {
  const body = JSON.parse(row.body) as ScheduleBody
  const next = row.paused ? null : cronOf(body, row.id).nextRun(new Date(Math.max(now, row.lastTick)))
  return {
    id: row.id,
    cron: body.cron,
    timezone: body.timezone,
    name: body.name,
    input: body.input,
    catchUp: body.catchUp,
    paused: row.paused,
    lastTick: new Date(row.lastTick),
    nextTick: next ?? undefined,
  }
}
