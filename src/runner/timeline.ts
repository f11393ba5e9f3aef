import type { JsonObject } from '../core/codec.js'
import { CheckpointNotFoundError } from '../core/errors.js'
import { textOf, toolUsesOf, type Message, type ToolUseBlock } from '../model/messages.js'
import type { CheckpointRecord, EffectRecord, RunRecord, StoreReader } from '../store/checkpoint-store.js'
import { expandAll, writerOf } from './phase-log.js'
import { RUNNER_KIND, type RuntimeSnapshot, type ToolExecutionRecord } from './phases.js'

/** One tool call as the timeline shows it. */
export interface TimelineToolCall {
  id: string
  name: string
  input: unknown
}

/** One checkpoint of a run, in plain words: a line of `cairn show` and a row of the inspector. */
export interface TimelineEntry {
  /** 1-based position in the run. */
  index: number
  checkpointId: string
  seq: number
  kind: string
  phase: string
  step: number
  createdAt: number
  /** Milliseconds since the run's first checkpoint. */
  sinceStartMs: number
  /** Which execution wrote it: 1 for the process that started the run, 2 for the first resume, … */
  execution: number
  /** The process or lease that wrote it (`pid 42 on host`, `lease w1 epoch 3`), when known. */
  writer: string
  /** It holds the full runtime snapshot (a run can resume from it). */
  snapshot: boolean
  /** A new process took the run over here (a resume after a crash or a pause). */
  resumedHere: boolean
  /** What happened, in one line. */
  summary: string
  /** The calls the model asked for (`post_llm`), with their inputs. */
  toolCalls: TimelineToolCall[]
  /** Tools satisfied from the effect journal instead of running (`post_tool_batch`). */
  replayed: string[]
  /** The model's text (`post_llm`). */
  text: string
  /** The answers a resume of a paused run was given (`run_started`), with who gave them. */
  answers: TimelineAnswer[]
}

/** One answer to an interrupt, as the resume that applied it recorded it. */
export interface TimelineAnswer {
  interruptId: string
  /** The interrupt's name: `effect_outcome_unknown` for a call whose process died while it ran. */
  name: string
  toolUseId: string
  answer: unknown
  /** Who gave it (`runner.resume`'s `answeredBy`; `cairn resume` records the user), when known. */
  by: string | null
  /** When the resume that applied it started (Unix ms), and the process that applied it. */
  at: number
  appliedBy: string
}

/** A run's whole history as {@link buildTimeline} reads it. */
export interface Timeline {
  run: RunRecord
  entries: TimelineEntry[]
  effects: EffectRecord[]
  /** The newest runtime snapshot (runner runs): the conversation and the tool executions. */
  runtime: RuntimeSnapshot | undefined
}

/**
 * Read a run's checkpoints, oldest first, and describe each: the audit log behind `cairn show`,
 * the inspector and the demo. Throws `CheckpointNotFoundError` for an unknown run.
 *
 * @example
 * ```ts
 * for (const line of formatTimeline(await buildTimeline(store, 'q4'))) console.log(line)
 * ```
 */
export async function buildTimeline(store: StoreReader, runId: string): Promise<Timeline> {
  const run = await store.getRun(runId)
  if (!run) throw new CheckpointNotFoundError(`run ${runId} is not in this store; list the runs with \`cairn runs\``, { runId, code: 'run_not_found' })
  const records = expandAll(await store.loadRun<Record<string, unknown>>(runId))
  const effects = await store.listEffects(runId)
  const runtime = records.map((record) => runtimeOf(record)).findLast((snapshot) => snapshot !== undefined)
  const entries = describeCheckpoints(records, {
    runtime,
    attempts: new Map(effects.map((effect) => [effect.callId, effect.attempts])),
    startedAt: records[0]?.createdAt ?? run.createdAt,
  })
  return { run, entries, effects, runtime }
}

/** What {@link describeCheckpoints} describes a run's checkpoints with. */
export interface TimelineContext {
  /** The newest runtime snapshot of the run (its conversation and tool executions). */
  runtime: RuntimeSnapshot | undefined
  /** Attempts of the effect journal's calls, by call id. */
  attempts: ReadonlyMap<string, number>
  /** When the run's first checkpoint was written. */
  startedAt: number
  /**
   * Where `records` begin: at the run's first checkpoint (the default), or later (a page of a long
   * run). Later, `execution` counts from 0 at the page, and positions from `firstIndex`.
   */
  fromStart?: boolean
  /**
   * The position in the whole run's timeline of the first record (1-based), when the records do not
   * begin at the run's first checkpoint: a page numbers its rows as the whole timeline does. Without
   * it, such a page's positions are the stored checkpoints' `seq`.
   */
  firstIndex?: number
  /**
   * Where `runtime.messages` begins in the run's conversation, when it holds only the newer
   * messages (a page read with `loadTails`): each step's answer is then found from the message
   * count its `step_started` or `pre_llm` phase recorded. Without it, the messages are the whole
   * conversation and the n-th answer is step n's.
   */
  messagesFrom?: number
}

