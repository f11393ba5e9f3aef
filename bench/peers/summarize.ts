/** Turn the measurements into table rows (each against its no-persistence loop) and Cairn-to-peer ratios. */
import type { Measurement } from './measure.js'
import type { ResumeFigures, RunFigures } from './protocol.js'
import { SYSTEMS, specOf, type Backend, type Family } from './systems.js'
import { stepsOf } from './workload.js'

/** One system at one n, as the tables show it. */
export interface Row {
  system: string
  label: string
  family: Family
  backend: Backend
  n: number
  /** Why a figure is missing: not measured (with the reason), or failed. */
  note: string | null
  wallMs: number | null
  baselineMs: number | null
  /** (wall − no-persistence wall) ÷ (2n + 1) steps, in microseconds. */
  addedPerStepUs: number | null
  /** The same over the run's CPU time (user + system): what others' work on a shared machine disturbs least. */
  addedCpuPerStepUs: number | null
  /** The SQLite `synchronous` level the run committed at, where read (LangGraph's SQLite rows). */
  synchronous: string | null
  firstCyclesMs: number | null
  lastCyclesMs: number | null
  cpuMs: number | null
  /** Bytes with the writer open (SQLite with -wal and -shm; Postgres table sizes), and after close. */
  bytes: number | null
  bytesClosed: number | null
  /** UTF-8 bytes of the run's final message list as JSON (Cairn rows). */
  messageBytes: number | null
  checkpoints: number | null
  loadMs: number | null
  loadOpenMs: number | null
  loadInProcess: boolean
  historyMs: number | null
  historyEntries: number | null
  historyComplete: boolean
  historySkipped: boolean
  headersMs: number | null
  rssBytes: number | null
  resumeRssBytes: number | null
  storage: RunFigures['storage'] | null
  storeCalls: RunFigures['storeCalls'] | null
}

/** Rows for every system and n, in table order; a missing baseline leaves added time null. */
export function rowsOf(measurements: readonly Measurement[], sizes: readonly number[]): Row[] {
  const find = (system: string, n: number) => measurements.find((m) => m.system === system && m.n === n)
  return sizes.flatMap((n) =>
    SYSTEMS.map((spec) => {
      const m = find(spec.id, n)
      const run = m?.run
      const baseline = spec.baseline ? find(spec.baseline, n)?.run : undefined
      const resume: ResumeFigures | undefined = m?.resume
      const added = run && baseline ? ((run.wallMs - baseline.wallMs) / stepsOf(n)) * 1000 : null
      const addedCpu = run && baseline ? ((run.cpuMs - baseline.cpuMs) / stepsOf(n)) * 1000 : null
      return {
        system: spec.id,
        label: spec.label,
        family: spec.family,
        backend: spec.backend,
        n,
        note: m?.skipped ?? (m?.failed ? `failed: ${m.failed}` : m ? null : 'not measured'),
        wallMs: run?.wallMs ?? null,
        baselineMs: baseline?.wallMs ?? null,
        addedPerStepUs: added,
        addedCpuPerStepUs: addedCpu,
        synchronous: run?.synchronous ?? null,
        firstCyclesMs: run?.firstCyclesMs ?? null,
        lastCyclesMs: run?.lastCyclesMs ?? null,
        cpuMs: run?.cpuMs ?? null,
        bytes: run?.bytesOpen ?? null,
        bytesClosed: run?.bytesClosed ?? null,
        messageBytes: resume?.messageBytes ?? null,
        checkpoints: run?.checkpoints ?? resume?.historyEntries ?? null,
        loadMs: resume?.loadMs ?? null,
        loadOpenMs: resume?.openMs ?? null,
        loadInProcess: resume?.inProcess ?? false,
        historyMs: resume?.historyMs ?? null,
        historyEntries: resume?.historyEntries ?? null,
        historyComplete: resume?.historyComplete ?? true,
        historySkipped: resume?.historySkipped === true,
        headersMs: resume?.headersMs ?? null,
        rssBytes: m?.runRssBytes ?? null,
        resumeRssBytes: m?.resumeRssBytes ?? null,
        storage: run?.storage ?? null,
        storeCalls: run?.storeCalls ?? null,
      }
    }),
  )
}

/** How many times better Cairn is than a peer on each figure: peer ÷ Cairn (above 1: Cairn wins). */
export interface Ratio {
  cairn: string
  peer: string
  n: number
  addedPerStep: number | null
  bytes: number | null
  load: number | null
  /** Peer's full-state history (`getStateHistory`) ÷ Cairn's full-record `runner.history`. */
  history: number | null
  /** Peer's history listing ÷ Cairn's header listing (`listCheckpoints`). */
  listing: number | null
  rss: number | null
  /** The peer's history listing hit the time box, so `history` and `listing` are lower bounds. */
  lowerBound: boolean
}

/** Every Cairn row against every peer row at the same n. */
export function ratiosOf(rows: readonly Row[]): Ratio[] {
  const cairn = rows.filter((r) => r.family === 'cairn' && r.backend !== 'none')
  const peers = rows.filter((r) => r.family !== 'cairn' && r.backend !== 'none')
  return cairn.flatMap((c) => peers.filter((p) => p.n === c.n).map((p) => ratio(c, p)))
}

/** The pairs the tables show: each Cairn store against the peers on the same kind of backend. */
export const SHOWN_PAIRS: readonly (readonly [string, string])[] = [
  ['cairn-memory-async', 'langgraph-memory'],
  ['cairn-sqlite-async', 'langgraph-sqlite'],
  ['cairn-sqlite-async', 'langgraph-sqlite-delta'],
  ['cairn-sqlite-sync', 'langgraph-sqlite'],
  ['cairn-sqlite-sync', 'langgraph-sqlite-delta'],
  ['cairn-file-async', 'langgraph-sqlite-delta'],
  ['cairn-postgres-async', 'langgraph-postgres'],
  ['cairn-postgres-async', 'langgraph-postgres-delta'],
  ['cairn-postgres-async', 'dbos'],
  ['cairn-postgres-sync', 'langgraph-postgres-delta'],
  ['cairn-postgres-sync', 'dbos'],
]

/** The ratio of `cairn` to `peer` at n, from `ratios`. */
export function ratioOf(ratios: readonly Ratio[], cairn: string, peer: string, n: number): Ratio | undefined {
  return ratios.find((r) => r.cairn === cairn && r.peer === peer && r.n === n)
}

function ratio(c: Row, p: Row): Ratio {
  const over = (peer: number | null, mine: number | null) => (peer === null || mine === null || mine <= 0 || peer <= 0 ? null : peer / mine)
  return {
    cairn: c.system,
    peer: p.system,
    n: c.n,
    addedPerStep: over(p.addedPerStepUs, c.addedPerStepUs),
    bytes: over(p.bytes, c.bytes),
    load: over(p.loadMs, c.loadMs),
    history: over(p.historyMs, c.historyMs),
    listing: over(p.historyMs, c.headersMs ?? c.historyMs),
    rss: over(p.rssBytes, c.rssBytes),
    lowerBound: !p.historyComplete,
  }
}

/** The label of a system id. */
export function labelOf(id: string): string {
  return specOf(id).label
}
