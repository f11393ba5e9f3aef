import { buildThreadTimelines, buildTimeline, formatThreadTimeline, diffCheckpoints, exportRun, formatDiff, formatTimeline, summarizeRun, verifyRun, type RunRecord, type RunStatus, type VerifyReport } from '../index.js'
import { encodeValue } from '../engine.js'
import { threadRunSummary } from './thread-summary.js'
import { CliError } from './cli-error.js'
import type { Context } from './context.js'
import { table, time } from './output.js'
import { waitingFor } from './time-commands.js'

const STATUSES: readonly RunStatus[] = ['queued', 'running', 'paused', 'sleeping', 'waiting', 'completed', 'failed', 'cancelled']

/** `cairn runs`: runs, newest first. */
export async function runsCommand(ctx: Context, options: { status?: string; name?: string; limit?: string }): Promise<void> {
  const limit = positiveInt(options.limit ?? '20', '--limit')
  if (options.status !== undefined && !STATUSES.includes(options.status as RunStatus)) {
    throw new CliError(`unknown status ${JSON.stringify(options.status)}; use one of ${STATUSES.join(', ')}`)
  }
  const store = await ctx.store()
  const runs = await findRuns(store, { limit, ...(options.status === undefined ? {} : { status: options.status as RunStatus }), ...(options.name === undefined ? {} : { search: options.name }) })
  const summaries = await Promise.all(
    runs.map(async (run) => ({ ...((await threadRunSummary(store, run)) ?? (await summarizeRun(store, run))), waitingFor: await waitingFor(store, run) })),
  )
  ctx.out.result(summaries, () => {
    const rows = summaries.map((s) => [s.runId, s.name, s.status, s.steps, s.checkpoints, s.toolCalls, s.tokens, time(s.startedAt), time(s.updatedAt), s.owner, s.waitingFor])
    for (const line of table(['RUN', 'NAME', 'STATUS', 'STEPS', 'CHECKPOINTS', 'TOOL CALLS', 'TOKENS', 'STARTED', 'UPDATED', 'OWNER', 'WAITING FOR'], rows)) ctx.out.line(line)
    if (summaries.length === 0) ctx.out.line('(no runs)')
  })
}

/** Runs newest first, filtered by status and by a substring of their id or name. */
export async function findRuns(store: Awaited<ReturnType<Context['store']>>, query: { status?: RunStatus; search?: string; limit: number }): Promise<RunRecord[]> {
  const found: RunRecord[] = []
  const needle = query.search?.toLowerCase()
  let before: string | undefined
  while (found.length < query.limit) {
    const page = await store.listRuns({ limit: 200, ...(query.status === undefined ? {} : { status: query.status }), ...(before === undefined ? {} : { before }) })
    for (const run of page) {
      const haystack = `${run.runId} ${run.name ?? ''} ${run.workflowName ?? ''}`.toLowerCase()
      if (needle === undefined || haystack.includes(needle)) found.push(run)
    }
    if (page.length < 200) break
    before = page[page.length - 1]?.runId
  }
  return found.slice(0, query.limit)
}

/** `cairn show RUN` and `cairn show [RUN] --payload CHECKPOINT`. */
export async function showCommand(ctx: Context, runId: string | undefined, options: { payload?: string }): Promise<void> {
  const store = await ctx.store()
  if (options.payload !== undefined) {
    const record = await ctx.checkpoint(options.payload, runId)
    if (runId !== undefined && record.runId !== runId) throw new CliError(`checkpoint ${record.id} belongs to run ${record.runId}, not ${runId}`)
    ctx.out.line(JSON.stringify({ ...record, payload: encodeValue(record.payload) }, null, 2))
    return
  }
  if (runId === undefined) throw new CliError('show needs a run id: cairn show RUN (list them with `cairn runs`)')
  // A LangGraph thread is shown by its thread id or by the run of one of its namespaces.
  const threads = await buildThreadTimelines(store, runId)
  if (threads.length > 0) {
    ctx.out.result(threads, () => {
      for (const [i, thread] of threads.entries()) {
        if (i > 0) ctx.out.line()
        for (const line of formatThreadTimeline(thread)) ctx.out.line(line)
      }
    })
    return
  }
  await ctx.run(runId)
  const timeline = await buildTimeline(store, runId)
  ctx.out.result(timeline.entries, () => {
    const { run } = timeline
    ctx.out.line(`run ${run.runId}  ${run.name ?? run.workflowName ?? ''}  ${run.status}  started ${time(run.createdAt)}`)
    ctx.out.line('ms: since the run started; proc: which process wrote it (a new one after each resume); * holds the full runtime snapshot')
    ctx.out.line(`diff, fork and show --payload take a checkpoint id or ${run.runId}#N (N from the # column)`)
    ctx.out.line()
    for (const line of formatTimeline(timeline, { checkpointIds: true })) ctx.out.line(line)
  })
}