/**
 * Describe consecutive checkpoints of one run, oldest first: the rows of a timeline, for the
 * whole run ({@link buildTimeline}) or a page of it.
 */
export function describeCheckpoints(records: readonly CheckpointRecord<Record<string, unknown>>[], context: TimelineContext): TimelineEntry[] {
  const fromStart = context.fromStart !== false
  const index = indexRuntime(context.runtime, context.messagesFrom === undefined ? undefined : { from: context.messagesFrom, records })
  const entries: TimelineEntry[] = []
  const history: History = { seen: 0, lastSnapshot: 0, batchesBegun: new Set() }
  let execution = 0
  let writer = ''
  let batchStep = 0
  for (const [i, record] of records.entries()) {
    const resumedHere = record.phase === 'run_started' && record.payload.resumed === true
    if (record.phase === 'run_started' || (i === 0 && execution === 0 && fromStart)) execution++
    writer = writerOf(record) ?? (record.phase === 'run_started' ? '' : writer)
    const step = record.phase === 'post_tool_batch' && typeof record.metadata.step !== 'number' ? batchStep : numberOr(record.metadata.step ?? superStepOf(record), 0)
    if (record.phase === 'pre_tool_batch') batchStep = step
    const calls = record.kind === RUNNER_KIND && record.phase === 'post_llm' ? callsOfStep(index, step) : []
    const snapshot = runtimeOf(record) !== undefined
    entries.push({
      index: fromStart ? i + 1 : context.firstIndex !== undefined ? context.firstIndex + i : record.seq,
      checkpointId: record.id,
      seq: record.seq,
      kind: record.kind,
      phase: record.phase,
      step,
      createdAt: record.createdAt,
      sinceStartMs: record.createdAt - context.startedAt,
      execution,
      writer,
      snapshot,
      resumedHere,
      summary: forkNote(record, fromStart ? i : -1) + describe({ record, step, index, attempts: context.attempts, history, calls }),
      toolCalls: calls.map((use) => ({ id: use.toolUseId, name: use.name, input: use.input })),
      replayed: record.phase === 'post_tool_batch' ? (index.executions.get(step) ?? []).filter((e) => e.replayed).map((e) => e.tool_name) : [],
      text: record.phase === 'post_llm' ? answerText(index, step) : '',
      answers: answersOf(record, writer),
    })
    history.seen = entries.at(-1)!.index
    if (snapshot) history.lastSnapshot = history.seen
    if (record.phase === 'pre_tool_batch' && typeof record.metadata.step === 'number') history.batchesBegun.add(step)
  }
  return entries
}

/**
 * The timeline as text, one line per checkpoint, with a marked line where a new process took
 * the run over; with `checkpointIds`, each line names its checkpoint's id.
 */
export function formatTimeline(timeline: Timeline, options: { checkpointIds?: boolean } = {}): string[] {
  const width = options.checkpointIds === true ? Math.max(10, ...timeline.entries.map((entry) => entry.checkpointId.length)) : 0
  const id = (text: string) => (width > 0 ? `${text.padEnd(width)}  ` : '')
  const lines = [`   ${'#'.padStart(3)}  ${id('checkpoint')}${'ms'.padStart(6)}  proc  step  ${'phase'.padEnd(17)}what happened`]
  for (const entry of timeline.entries) {
    if (entry.index === 1 && entry.writer) lines.push(`   process 1 (${entry.writer}) started the run`)
    if (entry.resumedHere) {
      lines.push(`   ${'-'.repeat(90)}`, `   process ${entry.execution - 1} stopped here; process ${entry.execution}${entry.writer ? ` (${entry.writer})` : ''} resumed the run`, `   ${'-'.repeat(90)}`)
    }
    for (const answer of entry.answers) {
      lines.push(`   answer to ${answer.interruptId}: ${JSON.stringify(answer.answer)}, given by ${answer.by ?? 'an unnamed caller'} at ${new Date(answer.at).toISOString()}`)
    }
    const phase = `${entry.phase}${entry.snapshot ? '*' : ''}`.padEnd(17)
    lines.push(`   ${String(entry.index).padStart(3)}  ${id(entry.checkpointId)}${String(entry.sinceStartMs).padStart(6)}  ${String(entry.execution).padStart(4)}  ${String(entry.step).padStart(4)}  ${phase}${entry.summary}`)
  }
  return lines
}

