/**
 * The arguments of the time calls a tool's context and a workflow executor's context share
 * (`ctx.sleep`, `ctx.sleepUntil`, `ctx.waitForEvent`, an interrupt's `expiresAt`), checked once
 * for both, with the same errors.
 */
import { InvalidArgumentError } from '../core/errors.js'
import type { WaitForEventOptions } from './tool.js'

/** A point in time as Unix ms: a `Date` or a finite number; `what` names the argument in the error. */
export function timeOf(value: Date | number, what: string): number {
  const ms = value instanceof Date ? value.getTime() : value
  if (typeof ms !== 'number' || !Number.isFinite(ms)) throw new InvalidArgumentError(`${what} must be a Date or Unix ms, got ${String(value)}`)
  return ms
}

/** The time `ctx.sleep(ms)` wakes at: `now` plus a non-negative, finite `ms`. */
export function sleepEnd(ms: number, now: number): number {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) throw new InvalidArgumentError(`ctx.sleep needs a non-negative number of ms, got ${String(ms)}`)
  return now + ms
}

/** What `ctx.waitForEvent(name, options)` matches on: a non-empty name and a string match ('' when none). */
export function eventMatchOf(name: string, options: WaitForEventOptions): string {
  if (typeof name !== 'string' || name === '') throw new InvalidArgumentError('ctx.waitForEvent needs the name of the event')
  const match = options.match ?? ''
  if (typeof match !== 'string') throw new InvalidArgumentError(`ctx.waitForEvent('${name}') match must be a string, got ${typeof match}`)
  return match
}

/** The `timeoutMs` of `ctx.waitForEvent(name, options)`, when given: a non-negative, finite number. */
export function eventTimeoutOf(name: string, options: WaitForEventOptions): number | undefined {
  const { timeoutMs } = options
  if (timeoutMs !== undefined && (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0)) {
    throw new InvalidArgumentError(`ctx.waitForEvent('${name}') timeoutMs must be a non-negative number, got ${String(timeoutMs)}`)
  }
  return timeoutMs
}
