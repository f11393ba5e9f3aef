import { CairnClient, type Interrupt, type JsonValue, type RunRecord, type StoreReader, type WorkerStore } from '../index.js'
import { WAITING_STATUSES } from '../engine.js'
import { CliError } from './cli-error.js'
import type { Context } from './context.js'
import { table, time } from './output.js'

/** `cairn send NAME [PAYLOAD]`: deliver an event to the runs waiting for it. */
export async function sendCommand(ctx: Context, name: string, payload: string | undefined, options: { match?: string; key?: string }): Promise<void> {
  let value: JsonValue = null
  if (payload !== undefined) {
    try {
      value = JSON.parse(payload) as JsonValue
    } catch {
      throw new CliError(`the payload must be JSON (quote a string: '"text"'), got ${payload}`)
    }
  }
  const client = await clientOf(ctx)
  const sent = await client.send(name, value, { ...(options.match === undefined ? {} : { match: options.match }), ...(options.key === undefined ? {} : { idempotencyKey: options.key }) })
  ctx.out.result(sent, () => {
    ctx.out.line(sent.sent ? `sent ${name} (event ${sent.eventId})` : `event ${sent.eventId} was sent before; nothing sent again`)
    if (sent.woken.length > 0) ctx.out.line(`woke ${sent.woken.join(', ')}`)
  })
}

/** `cairn schedules`: the stored schedules (and pausing, resuming or deleting one). */
export async function schedulesCommand(ctx: Context, options: { pause?: string; resume?: string; delete?: string }): Promise<void> {
  const client = await clientOf(ctx)
  if (options.pause !== undefined) await client.pauseSchedule(options.pause)
  if (options.resume !== undefined) await client.resumeSchedule(options.resume)
  if (options.delete !== undefined && !(await client.unschedule(options.delete))) throw new CliError(`there is no schedule ${options.delete}; list them with \`cairn schedules\``)
  const schedules = await client.schedules()
  ctx.out.result(schedules, () => {
    const rows = schedules.map((s) => [s.id, s.cron, s.timezone, s.name, s.catchUp, s.paused ? 'paused' : 'active', time(s.lastTick.getTime()), time(s.nextTick?.getTime())])
    for (const line of table(['SCHEDULE', 'CRON', 'TIMEZONE', 'RUNS', 'CATCH-UP', 'STATE', 'LAST TICK', 'NEXT TICK'], rows)) ctx.out.line(line)
    if (schedules.length === 0) ctx.out.line('(no schedules)')
  })
}

/** `cairn wake RUN`: wake a sleeping run now. */
export async function wakeCommand(ctx: Context, runId: string): Promise<void> {
  await ctx.run(runId)
  await (await clientOf(ctx)).wake(runId)
  ctx.out.result({ runId, woken: true }, () => ctx.out.line(`woke ${runId}: a worker resumes it`))
}

/**
 * What a stopped run waits for, in a few words: its wake time, the event (and its deadline), or
 * a deadline on a question; empty for a run that does not wait.
 */
export async function waitingFor(store: StoreReader, run: RunRecord): Promise<string> {
  if (!WAITING_STATUSES.includes(run.status)) return ''
  const latest = await store.getLatest<Record<string, unknown>>({ runId: run.runId })
  const pending = latest?.phase === 'run_paused' && Array.isArray(latest.payload.interrupts) ? (latest.payload.interrupts as Interrupt[]) : []
  const parts = pending.flatMap((interrupt) => {
    if (interrupt.wakeAt !== undefined) return [`wakes ${time(interrupt.wakeAt)}`]
    const until = interrupt.expiresAt === undefined ? '' : ` until ${time(interrupt.expiresAt)}`
    if (interrupt.event) return [`event ${interrupt.event.name}${interrupt.event.match === '' ? '' : `[${interrupt.event.match}]`}${until}`]
    return interrupt.expiresAt === undefined ? [] : [`${interrupt.name} expires ${time(interrupt.expiresAt)}`]
  })
  return parts.join('; ')
}

async function clientOf(ctx: Context): Promise<CairnClient> {
  const store = (await ctx.store()) as Partial<WorkerStore>
  if (!store.leases || typeof store.fenced !== 'function' || !store.waits) {
    throw new CliError(`the store at ${ctx.storeUrl} keeps no events, timers or schedules: use a SQLite or Postgres store`)
  }
  return new CairnClient({ store: store as WorkerStore })
}