/** The runtime snapshot a runner checkpoint holds, if any. */
export function runtimeOf(record: CheckpointRecord): RuntimeSnapshot | undefined {
  if (record.kind !== RUNNER_KIND) return undefined
  const runtime = (record.payload as { runtime?: unknown } | null)?.runtime
  return typeof runtime === 'object' && runtime !== null ? (runtime as RuntimeSnapshot) : undefined
}

/** The newest runtime snapshot, indexed once: a timeline's cost follows its length, not its square. */
interface RuntimeIndex {
  runtime: RuntimeSnapshot | undefined
  /** Each step's answer, by step. */
  assistants: Message[]
  executions: Map<number, ToolExecutionRecord[]>
}

/** What the checkpoints before the one being described held. */
interface History {
  /** How many came before. */
  seen: number
  /** 1-based position of the newest one holding a runtime snapshot (0: none). */
  lastSnapshot: number
  /** Steps whose tool batch had begun. */
  batchesBegun: Set<number>
}

interface DescribeParams {
  record: CheckpointRecord<Record<string, unknown>>
  step: number
  index: RuntimeIndex
  attempts: ReadonlyMap<string, number>
  history: History
  calls: ToolUseBlock['toolUse'][]
}

/** One checkpoint in plain words. */
function describe({ record, step, index, attempts, history, calls }: DescribeParams): string {
  const { payload } = record
  if (record.kind !== RUNNER_KIND) return describeOther(record)
  switch (record.phase) {
    case 'run_started': {
      if (payload.resumed !== true) return `run started: "${truncate(firstUserText(runtimeOf(record) ?? index.runtime), 70)}"`
      const answers = answersOf(record, '').length
      return `a fresh process loaded the latest checkpoint (#${history.seen}) and the runtime snapshot${history.lastSnapshot ? ` (#${history.lastSnapshot})` : ''}, and resumed${answers ? ` with ${plural(answers, 'answer')} to the interrupts` : ''}`
    }
    case 'step_started':
      return `step ${step} begins with ${plural(Number(payload.message_count), 'message')}`
    case 'pre_llm':
      return `calling the model ${str(payload.model)} with ${plural(Number(payload.message_count), 'message')}`
    case 'post_llm':
      return payload.finish_reason === 'tool_use' ? `model asked for ${calls.map(formatCall).join(', ') || plural(Number(payload.tool_call_count), 'tool call')}` : `model answered: "${truncate(answerText(index, step), 70)}"`
    case 'pre_tool_batch': {
      const n = plural(Number(payload.tool_call_count), 'tool call')
      return history.batchesBegun.has(step) ? `${n} again; their intents are already in the journal` : `${n} about to run; intents written to the journal first`
    }
    case 'post_tool_batch':
      return describeBatch(index.executions.get(step) ?? [], attempts)
    case 'pre_subagent_batch':
    case 'post_subagent_batch':
      return `${plural(Number(payload.subagent_call_count), 'subagent call')}`
    case 'run_paused':
      return `paused: waiting for ${plural(Array.isArray(payload.interrupts) ? payload.interrupts.length : 0, 'answer')} to an interrupt`
    case 'run_terminal':
      return `run ${str(payload.state)}${payload.state === 'completed' ? `: "${truncate(str(payload.final_text), 60)}"` : ''}`
    default:
      return ''
  }
}

/** "forked from checkpoint X of run Y; " on a fork's first checkpoint. */
function forkNote(record: CheckpointRecord, index: number): string {
  const forked = record.metadata.forkedFrom as JsonObject | undefined
  return index === 0 && forked ? `forked from checkpoint ${str(forked.checkpointId)} of run ${str(forked.runId)}; ` : ''
}

/** A workflow checkpoint's super step (its iteration count), which stands for a runner's step. */
function superStepOf(record: CheckpointRecord<Record<string, unknown>>): number | undefined {
  const iteration = record.kind === RUNNER_KIND ? undefined : record.payload.iterationCount
  return typeof iteration === 'number' ? iteration : undefined
}

function describeOther(record: CheckpointRecord<Record<string, unknown>>): string {
  const payload = record.payload
  if (typeof payload.iterationCount === 'number') {
    const inFlight = Array.isArray(payload.messages) ? payload.messages.length : 0
    const pending = Object.keys((payload.pendingRequestInfoEvents as object | undefined) ?? {}).length
    return `super step ${payload.iterationCount}: ${plural(inFlight, 'message')} in flight${pending ? `, ${plural(pending, 'pending request')}` : ''}`
  }
  return `${record.kind} checkpoint${record.terminal ? ' (terminal)' : ''}`
}

/** "3 tool results: save_note replayed from the journal; …" for one batch. */
function describeBatch(executions: readonly ToolExecutionRecord[], attempts: ReadonlyMap<string, number>): string {
  const names = (filter: (e: ToolExecutionRecord) => boolean) => executions.filter(filter).map((e) => e.tool_name).join(', ')
  const ran = (e: ToolExecutionRecord) => !e.replayed && e.answer !== 'skip'
  const again = (e: ToolExecutionRecord) => (attempts.get(e.tool_call_id) ?? 1) > 1
  const parts = [
    [names((e) => e.replayed), 'REPLAYED from the journal, not run'],
    [names((e) => e.answer === 'skip'), 'NOT RUN: its outcome was unknown and the answer was skip (the model got an error result)'],
    [names((e) => ran(e) && e.answer === 'retry'), 'ran again: its outcome was unknown and the answer was retry (same idempotency key)'],
    [names((e) => ran(e) && e.answer === undefined && again(e)), 'ran again (same idempotency key)'],
    [names((e) => ran(e) && e.answer === undefined && !again(e)), 'ran'],
  ].flatMap(([who, what]) => (who ? [`${who} ${what}`] : []))
  return `${plural(executions.length, 'tool result')}${parts.length ? `: ${parts.join('; ')}` : ''}`
}

/** The answers a `run_started` checkpoint records (see `Runner.resume`), as the timeline shows them. */
function answersOf(record: CheckpointRecord<Record<string, unknown>>, appliedBy: string): TimelineAnswer[] {
  if (record.kind !== RUNNER_KIND || record.phase !== 'run_started') return []
  const answers = record.payload.answers as { by?: unknown; items?: unknown } | undefined
  if (!answers || !Array.isArray(answers.items)) return []
  const by = typeof answers.by === 'string' ? answers.by : null
  return (answers.items as Record<string, unknown>[]).map((item) => ({
    interruptId: str(item.interrupt_id),
    name: str(item.name),
    toolUseId: str(item.tool_call_id),
    answer: item.answer ?? null,
    by,
    at: record.createdAt,
    appliedBy,
  }))
}

function indexRuntime(runtime: RuntimeSnapshot | undefined, tail: { from: number; records: readonly CheckpointRecord<Record<string, unknown>>[] } | undefined): RuntimeIndex {
  const executions = new Map<number, ToolExecutionRecord[]>()
  for (const execution of runtime?.tool_executions ?? []) {
    const list = executions.get(execution.step)
    if (list) list.push(execution)
    else executions.set(execution.step, [execution])
  }
  const messages = runtime?.messages ?? []
  if (!tail) return { runtime, assistants: messages.filter((message) => message.role === 'assistant'), executions }
  // A tail of the conversation: a step's answer is the first assistant message from where the step began.
  const assistants: Message[] = []
  for (const record of tail.records) {
    const count = record.payload.message_count
    if ((record.phase !== 'step_started' && record.phase !== 'pre_llm') || typeof count !== 'number' || typeof record.metadata.step !== 'number') continue
    if (count < tail.from) continue
    for (let k = count - tail.from; k < messages.length; k++) {
      if (messages[k]!.role !== 'assistant') continue
      assistants[record.metadata.step] = messages[k]!
      break
    }
  }
  return { runtime, assistants, executions }
}

function callsOfStep(index: RuntimeIndex, step: number): ToolUseBlock['toolUse'][] {
  const answer = index.assistants[step] ?? index.runtime?.pending_llm_response ?? undefined
  return answer ? toolUsesOf(answer) : []
}

function answerText(index: RuntimeIndex, step: number): string {
  const answer = index.assistants[step]
  return answer ? textOf(answer) : (index.runtime?.final_text ?? '')
}

function firstUserText(runtime: RuntimeSnapshot | undefined): string {
  const first = runtime?.messages.find((message) => message.role === 'user')
  return first ? textOf(first) : ''
}

/** `name(arg="value", …)`, short. */
export function formatCall(use: { name: string; input: unknown }): string {
  const args = Object.entries((use.input ?? {}) as Record<string, unknown>).map(([name, value]) => `${name}=${truncate(typeof value === 'string' ? `"${value}"` : JSON.stringify(value), 28)}`)
  return `${use.name}(${args.join(', ')})`
}

function numberOr(value: unknown, fallback: number): number {
  return typeof value === 'number' ? value : fallback
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`
}

/** A stored scalar as text ('' for null and undefined). */
function str(value: unknown): string {
  if (value === null || value === undefined) return ''
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' ? String(value) : JSON.stringify(value)
}
