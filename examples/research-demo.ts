/**
 * The main demo, `npm run demo`: a research agent runs under Cairn's `Runner` with the embedded
 * SQLite store, its process is killed with SIGKILL in the middle of a step, and a fresh process
 * resumes the run and finishes it. Then the run's checkpoints are printed as a timeline, with a
 * summary of what was run, what was replayed from the journal and what the resume saved.
 *
 *   npm run demo                                     # files in .cairn/
 *   npx tsx examples/research-demo.ts --dir DIR
 *
 * The model is scripted (no API key): each turn is decided from the conversation it is sent,
 * so a resumed process continues the same script. To run the same demo on a real model, name it
 * in CAIRN_MODEL with its provider's key in the environment:
 *
 *   CAIRN_MODEL=openai:gpt-5-mini OPENAI_API_KEY=... npm run demo
 *   CAIRN_MODEL=anthropic:claude-sonnet-4-6 ANTHROPIC_API_KEY=... npm run demo
 *
 * (OPENAI_BASE_URL and ANTHROPIC_BASE_URL are honoured by the clients.) A real model decides
 * its own tool calls, so process 1 is killed once its first batch of tool results is in. Of the three tools, `search_web` and
 * `fetch_page` are idempotent reads; `save_note` is not: it appends to a notes file.
 */