/** `cairn diff A B` (each a checkpoint id, or `RUN#N` as `cairn show` numbers them). */
export async function diffCommand(ctx: Context, fromRef: string, toRef: string): Promise<void> {
  const store = await ctx.store()
  const [from, to] = await Promise.all([ctx.checkpoint(fromRef), ctx.checkpoint(toRef)])
  const diff = await diffCheckpoints(store, from.id, to.id)
  ctx.out.result(diff, () => {
    for (const line of formatDiff(diff)) ctx.out.line(line)
  })
}

/** `cairn effects RUN`: the effect journal. */
export async function effectsCommand(ctx: Context, runId: string): Promise<void> {
  const store = await ctx.store()
  await ctx.run(runId)
  const effects = await store.listEffects(runId)
  ctx.out.result(effects, () => {
    const rows = effects.map((e) => [e.callId, e.name, e.status, e.attempts, e.idempotencyKey, time(e.startedAt), time(e.completedAt)])
    for (const line of table(['CALL', 'TOOL', 'STATUS', 'ATTEMPTS', 'IDEMPOTENCY KEY', 'STARTED', 'COMPLETED'], rows)) ctx.out.line(line)
    if (effects.length === 0) ctx.out.line('(no effects)')
  })
}

/** `cairn verify [RUN]`: every checkpoint read back and checked, each run reported. Exit code 1 when one is bad or could not be checked. */
export async function verifyCommand(ctx: Context, runId: string | undefined): Promise<void> {
  const store = await ctx.store()
  const runs = runId === undefined ? await findRuns(store, { limit: Number.MAX_SAFE_INTEGER }) : [await ctx.run(runId)]
  const progress = ctx.out.progress('verify')
  const reports: VerifyReport[] = []
  for (const [i, run] of runs.entries()) {
    reports.push(await verifyRun(store, run.runId))
    progress.update(i + 1, runs.length)
  }
  progress.stop()
  // Signed records read without keys are not bad: they could not be checked.
  const unchecked = (report: VerifyReport) => ctx.keys === undefined && (report.firstBad ?? report.rolledBack)?.code === 'checkpoint_integrity'
  const bad = reports.filter((report) => !report.ok && !unchecked(report))
  const keyless = reports.filter(unchecked)
  ctx.out.result(reports, () => {
    for (const report of reports) {
      const label = report.ok ? 'ok  ' : unchecked(report) ? 'KEYS' : 'BAD '
      const problem = report.firstBad ? `checkpoint ${report.firstBad.checkpointId} (seq ${report.firstBad.seq}): ${report.firstBad.problem}` : report.rolledBack?.problem
      // Stored records: the light phases a stored checkpoint carries are checked with it.
      ctx.out.line(report.ok ? `${label} ${report.runId}: ${report.checkpoints} stored checkpoints` : `${label} ${report.runId}: ${problem}`)
    }
    ctx.out.line(`${reports.length} runs verified, ${bad.length} with a bad record${keyless.length ? `, ${keyless.length} signed and not checked without keys (set CAIRN_KEYS)` : ''}`)
  })
  if (bad.length > 0 || keyless.length > 0) process.exitCode = 1
}

/** `cairn export RUN > run.json`. */
export async function exportCommand(ctx: Context, runId: string): Promise<void> {
  const store = await ctx.store()
  await ctx.run(runId)
  const progress = ctx.out.progress('export')
  const document = await exportRun(store, runId, (done, total) => progress.update(done, total))
  progress.stop()
  process.stdout.write(`${JSON.stringify(document)}\n`)
}

/** Parse a positive integer option. */
export function positiveInt(value: string, flag: string): number {
  const n = Number(value)
  if (!Number.isInteger(n) || n <= 0) throw new CliError(`${flag} must be a positive integer, got ${JSON.stringify(value)}`)
  return n
}

