import type { RequeueOutcome } from '../store/engine/lease-engine.js'
import type { RunLeases } from '../store/leases/run-leases.js'
import type { RunWaits } from '../store/waits/run-waits.js'
import { JOB_KEY } from './job.js'
import { dueTick, scheduledRunId, type ScheduleBody } from './schedules.js'

/** What a sweep works on. */
export interface SweepContext {
  waits: RunWaits
  leases: RunLeases
  now: () => number
}

/** What one sweep did. */
export interface SweepReport {
  /** Runs queued again: a wake time or deadline passed, or an event came. */
  woken: string[]
  /** Runs a schedule enqueued. */
  scheduled: string[]
}

/** How many timers and waits one sweep looks at. */
const SWEEP_LIMIT = 500

/**
 * Look at what runs wait for and act on what is due, once: queue again every stopped run whose
 * timer passed or whose awaited event came, and enqueue the run of every schedule tick that is
 * due. Any number of processes may sweep at once: each step is a compare-and-set (a run is
 * queued again only while it is still stopped and unheld; a tick's run has a fixed id, and the
 * schedule's last tick moves only from the value read), so every wake and every tick happens once.
 */
export async function sweep(ctx: SweepContext): Promise<SweepReport> {
  const woken = [...(await wakeDueTimers(ctx)), ...(await wakeReadyWaits(ctx))]
  const scheduled = await fireSchedules(ctx)
  return { woken, scheduled }
}

/**
 * Runs whose timer passed, queued again (a worker resumes them; the runner decides what is due).
 * The due timers of a sweep are requeued in one write of the store and cleared in another, not
 * two commits per run: each run is still decided on its own by a compare-and-set, so a run
 * swept by two workers at once is queued by one of them.
 */
export async function wakeDueTimers(ctx: SweepContext): Promise<string[]> {
  const timers = await ctx.waits.dueTimers(ctx.now(), SWEEP_LIMIT)
  if (timers.length === 0) return []
  const outcomes = await requeueMany(ctx, timers.map((timer) => timer.runId))
  const woken: string[] = []
  const done: typeof timers = []
  for (const [i, timer] of timers.entries()) {
    const outcome = outcomes[i]
    // Held by the worker handing it back, or running (its timer was set just before it is stored
    // stopped): looked at again by the next sweep.
    if (outcome === 'held' || outcome === 'running') continue
    if (outcome === 'queued') woken.push(timer.runId)
    // Queued now or before, finished, deleted, or never a worker's: the timer (unless moved since) is done.
    done.push(timer)
  }
  await ctx.waits.clearTimers(done)
  return woken
}

/** Runs waiting for an event that is now there, queued again. */
export async function wakeReadyWaits(ctx: SweepContext): Promise<string[]> {
  const woken: string[] = []
  for (const wait of await ctx.waits.readyWaits(SWEEP_LIMIT)) {
    if (woken.includes(wait.runId)) continue
    const outcome = await requeue(ctx, wait.runId)
    if (outcome === 'queued') woken.push(wait.runId)
    // A wait of a finished or deleted run is stale (a resumed run clears its own when it resumes).
    else if (outcome === 'gone') await ctx.waits.clearRun(wait.runId)
  }
  return woken
}

/**
 * {@link wakeReadyWaits}, answering with the runs waiting for one event (its `name` and `match`):
 * queued by this call, or already on their way — queued, running or about to be handed back by a
 * worker whose sweep saw the event first.
 */
export async function wakeWaitsFor(ctx: SweepContext, event: { name: string; match: string }): Promise<string[]> {
  const woken: string[] = []
  const seen = new Set<string>()
  for (const wait of await ctx.waits.readyWaits(SWEEP_LIMIT)) {
    if (seen.has(wait.runId)) continue
    seen.add(wait.runId)
    const outcome = await requeue(ctx, wait.runId)
    if (outcome === 'gone') await ctx.waits.clearRun(wait.runId)
    else if (wait.name === event.name && wait.match === event.match) woken.push(wait.runId)
  }
  return woken
}

/** Enqueue the run of every schedule's due tick (or skip missed ticks, as the schedule says). */
export async function fireSchedules(ctx: SweepContext): Promise<string[]> {
  const scheduled: string[] = []
  const now = ctx.now()
  for (const row of await ctx.waits.listSchedules()) {
    if (row.paused) continue
    const body = JSON.parse(row.body) as ScheduleBody
    const due = dueTick(row, body, now)
    if (!due) continue
    if (due.run) {
      const runId = scheduledRunId(row.id, due.tick)
      // Enqueued before the tick is recorded: a sweep that dies between the two is repeated, and the
      // second enqueue of the same run id changes nothing.
      const { created } = await ctx.leases.enqueue({
        runId,
        name: body.name,
        metadata: { [JOB_KEY]: { name: body.name, input: body.input }, schedule: { id: row.id, tick: new Date(due.tick).toISOString() } },
        ...(body.queue === undefined ? {} : { queue: body.queue }),
      })
      if (created) scheduled.push(runId)
    }
    await ctx.waits.advanceSchedule(row.id, row.lastTick, due.tick)
  }
  return scheduled
}

type Requeued = 'queued' | 'already' | 'held' | 'running' | 'gone'

/** {@link requeue} for several runs, in one write of the store when it can. */
async function requeueMany(ctx: SweepContext, runIds: readonly string[]): Promise<Requeued[]> {
  const outcomes = await ctx.leases.requeuePausedMany(runIds, (run) => run.metadata)
  return outcomes.map((outcome) => (outcome ? requeuedOf(outcome) : 'gone'))
}

function requeuedOf(outcome: RequeueOutcome): Requeued {
  if (outcome.outcome === 'queued' || outcome.outcome === 'held') return outcome.outcome
  if (outcome.outcome === 'not_paused' && outcome.status === 'running') return 'running'
  if (outcome.outcome === 'not_paused' && outcome.status === 'queued') return 'already'
  return 'gone'
}

/** Queue a stopped run again: `queued` now, `already` queued, `held` or `running` (try later), `gone` (finished, deleted, or a Runner's own). */
async function requeue(ctx: SweepContext, runId: string): Promise<Requeued> {
  try {
    return requeuedOf(await ctx.leases.requeuePaused(runId, (run) => run.metadata))
  } catch (err) {
    if ((err as { code?: unknown }).code === 'run_not_found') return 'gone'
    throw err
  }
}
