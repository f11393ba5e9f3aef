import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { JsonValue } from '../src/index.js'
import { checkScenario, normalize, unknownOutcomes, type Reference, type ScenarioFacts } from './checks.js'
import { runWorker, type WorkerCommand, type WorkerOutcome } from './child.js'
import type { Role } from './kill-switch.js'
import type { WorkerResult } from './protocol.js'
import { EffectLog } from './side-effects.js'

/** One crash scenario: a run killed at a named point or at random instants, then resumed to the end. */
export interface Scenario {
  id: string
  durability: 'sync' | 'async'
  /** `<point>:<occurrence>` where the first process dies, with every point name reached at that instant. */
  named?: { killAt: string; covers: string[]; role: Role }
  /** Delays (ms after `ready`) at which the harness SIGKILLs the first processes, one per process. */
  randomDelays?: number[]
  /** Seeds the retry/skip choice for unknown outcomes. */
  seed: number
}

/** What happened in one scenario. */
export interface ScenarioReport {
  scenario: Scenario
  namedKills: number
  randomKills: number
  /** A named kill point that this run never reached (the process finished without dying there). */
  missedNamedKill: boolean
  processes: number
  resumes: number
  replays: number
  surfacedRetried: number
  surfacedSkipped: number
  idempotentReruns: number
  failures: string[]
  /** Kept for inspection when the scenario failed (with `keepFailed`), else empty. */
  dir: string
}

const MAX_PROCESSES = 12
const OUTCOME_UNKNOWN = 'effect_outcome_unknown'

/**
 * Play a scenario: start the run in a worker, let it die (at its named point or by the harness's
 * timer), resume it in a fresh worker until it completes, answering every `effect_outcome_unknown`
 * interrupt with 'retry' or 'skip', then check the end state against the reference.
 */
export async function playScenario(scenario: Scenario, reference: Reference, options: PlayOptions): Promise<ScenarioReport> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-torture-'))
  const play = new Play(scenario, dir, options)
  const { report } = play
  try {
    const final = await play.untilCompleted()
    report.idempotentReruns = new EffectLog(join(dir, 'effects.log')).read().filter((line) => line.idempotent && !line.applied).length
    report.failures.push(...checkScenario(reference, { ...play.facts, final }))
  } catch (err) {
    if (!(err instanceof Failure)) throw err
    report.failures.push(err.message)
  }
  if (report.failures.length === 0 || !options.keepFailed) {
    await rm(dir, { recursive: true, force: true })
    report.dir = ''
  }
  return report
}

/** How scenarios are played. */
export interface PlayOptions {
  command: WorkerCommand
  timeoutMs: number
  keepFailed: boolean
}

/** One scenario in progress: what the harness has seen and answered so far. */
class Play {
  readonly report: ScenarioReport
  readonly facts: Omit<ScenarioFacts, 'final'>
  readonly #scenario: Scenario
  readonly #options: PlayOptions
  readonly #answers = new Map<string, 'retry' | 'skip'>()

  constructor(scenario: Scenario, dir: string, options: PlayOptions) {
    this.#scenario = scenario
    this.#options = options
    const runId = `t-${scenario.id}`.replace(/[^A-Za-z0-9_.-]/g, '_')
    this.facts = { runId, dir, skipped: new Set(), retries: new Map(), unknownAtKill: new Set(), surfaced: new Set() }
    this.report = {
      scenario,
      namedKills: 0,
      randomKills: 0,
      missedNamedKill: false,
      processes: 0,
      resumes: 0,
      replays: 0,
      surfacedRetried: 0,
      surfacedSkipped: 0,
      idempotentReruns: 0,
      failures: [],
      dir,
    }
  }

  /** Start, resume after every death and answer every interrupt, until a worker reports `completed`. */
  async untilCompleted(): Promise<WorkerResult> {
    const { named, randomDelays } = this.#scenario
    let responses: Record<string, JsonValue> | undefined
    for (let attempt = 0; attempt < MAX_PROCESSES; attempt++) {
      const out = await runWorker({
        command: this.#options.command,
        dir: this.facts.dir,
        runId: this.facts.runId,
        durability: this.#scenario.durability,
        timeoutMs: this.#options.timeoutMs,
        ...(responses ? { responses } : {}),
        ...(attempt === 0 && named ? { killAt: named.killAt } : {}),
        ...(randomDelays?.[attempt] === undefined ? {} : { killAfterMs: randomDelays[attempt] }),
      })
      this.report.processes++
      if (attempt > 0) this.report.resumes++
      responses = undefined
      if (out.killed) {
        await this.#died(out.killed)
        continue
      }
      if (attempt === 0 && named) this.report.missedNamedKill = true
      const result = checkedResult(out)
      this.report.replays += result.replayed
      if (result.state !== 'paused') return result
      responses = this.#answer(result.interrupts)
    }
    throw new Failure(`the run did not complete after ${MAX_PROCESSES} processes`)
  }

  /** Count the kill, and note every non-idempotent call it left started without an outcome. */
  async #died(killed: NonNullable<WorkerOutcome['killed']>): Promise<void> {
    if (killed.by === 'point') {
      if (killed.point !== this.#scenario.named?.killAt) throw new Failure(`died at ${killed.point}, expected ${this.#scenario.named?.killAt}`)
      this.report.namedKills++
    } else this.report.randomKills++
    for (const key of await unknownOutcomes(this.facts.dir, this.facts.runId)) this.facts.unknownAtKill.add(key)
  }

  /** Answer unknown outcomes as a human would: the same answer for the same call every time. */
  #answer(interrupts: WorkerResult['interrupts']): Record<string, JsonValue> {
    const responses: Record<string, JsonValue> = {}
    for (const interrupt of interrupts) {
      if (interrupt.name !== OUTCOME_UNKNOWN || interrupt.idempotencyKey === null) throw new Failure(`unexpected interrupt ${interrupt.id} (${interrupt.name})`)
      const key = normalize(this.facts.runId, interrupt.idempotencyKey)
      let answer = this.#answers.get(key)
      if (answer === undefined) {
        answer = chooseAnswer(this.#scenario.seed, key)
        this.#answers.set(key, answer)
        this.facts.surfaced.add(key)
        if (answer === 'retry') this.report.surfacedRetried++
        else this.report.surfacedSkipped++
      }
      if (answer === 'skip') this.facts.skipped.add(key)
      else this.facts.retries.set(key, (this.facts.retries.get(key) ?? 0) + 1)
      responses[interrupt.id] = answer
    }
    return responses
  }
}

/** A scenario that cannot go on: recorded as a failure, not thrown out of the harness. */
class Failure extends Error {}

function checkedResult(out: WorkerOutcome): WorkerResult {
  if (out.hung) throw new Failure('a worker hung (killed after its time limit)')
  if (out.error) throw new Failure(`resume threw ${out.error.name}${out.error.code ? ` (${out.error.code})` : ''}: ${out.error.message}`)
  if (!out.result) throw new Failure(`a worker exited (code ${out.code}, signal ${out.signal}) without a result: ${out.stderr.trim().slice(-600)}`)
  return out.result
}

/** 'retry' for about a third of unknown outcomes, 'skip' for the rest; fixed by the seed. */
function chooseAnswer(seed: number, key: string): 'retry' | 'skip' {
  let h = seed >>> 0
  for (const ch of key) h = Math.imul(h ^ ch.charCodeAt(0), 2654435761) >>> 0
  return h % 3 === 0 ? 'retry' : 'skip'
}
