import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { InvalidArgumentError } from '../core/errors.js'
import type { Agent } from '../agent/agent.js'
import type { LeaseSubscription } from '../store/engine/lease-engine.js'
import type { ClaimedLease, RunLeases } from '../store/leases/run-leases.js'
import type { Workflow } from '../workflow/workflow.js'
import { sweep } from './time-sweep.js'
import { takeOverDeadLocalOwners } from './dead-owners.js'
import { RunExecution, type ExecutionContext } from './run-execution.js'
import type { WorkerEvent } from './worker-events.js'
import { requireLeases, type WorkerStore } from './worker-store.js'

/** How to build a {@link Worker}. */
export interface WorkerOptions {
  store: WorkerStore
  /** The agents this worker runs, by the name runs are enqueued under; each run gets a fresh agent. */
  agents?: Record<string, () => Agent | Promise<Agent>>
  /**
   * The workflows this worker runs, by name; each run gets a fresh workflow (build its executors
   * anew too). The run's input is the workflow's message; the outcome carries its outputs.
   */
  workflows?: Record<string, () => Workflow | Promise<Workflow>>
  /** Runs executed at once. Default 4. */
  concurrency?: number
  /** How long a claim or heartbeat holds a run; a worker silent for longer loses it. Default 30 s. */
  leaseMs?: number
  /** How often held leases are extended. Default a third of `leaseMs`. */
  heartbeatMs?: number
  /**
   * How many times a run may be recovered (its worker died, lost its lease, or failed to write
   * before finishing it) before it is failed with the reason recorded. Default 5.
   */
  maxRecoveryAttempts?: number
  /** Take runs only from these queues. Default: every queue. */
  queues?: readonly string[]
  /** The most runs of a queue held at once by all workers together (give every worker the same). */
  queueLimits?: Readonly<Record<string, number>>
  /** How often an idle worker looks for runs when the store cannot notify it. Default 1000 ms. */
  pollMs?: number
  /** This worker's id, the owner of its leases. Default `<host>:<pid>:<random>`. */
  id?: string
  /** The runner's durability (see `Runner`). Default `async`. */
  durability?: 'sync' | 'async'
  /**
   * How often the worker looks for sleeping runs to wake, deadlines passed, events arrived and
   * schedule ticks due (on a store with `waits`). Default 500 ms: a wake-up is at most this late
   * (plus the claim), and never early.
   */
  sweepMs?: number
  /** The clock of sleeps, deadlines, event timeouts and schedules. Default `Date.now`; tests pass their own. */
  clock?: { now(): number }
  /** Claims, releases, lost leases and errors, as they happen. */
  onEvent?: (event: WorkerEvent) => void
}

/** What `stop` takes. */
export interface StopOptions {
  /** How long running runs may take to finish before they are stopped and handed back. Default `leaseMs`. */
  timeoutMs?: number
}

interface Active {
  execution: RunExecution
  done: Promise<void>
}

/**
 * Executes enqueued runs, many workers to a store, on any number of machines. A worker claims
 * runs (at most `concurrency` at once), holds each under a lease it renews with heartbeats, and
 * drives it with the runner from its latest checkpoint; every write carries the lease's epoch,
 * so a worker whose lease was taken over (it froze, or was partitioned) has its writes rejected
 * and abandons the run. A run whose worker died is claimed again once its lease lapses and
 * continues from its latest checkpoint; no external recovery service is needed. A holder that
 * was a process on the same machine, now gone (its owner id is `<host>:<pid>:…`, as the default
 * worker id and a `Runner`'s are), is taken over at once instead, as a `Runner` does.
 * 
 *
 * @example
 * ```ts
 * const worker = new Worker({ store, agents: { research: () => buildAgent() }, concurrency: 4 })
 * await worker.start()
 * process.on('SIGTERM', () => void worker.stop())
 * ```
 */
export class Worker {
  readonly id: string
  readonly #store: WorkerStore
  readonly #leases: RunLeases
  readonly #options: Required<Pick<WorkerOptions, 'concurrency' | 'leaseMs' | 'heartbeatMs' | 'maxRecoveryAttempts' | 'pollMs' | 'durability'>>
  readonly #queues: WorkerOptions['queues']
  readonly #queueLimits: WorkerOptions['queueLimits']
  readonly #context: ExecutionContext
  readonly #active = new Map<string, Active>()
  #state: 'idle' | 'running' | 'stopping' | 'stopped' = 'idle'
  #loop: Promise<void> | undefined
  #stopped: Promise<void> | undefined
  #heartbeat: NodeJS.Timeout | undefined
  #beating = false
  #subscription: LeaseSubscription | undefined
  #waiter: (() => void) | undefined
  #woken = false
  readonly #sweepMs: number
  #lastSweep = 0

