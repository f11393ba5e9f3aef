/**
 * Stream kills, a part of the crash torture: the process writing a run is SIGKILLed in the
 * middle of its model's streamed answer (at a random word, sometimes the resuming process too),
 * another process resumes the run, and three reader processes follow its durable stream with
 * cursors — one of them dropping its connection at random instants and coming back with its last
 * cursor. Each scenario checks that every reader received the run's whole event log exactly once,
 * in order, with no gap; that the log marks each cut-off answer `model_call_voided`; and that
 * after the last marker the answer streams whole, once.
 *
 * The processes are those of the durable-stream tests (test/streams/fixtures/stream-child.ts).
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { isDeepStrictEqual } from 'node:util'
import { dropSchema, POSTGRES_URL, postgresAnswers } from './postgres.js'
import type { RunEvent, StreamedRunEvent } from '../src/index.js'
import { ANSWER_WORDS, answer, openTarget } from '../test/streams/fixtures/stream-agent.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const CHILD = join(ROOT, 'test/streams/fixtures/stream-child.ts')
const RUN_ID = 'streamed'
/** The longest any process of a scenario may take before it is killed and the scenario failed. */
const PROCESS_TIMEOUT_MS = 90_000

/** How many stream kill scenarios to play, and where. */
export interface StreamKillOptions {
  scenarios: number
  /** `sqlite`, `postgres`; default both (Postgres when a server answers). */
  backends?: readonly string[]
  lanes: number
  seed: number
  log?: (line: string) => void
}

/** What the stream kills found. */
export interface StreamKillTally {
  scenarios: number
  /** Writers killed in the middle of the answer (a scenario kills one or two). */
  kills: number
  readers: number
  /** Times a reader dropped its connection and came back with its cursor. */
  reconnects: number
  /** Events the readers received in all, each checked against the log. */
  eventsChecked: number
  backends: string[]
  failures: { scenario: string; problems: string[] }[]
  durationMs: number
}

interface StreamScenario {
  id: string
  target: (dir: string) => Promise<{ target: string; dispose: () => Promise<void> }>
  /** Words of the answer in the log when the writer is killed. */
  killAtWords: number
  /** Also kill the first resume, at this many words of its own answer. */
  secondKillAtWords: number | undefined
  delayMs: number
}

/** Play the stream kill scenarios and tally them. */
export async function runStreamKills(options: StreamKillOptions): Promise<StreamKillTally> {
  const started = performance.now()
  const backends = options.backends ?? ['sqlite', 'postgres']
  const available = backends.includes('postgres') && !(await postgresAnswers()) ? backends.filter((name) => name !== 'postgres') : [...backends]
  if (available.length < backends.length) options.log?.(`stream kills: no Postgres server answers at ${POSTGRES_URL}; SQLite only`)
  const tally: StreamKillTally = { scenarios: 0, kills: 0, readers: 0, reconnects: 0, eventsChecked: 0, backends: available, failures: [], durationMs: 0 }
  const rng = mulberry32(options.seed)
  const scenarios: StreamScenario[] = Array.from({ length: options.scenarios }, (_, i) => {
    const backend = available[i % available.length]!
    const second = rng() < 0.3
    return {
      id: `stream-${backend}-${i}`,
      target: backend === 'postgres' ? postgresTarget : sqliteTarget,
      killAtWords: 1 + Math.floor(rng() * (ANSWER_WORDS - 8)),
      secondKillAtWords: second ? 1 + Math.floor(rng() * (ANSWER_WORDS - 8)) : undefined,
      delayMs: 20 + Math.floor(rng() * 40),
    }
  })
  let next = 0
  const lane = async () => {
    for (let scenario = scenarios[next++]; scenario !== undefined; scenario = scenarios[next++]) {
      const report = await playStreamKill(scenario)
      tally.scenarios++
      tally.kills += report.kills
      tally.readers += report.readers
      tally.reconnects += report.reconnects
      tally.eventsChecked += report.eventsChecked
      if (report.problems.length > 0) {
        tally.failures.push({ scenario: scenario.id, problems: report.problems })
        options.log?.(`FAIL ${scenario.id}: ${report.problems.join('; ')}`)
      }
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, options.lanes) }, lane))
  tally.durationMs = performance.now() - started
  return tally
}