import { fork } from 'node:child_process'
import { appendFileSync } from 'node:fs'
import { readFile, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { z } from 'zod'
import {
  Agent,
  buildTimeline,
  formatTimeline,
  Runner,
  tool,
  toolUsesOf,
  type AgentHooks,
  type EffectCompletion,
  type EffectCompletionResult,
  type EffectRecord,
  type ModelRequest,
  type RunEvent,
  type RunnerCheckpoint,
  type RuntimeSnapshot,
  type ToolUseBlock,
  type WriteBatch,
} from 'cairn-agents'
import { SqliteStore } from 'cairn-agents/sqlite'
import { ScriptedModel, type ScriptedResponse } from 'cairn-agents/testing'
import type { Model } from 'cairn-agents'

/** The real-model adapters, loaded only when CAIRN_MODEL asks for one. */
const realModels = process.env.CAIRN_MODEL ? { ...(await import('cairn-agents/openai')), ...(await import('cairn-agents/anthropic')) } : undefined

const RUN_ID = 'research-demo'
const QUESTION = 'How do durable AI agents survive a crash without repeating work?'
/** The first process kills itself once the results of this call (step 2's save_note) are in. */
const CRASH_AFTER_CALL = 'note-1'
const FILES = { db: 'demo.db', notes: 'demo-notes.md', toolRuns: 'demo-tool-runs.jsonl' }

type Role = 'first' | 'resumed'
/** What a worker process tells the parent over IPC. */
interface WorkerReport {
  role: Role
  pid: number
  commits: number
  state?: string
  llmCalls?: number
  replayed?: number
  finalText?: string
}
/** One execution of a tool callback, as the tools log it. */
interface ToolRun {
  role: Role
  pid: number
  tool: string
  callId: string
  key: string
}

/** The parent: a worker that is killed, a fresh worker that resumes, then the report. */
async function main(): Promise<number> {
  const { values } = parseArgs({ options: { dir: { type: 'string', default: '.cairn' } } })
  const dir = values.dir
  for (const file of [FILES.db, `${FILES.db}-wal`, `${FILES.db}-shm`, FILES.notes, FILES.toolRuns]) await rm(join(dir, file), { force: true })
  printIntro(dir)

  console.log('\n1. Process 1 starts the run: runner.run(agent, { input, runId })')
  const first = await runWorker('first', dir)
  if (first.signal !== 'SIGKILL' || !first.report) {
    console.error(`expected process 1 to be killed with SIGKILL, but it exited with ${first.code ?? first.signal}`)
    return 1
  }
  console.log(`KILLED: process 1 (pid ${first.report.pid}) died by SIGKILL in the middle of step 2`)

  console.log(`\n2. A fresh process resumes it: runner.resume(agent, { runId: '${RUN_ID}' })`)
  const second = await runWorker('resumed', dir)
  if (second.code !== 0 || second.report?.state === undefined) {
    console.error(`the resuming process failed with ${second.code ?? second.signal}`)
    return 1
  }
  console.log(`RUN STATE: ${second.report.state}`)

  const facts = await gatherFacts(dir, first.report, second.report)
  console.log(`\n3. Timeline: runner.history('${RUN_ID}'), one line per checkpoint\n`)
  await printTimeline(dir)
  console.log('\n4. What happened at the crash, and why nothing ran twice\n')
  printCrashStory(facts)
  console.log('\n5. Summary\n')
  return printSummary(facts)
}

/** A worker: start the run (process 1) or resume it (process 2), and report over IPC. */
async function work(role: Role, dir: string): Promise<void> {
  const store = new CountingStore({ path: join(dir, FILES.db) })
  const tag = `   [process ${role === 'first' ? 1 : 2}, pid ${process.pid}]`
  // Run events: what the runner reports as it goes (the CLI and OpenTelemetry use the same ones).
  const onEvent = (event: RunEvent) => {
    if (event.type === 'run_started') console.log(`${tag} ${event.resumed ? `resumes the run at step ${event.step}` : 'starts the run'}`)
    if (event.type === 'tool_call_replayed') console.log(`${tag} ${event.name} ${event.toolUseId} REPLAYED from the effect journal, not run`)
  }
  const runner = new Runner({ store, onEvent })
  const agent = buildAgent(role, dir, store)
  const run = role === 'first' ? await runner.run(agent, { input: QUESTION, runId: RUN_ID }) : await runner.resume(agent, { runId: RUN_ID })
  await store.close()
  const report: WorkerReport = {
    role,
    pid: process.pid,
    commits: store.commits,
    state: run.state,
    llmCalls: run.llmCalls,
    replayed: run.replayedEffectCount,
    finalText: run.state === 'completed' ? (run.result?.toString() ?? '') : (run.error?.message ?? ''),
  }
  process.send?.(report, () => process.disconnect())
}

/**
 * The same agent in every process: same model id, tools and system prompt (a resume checks
 * the configuration). Process 1 also gets the hook that kills it.
 */
function buildAgent(role: Role, dir: string, store: CountingStore): Agent {
  const tag = `   [process ${role === 'first' ? 1 : 2}, pid ${process.pid}]`
  const logRun = (tool: string, call: ToolUseBlock['toolUse'], key: string, what: string) => {
    const entry: ToolRun = { role, pid: process.pid, tool, callId: call.toolUseId, key }
    appendFileSync(join(dir, FILES.toolRuns), `${JSON.stringify(entry)}\n`)
    console.log(`${tag} ${tool} ran: ${what}`)
  }
  const searchWeb = tool({
    name: 'search_web',
    description: 'Search the web; returns the top results as { url, title }.',
    inputSchema: z.object({ query: z.string() }),
    idempotent: true,
    callback: ({ query }, ctx) => {
      const results = SEARCH_INDEX[query] ?? []
      logRun('search_web', ctx.toolUse, ctx.idempotencyKey, `"${query}" -> ${results.length} results`)
      return { results }
    },
  })
  const fetchPage = tool({
    name: 'fetch_page',
    description: 'Fetch a web page and return its text.',
    inputSchema: z.object({ url: z.string() }),
    idempotent: true,
    callback: ({ url }, ctx) => {
      logRun('fetch_page', ctx.toolUse, ctx.idempotencyKey, url)
      return PAGES[url] ?? `No page at ${url}.`
    },
  })
  const saveNote = tool({
    name: 'save_note',
    description: 'Append a note to the research notes file. Not idempotent: every call appends.',
    inputSchema: z.object({ title: z.string(), text: z.string() }),
    callback: ({ title, text }, ctx) => {
      appendFileSync(join(dir, FILES.notes), `## ${title}\n\n${text}\n\n(idempotency key ${ctx.idempotencyKey}, written by pid ${process.pid})\n\n`)
      logRun('save_note', ctx.toolUse, ctx.idempotencyKey, `appended "${title}" to ${FILES.notes}`)
      return `Saved the note "${title}".`
    },
  })
  const hooks: AgentHooks[] = role === 'first' ? [crashHook(tag, store)] : []
  return new Agent({
    name: 'researcher',
    model: demoModel(),
    tools: [searchWeb, fetchPage, saveNote],
    systemPrompt: 'You are a careful researcher. Search, read, keep notes, then answer.',
    hooks,
  })
}

/**
 * The model: scripted unless CAIRN_MODEL names a real one (`openai:<model>` on the Responses
 * API, `anthropic:<model>`); their adapters are loaded only then.
 */
function demoModel(): Model {
  const named = process.env.CAIRN_MODEL
  if (!named) return new ScriptedModel(Array.from({ length: 10 }, () => researcherTurn))
  const [provider, ...rest] = named.split(':')
  const model = rest.join(':')
  if (provider === 'openai') return new realModels!.OpenAIResponsesModel({ model })
  if (provider === 'anthropic') return new realModels!.AnthropicModel({ model })
  throw new Error(`CAIRN_MODEL must be openai:<model> or anthropic:<model>, got ${JSON.stringify(named)}`)
}

/**
 * Kill this process once the results of step 2's tools are in, before the runner checkpoints
 * them (the `post_tool_batch` checkpoint is written right after this message is added).
 */
function crashHook(tag: string, store: CountingStore): AgentHooks {
  return {
    messageAdded: async ({ message }) => {
      const results = message.content.flatMap((block) => ('toolResult' in block ? [block.toolResult.toolUseId] : []))
      // The script's step 2 holds CRASH_AFTER_CALL; a real model's first tool batch is where it dies.
      if (process.env.CAIRN_MODEL ? results.length === 0 : !results.includes(CRASH_AFTER_CALL)) return
      console.log(`${tag} all tools of step 2 have returned; their results are not checkpointed yet. Killing this process with SIGKILL.`)
      const report: WorkerReport = { role: 'first', pid: process.pid, commits: store.commits }
      await new Promise<never>(() => process.send?.(report, () => process.kill(process.pid, 'SIGKILL')))
    },
  }
}

/**
 * The model's script. The turn is decided by how many answers the conversation already holds,
 * never by a call counter, so a resumed process picks up the script where the run stopped.
 */
function researcherTurn(request: ModelRequest): ScriptedResponse {
  const step = request.messages.filter((message) => message.role === 'assistant').length
  const found = toolResults(request, 'search_web').flatMap((json) => (json as { results: SearchResult[] }).results)
  const urls = [...new Set(found.map((result) => result.url))]
  const pages = toolResults(request, 'fetch_page') as string[]
  const use = (toolUseId: string, name: string, input: Record<string, string>) => ({ toolUse: { toolUseId, name, input } })
  switch (step) {
    case 0:
      return [{ text: 'I will search the web first.' }, use('search-1', 'search_web', { query: QUERIES[0] })]
    case 1:
      return [{ text: 'Reading the two top results.' }, use('fetch-1', 'fetch_page', { url: urls[0]! }), use('fetch-2', 'fetch_page', { url: urls[1]! })]
    case 2:
      return [
        { text: 'Noting what I learned, reading the third result and searching a narrower topic.' },
        use('note-1', 'save_note', { title: 'How a durable agent survives a crash', text: pages.map(firstSentence).join(' ') }),
        use('fetch-3', 'fetch_page', { url: urls[2]! }),
        use('search-2', 'search_web', { query: QUERIES[1] }),
      ]
    case 3:
      return [
        { text: 'One more page, and a note on exactly-once tool calls.' },
        use('fetch-4', 'fetch_page', { url: urls[3]! }),
        use('note-2', 'save_note', { title: 'Exactly-once tool calls', text: firstSentence(pages[2] ?? '') }),
      ]
    default:
      return [{ text: `A durable agent checkpoints every boundary of its loop, so a fresh process can continue where a dead one stopped. ${firstSentence(pages[3] ?? '')} I saved 2 notes.` }]
  }
}

/** The JSON (or text) results of every call of `toolName` in the request's conversation. */
function toolResults(request: ModelRequest, toolName: string): unknown[] {
  const names = new Map(request.messages.flatMap((message) => toolUsesOf(message).map((use) => [use.toolUseId, use.name] as const)))
  return request.messages.flatMap((message) =>
    message.content.flatMap((block) => {
      if (!('toolResult' in block) || names.get(block.toolResult.toolUseId) !== toolName) return []
      return block.toolResult.content.map((part) => ('json' in part ? part.json : part.text))
    }),
  )
}

function firstSentence(text: string): string {
  return text.split(/(?<=\.)\s/)[0] ?? text
}

interface SearchResult {
  url: string
  title: string
}

const QUERIES = ['durable execution for AI agents', 'exactly-once tool calls'] as const

/** A tiny offline web. */
const SEARCH_INDEX: Record<string, SearchResult[]> = {
  [QUERIES[0]]: [
    { url: 'https://example.org/durable-agents', title: 'Durable agents: a checkpoint at every boundary' },
    { url: 'https://example.org/write-ahead-journal', title: 'A write-ahead journal for tool calls' },
    { url: 'https://example.org/crash-recovery', title: 'Crash recovery without redoing work' },
  ],
  [QUERIES[1]]: [
    { url: 'https://example.org/write-ahead-journal', title: 'A write-ahead journal for tool calls' },
    { url: 'https://example.org/idempotency-keys', title: 'Idempotency keys in practice' },
  ],
}

const PAGES: Record<string, string> = {
  'https://example.org/durable-agents':
    'A durable agent saves a checkpoint at every boundary of its loop: before and after each model call and each batch of tool calls. A fresh process loads the latest checkpoint and continues from there.',
  'https://example.org/write-ahead-journal':
    'Before a tool runs, its intent is written to a journal; when it returns, its outcome is. A call found with an outcome is replayed from the journal instead of being run again.',
  'https://example.org/crash-recovery':
    'A model response that was checkpointed is never requested again, so a resumed run does not pay for the same tokens twice. Recovery continues from the last boundary, not from the beginning.',
  'https://example.org/idempotency-keys':
    'An idempotency key that stays the same across retries lets the outside world drop a repeated request. Reads are idempotent by nature; writes need the key or a human decision.',
}

/** A SQLite store that counts its durable commits (checkpoint batches and journal marks). */
class CountingStore extends SqliteStore {
  commits = 0

  override async write(batch: WriteBatch): Promise<string[]> {
    const ids = await super.write(batch)
    this.commits++
    return ids
  }

  override async startEffect(runId: string, callId: string): Promise<EffectRecord> {
    const effect = await super.startEffect(runId, callId)
    this.commits++
    return effect
  }

  override async completeEffect(completion: EffectCompletion): Promise<EffectCompletionResult> {
    const result = await super.completeEffect(completion)
    this.commits++
    return result
  }
}

/** Everything the report needs, read back from the store and the files once both processes are done. */
interface Facts {
  dir: string
  history: RunnerCheckpoint[]
  /** Index in `history` of the resumed process's first checkpoint. */
  resumedAt: number
  runtime: RuntimeSnapshot
  effects: EffectRecord[]
  toolRuns: ToolRun[]
  notes: string[]
  dbBytes: number
  first: WorkerReport
  second: WorkerReport
}

async function gatherFacts(dir: string, first: WorkerReport, second: WorkerReport): Promise<Facts> {
  const store = new SqliteStore({ path: join(dir, FILES.db) })
  const history = await new Runner({ store }).history(RUN_ID)
  const effects = await store.listEffects(RUN_ID)
  await store.close()
  const runtime = history.findLast((checkpoint) => checkpoint.payload.runtime)?.payload.runtime as RuntimeSnapshot
  const toolRuns = (await readFile(join(dir, FILES.toolRuns), 'utf8')).split('\n').filter(Boolean).map((line) => JSON.parse(line) as ToolRun)
  const notes = [...(await readFile(join(dir, FILES.notes), 'utf8').catch(() => '')).matchAll(/^## (.*)$/gm)].map((match) => match[1]!)
  const sizes = await Promise.all([FILES.db, `${FILES.db}-wal`].map((file) => stat(join(dir, file)).then((s) => s.size, () => 0)))
  const resumedAt = history.findIndex((checkpoint) => checkpoint.phase === 'run_started' && checkpoint.payload.resumed === true)
  return { dir, history, resumedAt, runtime, effects, toolRuns, notes, dbBytes: sizes[0]! + sizes[1]!, first, second }
}

function printIntro(dir: string): void {
  console.log('Cairn demo: a research agent survives a crash\n')
  console.log(`The agent researches "${QUESTION}"`)
  console.log(process.env.CAIRN_MODEL ? `Its model is ${process.env.CAIRN_MODEL}. It has three tools:` : 'Its model is scripted (no API key needed). It has three tools:')
  console.log('  search_web   idempotent: running it twice does no harm')
  console.log('  fetch_page   idempotent')
  console.log(`  save_note    NOT idempotent: every call appends a note to ${join(dir, FILES.notes)}`)
  console.log(`The runner checkpoints every phase of the loop to the SQLite store ${join(dir, FILES.db)}.`)
}

/** The run's timeline, as `cairn show` prints it: the library's printer over the store. */
async function printTimeline(dir: string): Promise<void> {
  const store = new SqliteStore({ path: join(dir, FILES.db) })
  try {
    for (const line of formatTimeline(await buildTimeline(store, RUN_ID))) console.log(line)
  } finally {
    await store.close()
  }
  console.log(`\n   (the same timeline: npx cairn show ${RUN_ID} --store sqlite:${join(dir, FILES.db)})`)
}

function printCrashStory(facts: Facts): void {
  const crashStep = facts.history[facts.resumedAt - 1]?.step ?? 0
  const executions = facts.runtime.tool_executions.filter((execution) => execution.step === crashStep)
  const replayed = executions.filter((execution) => execution.replayed).map((execution) => execution.tool_name)
  const rerun = executions.filter((execution) => !execution.replayed).map((execution) => execution.tool_name)
  const saved = facts.runtime.llm_calls - (facts.second.llmCalls ?? 0)
  const lines = [
    `Process 1 was killed in step ${crashStep}, after its ${executions.length} tools had returned but before the checkpoint`,
    'recording their results was written. Nothing in its memory survived; process 2 knew only what',
    'was in the SQLite file.',
    '',
    `- The model's ${saved} answers were each saved in a post_llm checkpoint, so process 2 did not ask the`,
    `  model for them again: it loaded step ${crashStep}'s saved response and went straight to its tools.`,
    `- Before the tools ran, the runner wrote each call's intent to the effect journal (pre_tool_batch).`,
    `- ${replayed.join(', ')} is not idempotent, so the runner committed its outcome to the journal the moment`,
    '  it returned. Process 2 found that outcome and replayed it instead of running the tool again:',
    `  the note is in ${FILES.notes} once.`,
    `- ${rerun.join(' and ')} are idempotent reads. To save a commit, their outcomes are written with`,
    '  the batch checkpoint, which the crash prevented; process 2 found intents without outcomes and ran',
    '  them again with the same idempotency keys, which is safe for a read.',
    '- Had the process died inside save_note, before its outcome was journaled, Cairn would not guess:',
    '  the run would pause with an effect_outcome_unknown interrupt for a human to answer retry or skip.',
    '- Had two processes resumed the run at the same moment (two pods recovering at start-up), only one',
    '  would have executed it: each execution takes the run\'s lease first, and the other would have got',
    '  RunBusyError naming the owner (or, with waitForOwner, waited and returned the stored result).',
    '  The lease lasts leaseMs (60 s by default) and is renewed in the background while the run goes on;',
    '  a dead owner on this machine is taken over at once, one on another machine after leaseMs.',
  ]
  for (const line of lines) console.log(line ? `   ${line}` : '')
}

function printSummary(facts: Facts): number {
  const { toolRuns, first, second, runtime } = facts
  const ranBy = (role: Role) => toolRuns.filter((run) => run.role === role).length
  const replayed = runtime.tool_executions.filter((execution) => execution.replayed).length
  const saveNotes = toolRuns.filter((run) => run.tool === 'save_note')
  const twice = saveNotes.filter((run, i) => saveNotes.findIndex((other) => other.key === run.key) !== i).map((run) => run.key)
  const duplicateNotes = facts.notes.filter((title, i) => facts.notes.indexOf(title) !== i)
  const llmAfter = second.llmCalls ?? 0
  const rerun = toolRuns.filter((run) => run.role === 'resumed' && toolRuns.some((other) => other.role === 'first' && other.callId === run.callId))
  const rows = [
    ['tool calls in the conversation', `${runtime.tool_executions.length}`],
    ['tool callbacks executed', `${toolRuns.length} (${ranBy('first')} by process 1, ${ranBy('resumed')} by process 2)`],
    ['replayed from the journal', `${replayed} (RunResult.replayedEffectCount = ${second.replayed ?? 0})`],
    ['run again after the crash', `${rerun.length}, idempotent: ${rerun.map((run) => `${run.tool} ${run.callId}`).join(', ') || 'none'}`],
    ['model calls', `${runtime.llm_calls} in all: ${runtime.llm_calls - llmAfter} before the crash, ${llmAfter} after`],
    ['model calls saved by resuming', `${runtime.llm_calls - llmAfter} (the resumed process did not repeat them)`],
    ['checkpoints', `${facts.history.length} (${facts.resumedAt} by process 1, ${facts.history.length - facts.resumedAt} by process 2)`],
    ['durable commits', `${first.commits + second.commits} SQLite transactions for checkpoints and the journal (${first.commits} by process 1, ${second.commits} by process 2)`],
    ['effect journal', `${facts.effects.length} calls, ${facts.effects.filter((effect) => effect.status === 'succeeded').length} succeeded`],
    ['notes written', `${facts.notes.length}: ${facts.notes.map((title) => `"${title}"`).join(', ')}`],
    ['database size', `${(facts.dbBytes / 1024).toFixed(1)} KiB (${join(facts.dir, FILES.db)})`],
  ]
  for (const [label, value] of rows) console.log(`   ${label!.padEnd(31)}${value}`)
  console.log(`\nFINAL ANSWER: ${second.finalText}`)
  if (twice.length > 0 || duplicateNotes.length > 0 || second.state !== 'completed') {
    console.error(`FAILED: save_note ran twice for ${twice.join(', ') || 'no key'}; duplicate notes: ${duplicateNotes.join(', ') || 'none'}; run ${second.state}`)
    return 1
  }
  console.log('OK: the run completed after a SIGKILL, and no non-idempotent tool call ran twice')
  return 0
}

async function runWorker(role: Role, dir: string): Promise<{ code: number | null; signal: NodeJS.Signals | null; report: WorkerReport | undefined }> {
  const child = fork(fileURLToPath(import.meta.url), ['work', role, dir], { stdio: 'inherit' })
  let report: WorkerReport | undefined
  child.on('message', (message) => (report = message as WorkerReport))
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code: number | null, signal: NodeJS.Signals | null) => resolve({ code, signal, report }))
  })
}

// Last, so that every class and constant above is initialized before it runs.
if (process.argv[2] === 'work') {
  await work(process.argv[3] === 'resumed' ? 'resumed' : 'first', process.argv[4] ?? '.cairn')
} else {
  process.exitCode = await main()
}