  constructor(options: WorkerOptions) {
    this.#leases = requireLeases(options?.store)
    this.#store = options.store
    const leaseMs = positive(options.leaseMs ?? 30_000, 'leaseMs')
    this.#options = {
      concurrency: positiveInteger(options.concurrency ?? 4, 'concurrency'),
      leaseMs,
      heartbeatMs: positive(options.heartbeatMs ?? Math.max(1, Math.floor(leaseMs / 3)), 'heartbeatMs'),
      maxRecoveryAttempts: nonNegativeInteger(options.maxRecoveryAttempts ?? 5, 'maxRecoveryAttempts'),
      pollMs: positive(options.pollMs ?? 1000, 'pollMs'),
      durability: options.durability ?? 'async',
    }
    if (this.#options.heartbeatMs >= leaseMs) {
      throw new InvalidArgumentError(`heartbeatMs (${this.#options.heartbeatMs}) must be shorter than leaseMs (${leaseMs}), or leases lapse between heartbeats`)
    }
    const agents = new Map(Object.entries(options.agents ?? {}))
    const workflows = new Map(Object.entries(options.workflows ?? {}))
    if (agents.size + workflows.size === 0) {
      throw new InvalidArgumentError('a worker needs at least one agent or workflow: { agents: { name: () => buildAgent() } }')
    }
    const both = [...agents.keys()].filter((name) => workflows.has(name))
    if (both.length > 0) throw new InvalidArgumentError(`'${both.join("', '")}' names both an agent and a workflow; runs are enqueued by name, so give each its own`)
    this.#sweepMs = positive(options.sweepMs ?? 500, 'sweepMs')
    this.#queues = options.queues
    this.#queueLimits = options.queueLimits
    this.id = options.id ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`
    const onEvent = options.onEvent
    this.#context = {
      store: this.#store,
      leases: this.#leases,
      owner: this.id,
      agents,
      workflows,
      maxRecoveryAttempts: this.#options.maxRecoveryAttempts,
      durability: this.#options.durability,
      clock: options.clock ?? { now: () => Date.now() },
      emit: (event) => {
        try {
          onEvent?.(event)
        } catch {
          // A listener's failure must not stop a run.
        }
      },
    }
  }

  /** Ids of the runs this worker is executing now. */
  get activeRuns(): string[] {
    return [...this.#active.keys()]
  }

  /** Start claiming and executing runs; resolves once the worker is listening. */
  async start(): Promise<void> {
    if (this.#state !== 'idle') throw new InvalidArgumentError(`worker ${this.id} was already started; create a new Worker to start again`)
    this.#state = 'running'
    this.#subscription = await this.#leases.subscribe(() => this.#wake()).catch((err: unknown) => {
      this.#context.emit({ type: 'error', error: err as Error })
      return undefined
    })
    this.#heartbeat = setInterval(() => void this.#beat(), this.#options.heartbeatMs)
    this.#loop = this.#claimLoop()
  }

  /**
   * Stop gracefully: claim nothing more, let running runs finish for up to `timeoutMs`, then stop
   * the rest at their last checkpoint and release them, so another worker resumes them at once.
   */
  stop(options: StopOptions = {}): Promise<void> {
    this.#stopped ??= this.#stop(options.timeoutMs ?? this.#options.leaseMs)
    return this.#stopped
  }

  async #stop(timeoutMs: number): Promise<void> {
    if (this.#state === 'idle') {
      this.#state = 'stopped'
      return
    }
    this.#state = 'stopping'
    this.#wake()
    await this.#loop
    const running = () => Promise.allSettled([...this.#active.values()].map((active) => active.done))
    let timer: NodeJS.Timeout | undefined
    const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)))
    const outcome = await Promise.race([running(), timedOut])
    clearTimeout(timer)
    if (outcome === 'timeout') {
      for (const { execution } of this.#active.values()) execution.suspend(`worker ${this.id} is stopping: run ${execution.runId} is handed back at its last checkpoint`)
      await running()
    }
    clearInterval(this.#heartbeat)
    await this.#subscription?.close().catch(() => undefined)
    this.#state = 'stopped'
  }

  /** Wake due runs and fire due schedule ticks (see `sweep`), at most once every `sweepMs`. */
  async #sweep(): Promise<void> {
    const waits = this.#store.waits
    if (!waits || Date.now() - this.#lastSweep < this.#sweepMs) return
    this.#lastSweep = Date.now()
    try {
      const { woken, scheduled } = await sweep({ waits, leases: this.#leases, now: () => this.#context.clock.now() })
      if (woken.length + scheduled.length > 0) this.#woken = true
    } catch (err) {
      this.#context.emit({ type: 'error', error: err as Error })
    }
  }

  async #claimLoop(): Promise<void> {
    let backoffMs = 50
    while (this.#state === 'running') {
      const free = this.#options.concurrency - this.#active.size
      if (free > 0) {
        const sentAt = Date.now()
        try {
          const claimed = await this.#leases.claim({
            owner: this.id,
            limit: free,
            leaseMs: this.#options.leaseMs,
            ...(this.#queues === undefined ? {} : { queues: this.#queues }),
            ...(this.#queueLimits === undefined ? {} : { queueLimits: this.#queueLimits }),
          })
          backoffMs = 50
          // Nothing more to claim: runs held by dead processes on this machine are taken over now.
          if (claimed.length < free && this.#state === 'running') claimed.push(...(await this.#takeOverDeadLocal(free - claimed.length)))
          // A full claim may have left more work: the next one comes as soon as a slot frees (a wake).
          for (const lease of claimed) {
            // stop() came while this claim was in flight: hand the run straight back.
            if (this.#state === 'running') this.#execute(lease, sentAt)
            else await this.#leases.release(lease.fence).catch(() => undefined)
          }
        } catch (err) {
          this.#context.emit({ type: 'error', error: err as Error })
          await this.#idle(backoffMs)
          backoffMs = Math.min(backoffMs * 2, this.#options.pollMs * 4)
          continue
        }
      }
      await this.#sweep()
      await this.#idle(this.#store.waits ? Math.min(this.#options.pollMs, this.#sweepMs) : this.#options.pollMs)
    }
  }

  /** Runs of dead local holders, looked for at most once a heartbeat interval (see `takeOverDeadLocalOwners`). */
  async #takeOverDeadLocal(limit: number): Promise<ClaimedLease[]> {
    if (Date.now() - this.#lastDeadScan < this.#options.heartbeatMs) return []
    this.#lastDeadScan = Date.now()
    const { leaseMs } = this.#options
    return takeOverDeadLocalOwners({ store: this.#store, leases: this.#leases, owner: this.id, leaseMs, limit, queues: this.#queues })
  }

  #lastDeadScan = 0

  #execute(claimed: ClaimedLease, sentAt: number): void {
    const runId = claimed.run.runId
    const execution = new RunExecution(this.#context, claimed, sentAt, this.#options.leaseMs)
    // This worker claimed the run again (its own lease had lapsed): the older execution is fenced out.
    const previous = this.#active.get(runId)
    previous?.execution.lose(`worker ${this.id} claimed run ${runId} again at epoch ${claimed.fence.epoch}`)
    const done = (previous ? previous.done.then(() => execution.execute()) : execution.execute()).finally(() => {
      if (this.#active.get(runId)?.execution === execution) this.#active.delete(runId)
      this.#wake()
    })
    this.#active.set(runId, { execution, done })
  }

  /** Extend every held lease; a run whose lease is gone (or unrenewed past its expiry) is abandoned. */
  async #beat(): Promise<void> {
    const now = Date.now()
    for (const { execution } of this.#active.values()) {
      if (now >= execution.confirmedUntil) {
        execution.lose(`worker ${this.id} could not renew its lease of run ${execution.runId} within ${this.#options.leaseMs} ms; another worker may take it over`)
      }
    }
    if (this.#beating || this.#active.size === 0) return
    this.#beating = true
    const sentAt = Date.now()
    const executions = [...this.#active.values()].map((active) => active.execution)
    try {
      const held = new Map(
        (
          await this.#leases.heartbeat({
            owner: this.id,
            leaseMs: this.#options.leaseMs,
            runs: executions.map((execution) => ({ runId: execution.runId, epoch: execution.epoch })),
          })
        ).map((row) => [row.runId, row]),
      )
      for (const execution of executions) {
        const row = held.get(execution.runId)
        if (!row) {
          execution.lose(`worker ${this.id} lost run ${execution.runId}: its lease at epoch ${execution.epoch} was taken over or the run was cancelled`)
          continue
        }
        execution.confirmedUntil = sentAt + this.#options.leaseMs
        if (row.cancelRequested) execution.cancel()
      }
    } catch (err) {
      this.#context.emit({ type: 'error', error: err as Error })
    } finally {
      this.#beating = false
    }
  }

  #wake(): void {
    const waiter = this.#waiter
    this.#waiter = undefined
    if (waiter) waiter()
    else this.#woken = true
  }

  /** Wait `ms`, or less when woken (a notification, a free slot, stop). */
  async #idle(ms: number): Promise<void> {
    if (this.#woken) {
      this.#woken = false
      return
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#waiter = undefined
        resolve()
      }, ms)
      this.#waiter = () => {
        clearTimeout(timer)
        resolve()
      }
    })
  }
}

function positive(value: number, name: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) throw new InvalidArgumentError(`${name} must be a positive number of ms, got ${String(value)}`)
  return value
}

function positiveInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new InvalidArgumentError(`${name} must be a positive integer, got ${String(value)}`)
  return value
}

function nonNegativeInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 0) throw new InvalidArgumentError(`${name} must be a non-negative integer, got ${String(value)}`)
  return value
}
