import { setTimeout as sleep } from 'node:timers/promises'
import { StoreError } from '../core/errors.js'
import type { CheckpointInput, EffectCompletion, EffectIntent, RunStore, UpdateRunInput } from '../store/checkpoint-store.js'
import type { Fence } from '../store/engine/lease-engine.js'
import { asLightPhases, withLogAfter, withLogBefore, type PhaseLogEntry } from './phase-log.js'
import { RUNNER_KIND, RUNNER_SCHEMA_VERSION } from './phases.js'

/** What a durable commit carries besides the staged records: effect entries and a change to the run. */
export interface CommitExtras {
  intents?: readonly EffectIntent[]
  completions?: readonly EffectCompletion[]
  run?: UpdateRunInput
}

/** Most checkpoints the async writer lets wait for a turn of the event loop before it writes them anyway. */
const MAX_LAG_RECORDS = 32
/**
 * A loop that never waits on I/O is not stopped for a write of what it staged until it has run
 * this many times as long as the last write took: a store whose commit waits for the disk (a
 * SQLite file syncs every commit) then takes at most a tenth of such a loop's time, and what a
 * crash can lose stays about ten commits' time of work (tens of milliseconds). A commit's cost
 * is mostly fixed (the sync), so fewer, larger commits cost the loop less: at a fifth, the
 * runner's async SQLite steps took about 10 % longer (bench/peers workload, n = 500).
 */
const LAG_PER_COMMIT_TIME = 9
/**
 * Coalescing keeps one queued runtime snapshot in this many (async): a reader of the run (a
 * page of the inspector, a diff, a resume from an older checkpoint) reads a list from the
 * snapshot before what it wants to the one after, so snapshots a few steps apart keep what it
 * reads small however many checkpoints one write holds (up to the queue's size).
 */
const KEEP_SNAPSHOT_EVERY = 32

/** How checkpoints reach the store. */
export interface WriterOptions {
  /**
   * `async` (default): checkpoints are written behind the loop by one background writer, in
   * order; `sync`: they are written at the durability points (before tools run, after the tool
   * batch, at the end), and the loop waits for each.
   */
  durability: 'async' | 'sync'
  /** Most checkpoints waiting to be written before the loop waits for the writer (async). */
  queueMaxSize: number
  /** Longest wait for the final flush before a result is returned. */
  flushTimeoutMs: number
  /** Drop the runtime snapshot of a waiting checkpoint when a newer one arrives (async). */
  coalesceRuntimeState: boolean
}

/**
 * The one writer of a run's checkpoints. Records are staged in order; `commit` makes everything
 * staged durable together with effect intents or outcomes, in one store commit. In async mode a
 * background loop writes what is staged as it goes. A failed write is never swallowed: the
 * error is kept and thrown by every later call, so the run fails instead of claiming durability.
 */
export class CheckpointWriter {
  /** How many durable commits were made. */
  commits = 0
  readonly #store: RunStore
  readonly #runId: string
  readonly #options: WriterOptions
  #queue: CheckpointInput[] = []
  /**
   * Checkpoints staged since the queue was last taken for a write: what the queue's bounds count.
   * A superseded snapshot folded into the phase log of a later one leaves the queue but counts.
   */
  #waiting = 0
  /** Light phases noted since the last staged checkpoint: the next one carries them. */
  #light: PhaseLogEntry[] = []
  #completions: EffectCompletion[] = []
  #intents: EffectIntent[] = []
  #chain: Promise<void> = Promise.resolve()
  #inFlight = false
  #kickScheduled = false
  /** Where the queued checkpoint with a runtime snapshot is (-1: none), for coalescing. */
  #runtimeAt = -1
  /** Runtime snapshots staged since the newest one that is kept (written, or queued and not coalesced). */
  #sinceKept = 0
  /**
   * How long the last background write held the loop up, and when it ended
   * (`performance.now()`). A write the loop went on beside (it staged checkpoints meanwhile: a
   * server, a file store's syncs) held nothing up, nor did one the loop waited for anyway (a commit,
   * a full queue).
   */
  #lastWriteMs = 0
  #lastWriteEnd = 0
  /** Checkpoints staged while the current write was in flight. */
  #stagedInFlight = 0
  /** The loop waits for the writer (a full queue). */
  #loopWaits = 0
  #failure: Error | undefined
  readonly #onCommit: ((checkpoints: readonly CheckpointInput[], ids: readonly string[]) => void) | undefined
  readonly #fence: Fence | undefined
  /** The process writing, as a phase log names it. */
  readonly #by: string

