import { writeSync } from 'node:fs'
import { type AcquireRunInput, type CheckpointInput, type CheckpointStore, type CreateRunInput, type EffectCompletion, type EffectCompletionResult, type EffectRecord, type RunRecord, type UpdateRunInput, type WriteBatch } from '../src/index.js'
import { DelegatingStore, type RunLeases } from '../src/engine.js'
import { phasesOf } from '../src/runner/phase-log.js'

/** Which run a kill point was reached in: the planner's own run or the researcher's child run. */
export type Role = 'parent' | 'child'

/** One moment a kill point was reached: every point name hit at that instant, with its occurrence. */
export interface TraceEntry {
  /** `<point>:<occurrence>`, e.g. `after-write:post_llm:3`. */
  points: string[]
  role: Role
}

/** The environment variable naming where a worker dies: `<point>:<occurrence>`. */
export const KILL_ENV = 'CAIRN_TORTURE_KILL'
/** Set to `1` to have a worker report every kill point it reaches (the reference run does). */
export const TRACE_ENV = 'CAIRN_TORTURE_TRACE'

/**
 * Counts named kill points as a worker reaches them and SIGKILLs the process at the one named
 * in `CAIRN_TORTURE_KILL` (its Nth occurrence, counted in this process). Nothing is cleaned up:
 * the process dies as it would in a crash.
 */
export class KillSwitch {
  readonly #target: { point: string; occurrence: number } | undefined
  readonly #trace: boolean
  readonly #counts = new Map<string, number>()

  constructor(spec: string | undefined, trace: boolean) {
    this.#trace = trace
    if (spec === undefined || spec === '') return
    const at = spec.lastIndexOf(':')
    const occurrence = Number(spec.slice(at + 1))
    if (at <= 0 || !Number.isInteger(occurrence) || occurrence < 1) throw new TypeError(`${KILL_ENV} must be <point>:<occurrence>, got ${spec}`)
    this.#target = { point: spec.slice(0, at), occurrence }
  }

  static fromEnv(env: NodeJS.ProcessEnv): KillSwitch {
    return new KillSwitch(env[KILL_ENV], env[TRACE_ENV] === '1')
  }

  /** Reach the kill points `names` (one instant); dies here if one of them is the target. */
  hit(names: readonly string[], role: Role): void {
    const points = names.map((name) => {
      const count = (this.#counts.get(name) ?? 0) + 1
      this.#counts.set(name, count)
      return { name, count }
    })
    if (this.#trace) report({ type: 'trace', points: points.map((p) => `${p.name}:${p.count}`), role } satisfies TraceEntry & { type: 'trace' })
    const target = this.#target
    const fatal = target && points.find((p) => p.name === target.point && p.count === target.occurrence)
    if (fatal) {
      report({ type: 'killed', point: `${fatal.name}:${fatal.count}`, role })
      process.kill(process.pid, 'SIGKILL')
    }
  }
}

/** Write one JSON line to stdout synchronously, so it is out before a SIGKILL. */
export function report(value: unknown): void {
  writeSync(1, `${JSON.stringify(value)}\n`)
}

/**
 * A thin wrapper around the real store that delegates every method, reaching kill points around
 * the writes the runner makes: `after-create-run`, `before-write:<phase>` / `after-write:<phase>`
 * for every checkpoint phase a batch holds (the light phases of a phase log included) (and `intents` / `completions` for the effect entries
 * it carries), `after-start-effect`, `after-complete-effect` and `after-update-run`.
 */
export class KillingStore extends DelegatingStore {
  readonly #kill: KillSwitch

  constructor(inner: CheckpointStore, kill: KillSwitch) {
    super(inner)
    this.#kill = kill
  }

  override async createRun(input?: CreateRunInput): Promise<RunRecord> {
    const run = await this.inner.createRun(input)
    this.#kill.hit(['after-create-run'], roleOf(run.runId))
    return run
  }

  override async updateRun(runId: string, patch: UpdateRunInput): Promise<RunRecord> {
    const run = await this.inner.updateRun(runId, patch)
    this.#kill.hit(['after-update-run'], roleOf(runId))
    return run
  }

  override save<P>(record: CheckpointInput<P>): Promise<string> {
    return this.#around({ runId: record.runId, checkpoints: [record] }, () => this.inner.save(record))
  }

  override write(batch: WriteBatch): Promise<string[]> {
    return this.#around(batch, () => this.inner.write(batch))
  }

  override async startEffect(runId: string, callId: string): Promise<EffectRecord> {
    const effect = await this.inner.startEffect(runId, callId)
    this.#kill.hit(['after-start-effect'], roleOf(runId))
    return effect
  }

  override async completeEffect(completion: EffectCompletion): Promise<EffectCompletionResult> {
    const result = await this.inner.completeEffect(completion)
    this.#kill.hit(['after-complete-effect'], roleOf(completion.runId))
    return result
  }

  /** The run's lease protocol, reaching `after-create-run` when taking a lease created the run. */
  override get leases(): RunLeases | undefined {
    const leases = this.inner.leases
    if (!leases) return undefined
    const kill = this.#kill
    return new Proxy(leases, {
      get(target, property) {
        const value = Reflect.get(target, property) as unknown
        if (property !== 'acquire') return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
        return async (input: AcquireRunInput) => {
          const outcome = await target.acquire(input)
          if (outcome.outcome === 'acquired' && outcome.created) kill.hit(['after-create-run'], roleOf(input.runId))
          return outcome
        }
      },
    })
  }

  async #around<T>(batch: WriteBatch, write: () => Promise<T>): Promise<T> {
    const parts = unique([
      // Every phase a checkpoint stands for: the light ones in its phase log too.
      ...(batch.checkpoints ?? []).flatMap((c) => phasesOf(c, '').map((p) => p.phase)),
      ...((batch.intents ?? []).length > 0 ? ['intents'] : []),
      ...((batch.completions ?? []).length > 0 ? ['completions'] : []),
    ])
    const role = roleOf(batch.runId)
    this.#kill.hit(parts.map((part) => `before-write:${part}`), role)
    const written = await write()
    const effects = [
      ...((batch.starts ?? []).length > 0 ? ['after-start-effect'] : []),
      ...((batch.completions ?? []).length > 0 && (batch.checkpoints ?? []).length === 0 ? ['after-complete-effect'] : []),
      ...(batch.run !== undefined ? ['after-update-run'] : []),
    ]
    this.#kill.hit([...parts.map((part) => `after-write:${part}`), ...effects], role)
    return written
  }
}

/** Child runs of a subagent have ids `<parent run>:<tool use id>`. */
function roleOf(runId: string): Role {
  return runId.includes(':') ? 'child' : 'parent'
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)]
}