/** The tally as the lines the harness prints. */
export function formatStreamKillTally(tally: StreamKillTally): string {
  return [
    `stream scenarios     ${tally.scenarios} on ${tally.backends.join(', ')}`,
    `writers killed       ${tally.kills} mid-answer`,
    `reader processes     ${tally.readers} (${tally.reconnects} reconnects with a cursor)`,
    `events checked       ${tally.eventsChecked} (each reader's against the log: once, in order, no gap)`,
    `failures             ${tally.failures.length}`,
    `time                 ${(tally.durationMs / 1000).toFixed(1)} s`,
    ...tally.failures.slice(0, 20).map((failure) => `  FAIL ${failure.scenario}: ${failure.problems.join('; ')}`),
  ].join('\n')
}

async function playStreamKill(scenario: StreamScenario): Promise<{ kills: number; readers: number; reconnects: number; eventsChecked: number; problems: string[] }> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-torture-stream-'))
  const { target: where, dispose } = await scenario.target(dir)
  const store = openTarget(where)
  const problems: string[] = []
  const out = { kills: 0, readers: 0, reconnects: 0, eventsChecked: 0, problems }
  const readers = [0, 1, 2].map((i) => ({ file: join(dir, `reader-${i}.json`), process: start(['read', where, RUN_ID, join(dir, `reader-${i}.json`), i === 2 ? '1' : '0']) }))
  try {
    const writer = start(['write', where, RUN_ID, String(scenario.delayMs)])
    if (!(await killAt(store, writer, scenario.killAtWords, 0))) problems.push(`the writer ended before ${scenario.killAtWords} words of its answer were in the log: ${(await writer.exited).stderr}`)
    else out.kills++
    if (scenario.secondKillAtWords !== undefined && problems.length === 0) {
      const resumer = start(['resume', where, RUN_ID, String(scenario.delayMs)])
      if (await killAt(store, resumer, scenario.secondKillAtWords, 1)) out.kills++
      else problems.push(`the first resume ended before ${scenario.secondKillAtWords} words: ${(await resumer.exited).stderr}`)
    }
    const resumed = await start(['resume', where, RUN_ID]).exited
    if (!resumed.stdout.includes('result completed')) problems.push(`the last resume did not complete the run: ${resumed.stdout} ${resumed.stderr}`)
    const truth = (await store.events!.read(RUN_ID, { limit: 10_000 })) as unknown as StreamedRunEvent[]
    problems.push(...checkLog(truth.map((stored) => stored.event), out.kills))
    const cursors = truth.map((stored) => stored.cursor)
    if (new Set(cursors).size !== cursors.length) problems.push('the log repeats a cursor')
    for (const [i, reader] of readers.entries()) {
      const exit = await reader.process.exited
      out.readers++
      if (exit.code !== 0) {
        problems.push(`reader ${i} exited ${exit.code ?? exit.signal}: ${exit.stderr.slice(0, 300)}`)
        continue
      }
      const { received, drops } = JSON.parse(await readFile(reader.file, 'utf8')) as { received: StreamedRunEvent[]; drops: number }
      out.reconnects += drops
      out.eventsChecked += received.length
      if (!isDeepStrictEqual(received, truth)) problems.push(`reader ${i} (${drops} reconnects) ${difference(received, truth)}`)
    }
  } catch (err) {
    problems.push(`the scenario broke: ${(err as Error).message}`)
  } finally {
    for (const reader of readers) reader.process.kill()
    await store.close()
    await dispose()
    if (problems.length === 0) await rm(dir, { recursive: true, force: true })
    else problems.push(`kept ${dir}`)
  }
  return out
}