  /**
   * `onCommit` is told of the checkpoints of every durable commit, with their ids; `fence` is the
   * lease every write carries (the execution's hold on the run); `by` names the process writing
   * in the phase log of a superseded snapshot.
   */
  constructor(
    store: RunStore,
    runId: string,
    options: WriterOptions,
    hooks: { onCommit?: (checkpoints: readonly CheckpointInput[], ids: readonly string[]) => void; fence?: Fence; by: string },
  ) {
    this.#store = store
    this.#runId = runId
    this.#options = options
    this.#onCommit = hooks.onCommit
    this.#fence = hooks.fence
    this.#by = hooks.by
  }

  /**
   * Note a light phase (no runtime snapshot): it is not a stored checkpoint of its own but an
   * entry of the phase log of the next checkpoint staged, or, when a commit comes first, of the
   * last one staged (or, with none waiting, of one written for it), so it is durable no later
   * than it would be as a checkpoint of its own.
   */
  note(entry: PhaseLogEntry): void {
    this.#throwIfFailed()
    this.#light.push(entry)
  }

  /** Queue a checkpoint. In async mode it is written soon; a full queue makes this wait. */
  async stage(staged: CheckpointInput): Promise<void> {
    this.#throwIfFailed()
    let record = withLogBefore(staged, this.#light.splice(0))
    if (this.#options.coalesceRuntimeState && this.#options.durability === 'async' && hasRuntime(record)) {
      // The newest snapshot is kept: an older one queued is superseded when this one comes, but
      // for one in KEEP_SNAPSHOT_EVERY. A superseded one is not written as a row of its own: its
      // phase, with its payload but not its snapshot, goes first in the phase log of the record
      // queued after it (this one, or one staged between them), like a light phase.
      const at = this.#runtimeAt
      const older = this.#queue[at]
      if (older !== undefined && hasRuntime(older)) {
        if (this.#sinceKept >= KEEP_SNAPSHOT_EVERY) {
          this.#sinceKept = 1
        } else {
          const phases = asLightPhases(older, this.#by)
          this.#queue.splice(at, 1)
          if (at < this.#queue.length) this.#queue[at] = withLogBefore(this.#queue[at]!, phases)
          else record = withLogBefore(record, phases)
        }
      }
      this.#runtimeAt = this.#queue.length
      this.#sinceKept++
    }
    this.#queue.push(record)
    this.#waiting++
    if (this.#inFlight) this.#stagedInFlight++
    if (this.#options.durability === 'async') {
      if (this.#waiting >= this.#options.queueMaxSize) {
        // Full: the loop waits for the write in flight, or for one of what it staged.
        if (!this.#inFlight) void this.#enqueue({})
        this.#loopWaits++
        try {
          await this.#chain
        } finally {
          this.#loopWaits--
        }
      }
      // A loop that never waits on I/O (a scripted model) never lets the scheduled write start,
      // nor the reply of a write made off the loop's thread arrive: bound how far the store may
      // lag behind it, and past that bound let one turn of the event loop go by while a write is
      // in flight (the loop goes on at once whether or not the write is done).
      if (this.#waiting >= MAX_LAG_RECORDS) {
        if (this.#inFlight && this.#waiting % MAX_LAG_RECORDS === 0) await turnOfTheLoop()
        if (!this.#inFlight && performance.now() - this.#lastWriteEnd >= LAG_PER_COMMIT_TIME * this.#lastWriteMs) {
          void this.#enqueue({}, true)
          return
        }
      }
      this.#kick()
    }
  }

  /** Queue effect intents to go with the next write (only for calls that are safe to run before it lands). */
  stageIntents(intents: readonly EffectIntent[]): void {
    this.#throwIfFailed()
    this.#intents.push(...intents)
    if (this.#options.durability === 'async' && intents.length > 0) this.#kick()
  }

  /** Queue effect outcomes to go with the next write. */
  stageCompletions(completions: readonly EffectCompletion[]): void {
    this.#throwIfFailed()
    this.#completions.push(...completions)
    if (this.#options.durability === 'async' && completions.length > 0) this.#kick()
  }

  /** Write everything staged, with `extra` effect entries, in one durable commit, and wait for it. */
  async commit(extra: CommitExtras = {}): Promise<void> {
    this.#throwIfFailed()
    this.#settleLight()
    const done = this.#enqueue(extra)
    await done
    this.#throwIfFailed()
  }

  /** `commit`, bounded by `flushTimeoutMs`: a flush that cannot finish in time is an error. */
  async flush(extra: CommitExtras = {}): Promise<void> {
    const timeout = sleep(this.#options.flushTimeoutMs, 'timeout' as const, { ref: false })
    const outcome = await Promise.race([this.commit(extra).then(() => 'done' as const), timeout])
    if (outcome === 'timeout') {
      throw new StoreError(`run ${this.#runId}: checkpoints could not be flushed within ${this.#options.flushTimeoutMs} ms`, { runId: this.#runId })
    }
  }

  /**
   * Light phases noted since the last staged checkpoint go with this commit: in the `after` log of
   * the last checkpoint waiting to be written, or, with none waiting, in a checkpoint of their
   * own (the newest one's phase and payload, the others in its `before` log).
   */
  #settleLight(): void {
    if (this.#light.length === 0) return
    const entries = this.#light.splice(0)
    const last = this.#queue.length - 1
    if (last >= 0) {
      this.#queue[last] = withLogAfter(this.#queue[last]!, entries)
      return
    }
    const own = entries.pop()!
    const record: CheckpointInput = {
      runId: this.#runId,
      kind: RUNNER_KIND,
      phase: own.phase,
      schemaVersion: RUNNER_SCHEMA_VERSION,
      createdAt: own.at,
      metadata: { step: own.step, snapshot: false },
      payload: own.payload,
    }
    this.#queue.push(withLogBefore(record, entries))
    this.#waiting++
  }

  #kick(): void {
    if (this.#inFlight || this.#kickScheduled) return
    // Start the background write on the next turn, so the records staged in this turn (and a
    // synchronous driver's commit) go together in one commit instead of one each.
    this.#kickScheduled = true
    setImmediate(() => {
      this.#kickScheduled = false
      void this.#enqueue({}, true)
    })
  }

  /** Chain a write of everything staged; `background`: one the loop does not wait for. */
  #enqueue(extra: CommitExtras, background = false): Promise<void> {
    const next = this.#chain.then(async () => {
      if (this.#failure) return
      const checkpoints = this.#queue
      const completions = [...this.#completions, ...(extra.completions ?? [])]
      const intents = [...this.#intents, ...(extra.intents ?? [])]
      if (checkpoints.length === 0 && completions.length === 0 && intents.length === 0 && extra.run === undefined) return
      this.#queue = []
      this.#waiting = 0
      // The newest snapshot queued is written as it is: the count starts again from it.
      if (this.#runtimeAt >= 0) this.#sinceKept = 0
      this.#runtimeAt = -1
      this.#completions = []
      this.#intents = []
      this.#inFlight = true
      this.#stagedInFlight = 0
      const started = performance.now()
      try {
        const ids = await this.#store.write({
          runId: this.#runId,
          checkpoints,
          intents,
          completions,
          ...(extra.run === undefined ? {} : { run: extra.run }),
          ...(this.#fence === undefined ? {} : { fence: this.#fence }),
          durability: this.#options.durability,
        })
        this.commits++
        if (checkpoints.length > 0) this.#onCommit?.(checkpoints, ids)
      } catch (err) {
        this.#failure =
          err instanceof Error ? err : new StoreError(`run ${this.#runId}: a checkpoint write failed: ${String(err)}`, { runId: this.#runId })
      } finally {
        this.#inFlight = false
        this.#lastWriteEnd = performance.now()
        this.#lastWriteMs = background && this.#stagedInFlight === 0 && this.#loopWaits === 0 ? this.#lastWriteEnd - started : 0
      }
      // Async: anything staged while this write was in flight goes next.
      if (this.#options.durability === 'async' && (this.#queue.length > 0 || this.#completions.length > 0 || this.#intents.length > 0)) this.#kick()
    })
    this.#chain = next
    return next
  }

  #throwIfFailed(): void {
    if (this.#failure) {
      throw new StoreError(`run ${this.#runId}: a checkpoint write failed, so the run cannot continue durably: ${this.#failure.message}`, {
        runId: this.#runId,
        cause: this.#failure,
      })
    }
  }
}

/**
 * Let the event loop go round once, through its poll phase (where a thread's message or a
 * socket's data is taken in) whichever phase it is in now: two turns of `setImmediate`.
 */
async function turnOfTheLoop(): Promise<void> {
  await new Promise<void>((resolve) => setImmediate(resolve))
  await new Promise<void>((resolve) => setImmediate(resolve))
}

function hasRuntime(record: CheckpointInput): boolean {
  return record.metadata?.snapshot === true
}
