/** Cairn's performance targets, checked against the rows and ratios of this run. */
import { formatBytes, formatRatio } from '../format-table.js'
import { labelOf, ratioOf, type Ratio, type Row } from './summarize.js'

/** A profile to take when a target is missed: which system, n and measured section. */
export interface ProfileJob {
  system: string
  n: number
  section: 'run' | 'load' | 'history'
}

/** One target and how this run did on it. */
export interface TargetCheck {
  id: string
  target: string
  /** Null when the figures it needs were not measured. */
  pass: boolean | null
  /** The figures it was judged on, one line each. */
  evidence: string[]
  /** Where to look when it is missed. */
  profile: ProfileJob | null
}

/** The run length the storage targets are stated at. */
export const STORAGE_N = 500
/** "Does not grow with n": Cairn's added time per step at the largest n over that at this n, at most {@link GROWTH_LIMIT}. */
export const GROWTH_FROM_N = 200
export const GROWTH_LIMIT = 1.5

/** Check every target. */
export function checkTargets(rows: readonly Row[], ratios: readonly Ratio[], sizes: readonly number[]): TargetCheck[] {
  const row = (system: string, n: number) => rows.find((r) => r.system === system && r.n === n)
  /** Every pair at every n must reach `min`; a peer's time-boxed listing that falls short leaves it undetermined. */
  const pairCheck = (
    pairs: readonly (readonly [string, string])[],
    ns: readonly number[],
    pick: (r: Ratio) => number | null,
    min: number,
    show: (r: Ratio, v: number) => string,
    boxed = false,
  ) => {
    const evidence: string[] = []
    let failed = false
    let undetermined = false
    let measured = false
    for (const [cairn, peer] of pairs) {
      for (const n of ns) {
        const r = ratioOf(ratios, cairn, peer, n)
        const value = r ? pick(r) : null
        if (!r || value === null) {
          const noAdded = [cairn, peer].filter((id) => (row(id, n)?.addedPerStepUs ?? 1) <= 0).map(labelOf)
          evidence.push(
            noAdded.length > 0
              ? `n=${n}: ${labelOf(peer)} vs ${labelOf(cairn)}: no ratio: ${noAdded.join(' and ')} ran no slower than its no-persistence loop (added time within noise)`
              : `n=${n}: ${labelOf(peer)} vs ${labelOf(cairn)}: not measured`,
          )
          continue
        }
        measured = true
        const ok = value >= min
        if (!ok && boxed && r.lowerBound) undetermined = true
        else if (!ok) failed = true
        evidence.push(`n=${n}: ${show(r, value)} ${ok ? '✓' : '✗'}`)
      }
    }
    const pass: boolean | null = failed ? false : !measured || undetermined ? null : true
    return { pass, evidence }
  }

  const sqlitePairs = (peer: string) => [['cairn-sqlite-async', peer], ['cairn-sqlite-sync', peer]] as const
  const bytesLine = (r: Ratio, v: number) =>
    `${labelOf(r.peer)} ${formatBytes(row(r.peer, r.n)?.bytes ?? null)} ÷ ${labelOf(r.cairn)} ${formatBytes(row(r.cairn, r.n)?.bytes ?? null)} = ${formatRatio(v)}`
  const usLine = (r: Ratio, v: number) =>
    `${labelOf(r.peer)} ${us(row(r.peer, r.n)?.addedPerStepUs)} ÷ ${labelOf(r.cairn)} ${us(row(r.cairn, r.n)?.addedPerStepUs)} = ${formatRatio(v)}`
  const msLine = (field: 'loadMs' | 'historyMs' | 'headersMs', peerField: 'loadMs' | 'historyMs') => (r: Ratio, v: number) =>
    `${labelOf(r.peer)} ${ms(row(r.peer, r.n)?.[peerField])}${r.lowerBound && peerField === 'historyMs' ? ' (stopped at the time box: a lower bound)' : ''} ÷ ${labelOf(r.cairn)} ${ms(row(r.cairn, r.n)?.[field])} = ${formatRatio(v)}`

  const checks: TargetCheck[] = []

  const t1 = pairCheck(sqlitePairs('langgraph-sqlite'), [STORAGE_N], (r) => r.bytes, 300, bytesLine)
  checks.push({ id: 'storage-vs-sqlitesaver', target: `Storage at n = ${STORAGE_N} at least 300× smaller than LangGraph SqliteSaver`, ...t1, profile: null })

  const t2 = pairCheck(
    [...sqlitePairs('langgraph-sqlite-delta'), ['cairn-postgres-async', 'langgraph-postgres-delta']],
    [STORAGE_N],
    (r) => r.bytes,
    2,
    bytesLine,
  )
  checks.push({ id: 'storage-vs-delta', target: `Storage at n = ${STORAGE_N} at least 2× smaller than LangGraph with its delta channel`, ...t2, profile: null })

  const t3 = pairCheck(
    [
      ['cairn-sqlite-async', 'langgraph-sqlite-delta'],
      ['cairn-postgres-async', 'langgraph-postgres-delta'],
    ],
    sizes,
    (r) => r.addedPerStep,
    5,
    usLine,
  )
  checks.push({
    id: 'step-time-vs-delta',
    target: 'Added time per step (async durability) at most 1/5 of LangGraph-with-delta’s',
    ...t3,
    profile: { system: 'cairn-sqlite-async', n: STORAGE_N, section: 'run' },
  })

  const growth = growthCheck(rows, sizes)
  checks.push({
    id: 'step-time-flat',
    target: `Added time per step (async) does not grow with n (n = ${Math.max(...sizes)} at most ${GROWTH_LIMIT}× n = ${GROWTH_FROM_N})`,
    pass: growth.pass,
    evidence: growth.evidence,
    profile: { system: growth.worst ?? 'cairn-sqlite-async', n: Math.max(...sizes), section: 'run' },
  })

  const t5 = pairCheck([['cairn-postgres-async', 'dbos']], sizes, (r) => r.addedPerStep, 1 + Number.EPSILON, usLine)
  checks.push({ id: 'step-time-vs-dbos', target: 'On Postgres, added time per step (async) below DBOS’s', ...t5, profile: { system: 'cairn-postgres-async', n: STORAGE_N, section: 'run' } })

  const resumePairs = [
    ['cairn-sqlite-async', 'langgraph-sqlite'],
    ['cairn-sqlite-async', 'langgraph-sqlite-delta'],
    ['cairn-postgres-async', 'langgraph-postgres'],
    ['cairn-postgres-async', 'langgraph-postgres-delta'],
  ] as const
  const t6 = pairCheck(resumePairs, sizes, (r) => r.load, 10, msLine('loadMs', 'loadMs'))
  checks.push({ id: 'cold-resume', target: 'Cold resume at least 10× faster than LangGraph’s getState', ...t6, profile: { system: 'cairn-sqlite-async', n: STORAGE_N, section: 'load' } })

  const t7 = pairCheck(resumePairs, sizes, (r) => r.listing, 100, msLine('headersMs', 'historyMs'), true)
  checks.push({ id: 'history-listing', target: 'Listing a run’s whole checkpoint history (listCheckpoints) at least 100× faster than getStateHistory', ...t7, profile: null })

  const t7b = pairCheck(resumePairs, sizes, (r) => r.history, 100, msLine('historyMs', 'historyMs'), true)
  checks.push({
    id: 'history-full',
    target: 'The same with full records: runner.history at least 100× faster than getStateHistory (not a target; shown because getStateHistory returns full states)',
    ...t7b,
    profile: { system: 'cairn-sqlite-async', n: STORAGE_N, section: 'history' },
  })
  return checks
}