/** Kill `child` once the log holds `words` words of the answer after `voids` void markers; false if it ended first. */
async function killAt(store: ReturnType<typeof openTarget>, child: Started, words: number, voids: number): Promise<boolean> {
  let exited = false
  void child.exited.then(() => (exited = true))
  const deadline = Date.now() + PROCESS_TIMEOUT_MS
  for (;;) {
    if (exited) return false
    const events = (await store.events!.read(RUN_ID, { limit: 10_000 })).map((stored) => stored.event as unknown as RunEvent)
    const marks = events.flatMap((event, i) => (event.type === 'model_call_voided' ? [i] : []))
    if (marks.length >= voids && answerWords(events.slice(voids === 0 ? 0 : marks[voids - 1]! + 1)) >= words) break
    if (Date.now() > deadline) throw new Error(`no ${words} words of the answer in the log after ${PROCESS_TIMEOUT_MS} ms`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  child.kill('SIGKILL')
  await child.exited
  return true
}

/** Words of the answer in `events` (a delta may carry several: the log batches its writes). */
function answerWords(events: readonly RunEvent[]): number {
  return textOf(events).split(' ').filter(Boolean).length
}

/** The log's own checks: one void marker per kill, each cutting an answer short, then the answer whole and the run completed. */
function checkLog(events: readonly RunEvent[], kills: number): string[] {
  const problems: string[] = []
  const marks = events.flatMap((event, i) => (event.type === 'model_call_voided' ? [i] : []))
  if (marks.length !== kills) problems.push(`${marks.length} model_call_voided markers for ${kills} kills`)
  let from = 0
  for (const mark of marks) {
    if ((events[mark] as { step: number }).step !== 1) problems.push(`a marker voids step ${(events[mark] as { step: number }).step}, not the answer's step 1`)
    const cut = textOf(events.slice(from, mark))
    if (cut.length === 0 || cut.length >= answer().length || !answer().startsWith(cut)) problems.push(`the text before a marker is not a cut-off answer: ${JSON.stringify(cut.slice(0, 80))}`)
    from = mark + 1
  }
  if (textOf(events.slice(from)) !== answer()) problems.push('after the last marker the answer is not streamed whole, once')
  const last = events.at(-1)
  if (last?.type !== 'run_finished' || last.state !== 'completed') problems.push(`the log ends with ${JSON.stringify(last)}`)
  return problems
}

function textOf(events: readonly RunEvent[]): string {
  return events.flatMap((event) => (event.type === 'text_delta' && event.step === 1 ? [event.text] : [])).join('')
}

/** Where a reader's events first differ from the log. */
function difference(received: readonly StreamedRunEvent[], truth: readonly StreamedRunEvent[]): string {
  const at = received.findIndex((item, i) => !isDeepStrictEqual(item, truth[i]))
  if (at < 0) return `received ${received.length} events of ${truth.length}: the rest is missing`
  return `differs at event ${at} of ${truth.length}: got ${JSON.stringify(received[at]).slice(0, 120)}, the log has ${JSON.stringify(truth[at]).slice(0, 120)}`
}

interface Started {
  kill(signal?: NodeJS.Signals): void
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>
}

function start(args: string[]): Started {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  const timer = setTimeout(() => child.kill('SIGKILL'), PROCESS_TIMEOUT_MS)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve) => {
    child.on('error', (err) => resolve({ code: null, signal: null, stdout, stderr: `${stderr}${err.message}` }))
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
  })
  return { kill: (signal = 'SIGTERM') => child.kill(signal), exited }
}

async function sqliteTarget(dir: string): Promise<{ target: string; dispose: () => Promise<void> }> {
  return { target: `sqlite:${join(dir, 'cairn.db')}`, dispose: async () => {} }
}

async function postgresTarget(): Promise<{ target: string; dispose: () => Promise<void> }> {
  const schema = `cairn_stream_${process.pid}_${randomBytes(4).toString('hex')}`
  return {
    target: `postgres:${schema}`,
    dispose: () => dropSchema(schema),
  }
}


function mulberry32(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
