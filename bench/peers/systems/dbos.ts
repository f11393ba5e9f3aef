/**
 * DBOS Transact's row: a workflow whose steps are the model and tool steps (`DBOS.runStep`),
 * its outputs checkpointed in the DBOS system database on the local Postgres. The baseline is the
 * same loop calling the same step functions with no DBOS at all.
 */
import type { ChildRequest, ResumeFigures, RunFigures, SystemDriver } from '../protocol.js'
import { cpuMsSince, cycleEnds, RUN_ID, timedMs, WARMUP_CYCLES } from '../protocol.js'
import { assistantText, cycleOf, cycleOfInput, CycleClock, FINAL_TEXT, PROMPT, TOOL_NAME, toolInput, toolResultText } from '../workload.js'

/** A message of the DBOS agent's conversation: plain JSON, as step outputs must be. */
interface LoopMessage {
  role: 'user' | 'assistant' | 'tool'
  text: string
  toolCall?: { id: string; name: string; input: { query: string } }
  toolCallId?: string
}

type StepRunner = <T>(name: string, step: () => Promise<T>) => Promise<T>

/** The driver of `dbos` or `dbos-baseline`. */
export function dbosDriver(id: string): SystemDriver {
  if (id === 'dbos-baseline') return { run: runBaseline }
  if (id !== 'dbos') throw new Error(`unknown DBOS system ${id}`)
  return { run: runDurable, resume: resumeFresh }
}

let clock = new CycleClock()

/** The agent loop: a model step, then (while the model asks for it) a tool step, until the model ends its turn. */
async function agentLoop(n: number, runStep: StepRunner): Promise<number> {
  const messages: LoopMessage[] = [{ role: 'user', text: PROMPT }]
  for (;;) {
    const reply = await runStep('model', () => modelStep(messages, n))
    messages.push(reply)
    const call = reply.toolCall
    if (!call) return messages.length
    messages.push(await runStep('tool', () => toolStep(call)))
  }
}

async function modelStep(messages: readonly LoopMessage[], n: number): Promise<LoopMessage> {
  const cycle = cycleOf(messages.length)
  if (cycle >= n) return { role: 'assistant', text: FINAL_TEXT }
  return { role: 'assistant', text: assistantText(cycle), toolCall: { id: `call-${cycle}`, name: TOOL_NAME, input: toolInput(cycle) } }
}

async function toolStep(call: NonNullable<LoopMessage['toolCall']>): Promise<LoopMessage> {
  clock.mark()
  return { role: 'tool', toolCallId: call.id, text: toolResultText(cycleOfInput(call.input)) }
}

async function runBaseline(request: ChildRequest): Promise<{ run: RunFigures }> {
  const direct: StepRunner = (_name, step) => step()
  await agentLoop(WARMUP_CYCLES, direct)
  clock = new CycleClock()
  const cpu = process.cpuUsage()
  const { ms, value: count } = await timedMs(() => agentLoop(request.n, direct), 'run')
  const cpuMs = cpuMsSince(cpu)
  assertCount(count, request.n)
  return { run: { wallMs: ms, ...cycleEnds(clock.cycleMs()), bytesOpen: null, bytesClosed: null, checkpoints: null, cpuMs } }
}

async function runDurable(request: ChildRequest): Promise<{ run: RunFigures }> {
  const { DBOS } = await import('@dbos-inc/dbos-sdk')
  const { schemaBytes } = await import('../pg-admin.js')
  const durable: StepRunner = (name, step) => DBOS.runStep(step, { name })
  const workflow = DBOS.registerWorkflow((n: number) => agentLoop(n, durable), { name: 'agentLoop' })

  await launch(`${request.schema}_warmup`)
  await DBOS.withNextWorkflowID('warmup', () => workflow(WARMUP_CYCLES))
  await DBOS.shutdown()

  await launch(request.schema)
  clock = new CycleClock()
  const cpu = process.cpuUsage()
  const { ms, value: count } = await timedMs(() => DBOS.withNextWorkflowID(RUN_ID, () => workflow(request.n)), 'run')
  const cpuMs = cpuMsSince(cpu)
  assertCount(count, request.n)
  const bytesOpen = await schemaBytes('dbos', request.schema)
  const steps = (await DBOS.listWorkflowSteps(RUN_ID))?.length ?? null
  await DBOS.shutdown()
  const bytesClosed = await schemaBytes('dbos', request.schema)
  return { run: { wallMs: ms, ...cycleEnds(clock.cycleMs()), bytesOpen, bytesClosed, checkpoints: steps, cpuMs } }
}

/**
 * In a fresh process: launch DBOS (timed: a fresh process must), then load the workflow's state:
 * its recorded step outputs, from which the conversation is rebuilt (a DBOS workflow has no other
 * state). DBOS's own recovery of a pending workflow replays the workflow function instead,
 * reading each recorded step output as the replay reaches it.
 */
async function resumeFresh(request: ChildRequest): Promise<ResumeFigures> {
  const { DBOS } = await import('@dbos-inc/dbos-sdk')
  const opened = await timedMs(() => launch(request.schema))
  try {
    const load = await timedMs(async () => rebuild(await DBOS.listWorkflowSteps(RUN_ID)), 'load')
    assertCount(load.value, request.n)
    const history = await timedMs(async () => (await DBOS.listWorkflowSteps(RUN_ID))?.length ?? 0, 'history')
    return {
      loadMs: opened.ms + load.ms,
      openMs: opened.ms,
      messages: load.value,
      historyMs: history.ms,
      historyEntries: history.value,
      historyComplete: true,
      headersMs: null,
      inProcess: false,
    }
  } finally {
    await DBOS.shutdown()
  }
}

function rebuild(steps: readonly { output: unknown }[] | undefined): number {
  if (!steps) throw new Error(`workflow ${RUN_ID} not found`)
  const messages: LoopMessage[] = [{ role: 'user', text: PROMPT }]
  for (const step of steps) messages.push(step.output as LoopMessage)
  return messages.length
}

async function launch(schema: string): Promise<void> {
  const { DBOS } = await import('@dbos-inc/dbos-sdk')
  const { pgUrl, PG_DATABASES } = await import('../pg-admin.js')
  DBOS.setConfig({ name: 'cairn-bench', systemDatabaseUrl: pgUrl(PG_DATABASES.dbos), systemDatabaseSchemaName: schema, logLevel: 'error' })
  await DBOS.launch()
}

function assertCount(count: number, n: number): void {
  if (count !== 2 * n + 2) throw new Error(`DBOS conversation holds ${count} messages, expected ${2 * n + 2}`)
}