function growthCheck(rows: readonly Row[], sizes: readonly number[]): { pass: boolean | null; evidence: string[]; worst: string | null } {
  const top = Math.max(...sizes)
  const evidence: string[] = []
  let pass: boolean | null = true
  let worst: string | null = null
  let worstGrowth = GROWTH_LIMIT
  for (const system of ['cairn-memory-async', 'cairn-file-async', 'cairn-sqlite-async', 'cairn-postgres-async']) {
    const series = sizes.map((n) => rows.find((r) => r.system === system && r.n === n)?.addedPerStepUs ?? null)
    const from = rows.find((r) => r.system === system && r.n === GROWTH_FROM_N)?.addedPerStepUs ?? null
    const to = rows.find((r) => r.system === system && r.n === top)?.addedPerStepUs ?? null
    const shown = sizes.map((n, i) => `n=${n} ${us(series[i])}`).join(', ')
    if (from === null || to === null || from <= 0 || top <= GROWTH_FROM_N) {
      evidence.push(`${labelOf(system)}: ${shown}: not measured`)
      continue
    }
    const growth = to / from
    const ok = growth <= GROWTH_LIMIT
    if (!ok) pass = false
    if (growth > worstGrowth) [worst, worstGrowth] = [system, growth]
    evidence.push(`${labelOf(system)}: ${shown}; n=${top} ÷ n=${GROWTH_FROM_N} = ${formatRatio(growth)} ${ok ? '✓' : '✗'}`)
  }
  if (evidence.every((line) => line.endsWith('not measured'))) pass = null
  return { pass, evidence, worst }
}

function us(value: number | null | undefined): string {
  return value === null || value === undefined ? 'n/a' : `${value.toFixed(0)} µs/step`
}

function ms(value: number | null | undefined): string {
  return value === null || value === undefined ? 'n/a' : `${value < 10 ? value.toFixed(2) : value.toFixed(0)} ms`
}
