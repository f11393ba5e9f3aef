/** What the orchestrator asks of a child process, and what the child reports back. */

/** `run`: warm up, run the workload once, timed; `resume`: in a fresh process, load the run's latest state and list its history. */
export type Phase = 'run' | 'resume'

/** The arguments of one child process, passed as JSON in argv. */
export interface ChildRequest {
  system: string
  n: number
  phase: Phase
  /** A temp directory owned by this (system, n): files of file-backed stores go here. */
  location: string
  /** The Postgres schema of this (system, n), for Postgres-backed systems. */
  schema: string
  /** Where the child writes its {@link ChildReport} as JSON. */
  resultFile: string
  /**
   * False to leave out the full-record history listing: Cairn's `runner.history` is one call that
   * cannot be stopped at the time box, so it is not started when it passed the box at a smaller n.
   */
  fullHistory?: boolean
}

/** Figures of one timed run. */
export interface RunFigures {
  /** Wall time of the run itself: the store or saver is open and warm, the process warmed up. */
  wallMs: number
  /** Mean cycle time over the first and the last tenth of the run's cycles. */
  firstCyclesMs: number
  lastCyclesMs: number
  /** Bytes stored with the writer still open (SQLite: db + -wal + -shm; Postgres: table sizes), and after close. Null in memory. */
  bytesOpen: number | null
  bytesClosed: number | null
  /** How many checkpoints (or DBOS steps) the run left. */
  checkpoints: number | null
  /** CPU time (user + system) of this process during the run: the rest of the wall time was waiting. */
  cpuMs: number
  /** Where the bytes are, by table or index (SQLite `dbstat`), where measured. */
  storage?: Record<string, number>
  /** Time spent inside each store method during the run (Cairn only): calls and total ms. */
  storeCalls?: Record<string, { calls: number; ms: number }>
  /** The SQLite `synchronous` level the run's connection committed at (`NORMAL`, `FULL`), read from it after the run: SQLite rows only. */
  synchronous?: string
}

/** Figures of loading a finished run back. */
export interface ResumeFigures {
  /** Open the store or saver and load the run's latest state (its full message list). */
  loadMs: number
  /** The part of `loadMs` spent opening (DBOS: `DBOS.launch()`), where it can be told apart. */
  openMs?: number
  /** Messages in the loaded state. */
  messages: number
  /** UTF-8 bytes of the loaded message list as JSON (Cairn only): what the storage targets are stated against. */
  messageBytes?: number
  /** Listing the run's whole checkpoint history, full records (Cairn `runner.history`, LangGraph `getStateHistory`, DBOS `listWorkflowSteps`). */
  historyMs: number | null
  historyEntries: number | null
  /** False when the listing was stopped at the time box (`historyEntries` is then how far it got). */
  historyComplete: boolean
  /** True when the full-record listing was not started (it passed the time box at a smaller n). */
  historySkipped?: boolean
  /** Listing checkpoint headers only (Cairn `store.listCheckpoints`), where the system has such a call. */
  headersMs: number | null
  /** True when measured in the process that ran the workload (an in-memory store has nothing to reopen). */
  inProcess: boolean
}

/** What a child writes. */
export interface ChildReport {
  system: string
  n: number
  phase: Phase
  run?: RunFigures
  resume?: ResumeFigures
  /** `process.resourceUsage().maxRSS`, in bytes. */
  maxRssBytes: number
  /** The measured sections, for cutting a CPU profile. */
  sections: Partial<Record<Section, [number, number]>>
}

/** What a system module provides to the child. */
export interface SystemDriver {
  run(request: ChildRequest): Promise<{ run: RunFigures; resume?: ResumeFigures }>
  resume?(request: ChildRequest): Promise<ResumeFigures>
}

/** Mean of the first and last tenth (at least one cycle each) of `cycles`. */
export function cycleEnds(cycles: readonly number[]): { firstCyclesMs: number; lastCyclesMs: number } {
  const k = Math.max(1, Math.floor(cycles.length / 10))
  const mean = (xs: readonly number[]) => (xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length)
  return { firstCyclesMs: mean(cycles.slice(0, k)), lastCyclesMs: mean(cycles.slice(-k)) }
}

/**
 * Milliseconds `fn` takes, with its result. With a `section` name the interval is also kept in
 * {@link SECTIONS} (monotonic microseconds), so a CPU profile of the child can be cut to it.
 */
export async function timedMs<T>(fn: () => Promise<T>, section?: Section): Promise<{ ms: number; value: T }> {
  const start = process.hrtime.bigint()
  const value = await fn()
  const end = process.hrtime.bigint()
  if (section) SECTIONS[section] = [Number(start / 1000n), Number(end / 1000n)]
  return { ms: Number(end - start) / 1e6, value }
}

/** The measured sections of a child: the timed run, the cold load, the history listing. */
export type Section = 'run' | 'load' | 'history'

/** Where each measured section of this process started and ended, in monotonic microseconds. */
export const SECTIONS: Partial<Record<Section, [number, number]>> = {}

/** The run (thread, workflow) id every system uses for its timed run. */
export const RUN_ID = 'bench-run'
/** Cycles of the untimed warm-up run each child does first. */
export const WARMUP_CYCLES = 20

/** Longest a history listing may run before it is stopped and reported as a lower bound. */
export const HISTORY_BUDGET_MS = Number(process.env.PEERS_HISTORY_BUDGET_MS ?? 10_000)

/** Milliseconds of CPU (user + system) this process used since `since` (a `process.cpuUsage()` reading). */
export function cpuMsSince(since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since)
  return (used.user + used.system) / 1000
}
