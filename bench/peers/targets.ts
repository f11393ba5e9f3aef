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
/** Most added time per step, async durability, on SQLite. */
export const STEP_LIMIT_US = 100
/** Cairn's added time per step at most 1/this of LangGraph's delta channel's. */
export const STEP_VS_DELTA = 4
/** CairnSaver's added time per step at most this many times the delta channel's, on the same backend. */
export const SAVER_VS_DELTA = 2
/** Most bytes stored per byte of the final message list (JSON). */
export const STORAGE_LIMIT = 2

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

  const bytesLine = (r: Ratio, v: number) =>
    `${labelOf(r.peer)} ${formatBytes(row(r.peer, r.n)?.bytes ?? null)} ÷ ${labelOf(r.cairn)} ${formatBytes(row(r.cairn, r.n)?.bytes ?? null)} = ${formatRatio(v)}`
  const usLine = (r: Ratio, v: number) =>
    `${labelOf(r.peer)} ${us(row(r.peer, r.n)?.addedPerStepUs)} ÷ ${labelOf(r.cairn)} ${us(row(r.cairn, r.n)?.addedPerStepUs)} = ${formatRatio(v)}`
  const msLine = (field: 'loadMs' | 'historyMs' | 'headersMs', peerField: 'loadMs' | 'historyMs') => (r: Ratio, v: number) =>
    `${labelOf(r.peer)} ${ms(row(r.peer, r.n)?.[peerField])}${r.lowerBound && peerField === 'historyMs' ? ' (stopped at the time box: a lower bound)' : ''} ÷ ${labelOf(r.cairn)} ${ms(row(r.cairn, r.n)?.[field])} = ${formatRatio(v)}`

  const checks: TargetCheck[] = []
  const asyncPairs = (peer: string) =>
    [
      ['cairn-sqlite-async', `langgraph-sqlite${peer}`],
      ['cairn-postgres-async', `langgraph-postgres${peer}`],
    ] as const

  const limit = stepLimit(rows, sizes, 'cairn-sqlite-async', STEP_LIMIT_US)
  checks.push({
    id: 'step-time-sqlite',
    target: `Added time per step (async durability) on SQLite at most ${STEP_LIMIT_US} µs at every n`,
    ...limit,
    profile: { system: 'cairn-sqlite-async', n: STORAGE_N, section: 'run' },
  })

  const t3 = pairCheck(asyncPairs('-delta'), sizes, (r) => r.addedPerStep, STEP_VS_DELTA, usLine)
  checks.push({
    id: 'step-time-vs-delta',
    target: `Added time per step (async durability) at most 1/${STEP_VS_DELTA} of LangGraph-with-delta’s, on SQLite and Postgres`,
    ...t3,
    profile: { system: 'cairn-sqlite-async', n: STORAGE_N, section: 'run' },
  })

  const saver = saverCheck(rows, sizes)
  checks.push({
    id: 'saver-vs-delta',
    target: `LangGraph on CairnSaver: added time per step at most ${SAVER_VS_DELTA}× LangGraph’s delta channel’s on the same backend (SqliteSaver, PostgresSaver), at every n`,
    ...saver,
    profile: { system: 'langgraph-cairn-sqlite', n: STORAGE_N, section: 'run' },
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

  const stored = storageCheck(rows, sizes)
  checks.push({ id: 'storage-vs-messages', target: `Bytes stored at most ${STORAGE_LIMIT}× the final message list, on SQLite and Postgres, at every n`, ...stored, profile: null })

  const t6 = pairCheck(
    [
      ['cairn-postgres-async', 'dbos'],
      ['cairn-postgres-sync', 'dbos'],
    ],
    sizes,
    (r) => r.bytes,
    1,
    bytesLine,
  )
  checks.push({ id: 'storage-vs-dbos', target: 'On Postgres, bytes stored no more than DBOS’s', ...t6, profile: null })

  const resumePairs = [['cairn-memory-async', 'langgraph-memory'], ...asyncPairs(''), ...asyncPairs('-delta')] as const
  const t7 = pairCheck(resumePairs, sizes, (r) => r.load, 10, msLine('loadMs', 'loadMs'))
  checks.push({ id: 'cold-resume', target: 'Cold resume at least 10× faster than every LangGraph saver’s getState, at every n', ...t7, profile: { system: 'cairn-sqlite-async', n: STORAGE_N, section: 'load' } })

  const t8 = pairCheck(
    [
      ['cairn-sqlite-async', 'dbos'],
      ['cairn-postgres-async', 'dbos'],
    ],
    sizes,
    (r) => r.history,
    1,
    msLine('historyMs', 'historyMs'),
  )
  checks.push({ id: 'history-vs-dbos', target: 'Full history (runner.history) no slower than DBOS’s listWorkflowSteps', ...t8, profile: { system: 'cairn-sqlite-async', n: STORAGE_N, section: 'history' } })

  const t9 = pairCheck(resumePairs, sizes, (r) => r.listing, 100, msLine('headersMs', 'historyMs'), true)
  checks.push({ id: 'history-listing', target: 'Listing a run’s whole checkpoint history (listCheckpoints) at least 100× faster than getStateHistory', ...t9, profile: null })
  return checks
}

/** Every n: `system`'s added time per step at most `limitUs`. */
function stepLimit(rows: readonly Row[], sizes: readonly number[], system: string, limitUs: number): { pass: boolean | null; evidence: string[] } {
  const evidence: string[] = []
  let pass: boolean | null = true
  for (const n of sizes) {
    const added = rows.find((r) => r.system === system && r.n === n)?.addedPerStepUs ?? null
    if (added === null) {
      evidence.push(`n=${n}: ${labelOf(system)}: not measured`)
      pass = pass === false ? false : null
      continue
    }
    const ok = added <= limitUs
    if (!ok) pass = false
    evidence.push(`n=${n}: ${labelOf(system)} ${us(added)} ${ok ? '≤' : '>'} ${limitUs} µs/step ${ok ? '✓' : '✗'}`)
  }
  return { pass, evidence }
}

/** Every Cairn SQLite and Postgres row: bytes stored (writer open) over the final message list's JSON. */
function storageCheck(rows: readonly Row[], sizes: readonly number[]): { pass: boolean | null; evidence: string[] } {
  const evidence: string[] = []
  let pass: boolean | null = true
  for (const system of ['cairn-sqlite-async', 'cairn-sqlite-sync', 'cairn-postgres-async', 'cairn-postgres-sync']) {
    for (const n of sizes) {
      const row = rows.find((r) => r.system === system && r.n === n)
      if (!row || row.bytes === null || row.messageBytes === null) {
        evidence.push(`n=${n}: ${labelOf(system)}: not measured`)
        pass = pass === false ? false : null
        continue
      }
      const ratio = row.bytes / row.messageBytes
      const ok = ratio <= STORAGE_LIMIT
      if (!ok) pass = false
      evidence.push(`n=${n}: ${labelOf(system)} ${formatBytes(row.bytes)} ÷ message list ${formatBytes(row.messageBytes)} = ${formatRatio(ratio)} ${ok ? '✓' : '✗'}`)
    }
  }
  return { pass, evidence }
}

/**
 * CairnSaver against the delta channel on each backend, by added wall time per step; each line also
 * gives the added CPU time and the SQLite `synchronous` level each side committed at. A delta row no
 * slower than its own no-checkpointer loop leaves the pair undetermined (its added time is noise).
 */
function saverCheck(rows: readonly Row[], sizes: readonly number[]): { pass: boolean | null; evidence: string[] } {
  const evidence: string[] = []
  let failed = false
  let undetermined = false
  const pairs = [
    ['langgraph-cairn-sqlite', 'langgraph-sqlite-delta'],
    ['langgraph-cairn-postgres', 'langgraph-postgres-delta'],
  ] as const
  for (const [cairn, delta] of pairs) {
    for (const n of sizes) {
      const c = rows.find((r) => r.system === cairn && r.n === n)
      const d = rows.find((r) => r.system === delta && r.n === n)
      const level = (r: Row | undefined) => (r?.synchronous ? ` [synchronous = ${r.synchronous}]` : '')
      const cpu = `; CPU ${us(c?.addedCpuPerStepUs)} vs ${us(d?.addedCpuPerStepUs)}${c?.addedCpuPerStepUs && d?.addedCpuPerStepUs && d.addedCpuPerStepUs > 0 ? ` = ${formatRatio(c.addedCpuPerStepUs / d.addedCpuPerStepUs)}` : ''}`
      if (!c || !d || c.addedPerStepUs === null || d.addedPerStepUs === null) {
        evidence.push(`n=${n}: ${labelOf(cairn)} vs ${labelOf(delta)}: not measured`)
        undetermined = true
        continue
      }
      if (d.addedPerStepUs <= 0) {
        evidence.push(`n=${n}: ${labelOf(delta)}${level(d)} ran no slower than its no-checkpointer loop (${us(d.addedPerStepUs)}): no ratio; ${labelOf(cairn)}${level(c)} ${us(c.addedPerStepUs)}${cpu}`)
        undetermined = true
        continue
      }
      const ratio = Math.max(0, c.addedPerStepUs) / d.addedPerStepUs
      const ok = ratio <= SAVER_VS_DELTA
      if (!ok) failed = true
      evidence.push(`n=${n}: ${labelOf(cairn)}${level(c)} ${us(c.addedPerStepUs)} ÷ ${labelOf(delta)}${level(d)} ${us(d.addedPerStepUs)} = ${formatRatio(ratio)} ${ok ? '✓' : '✗'}${cpu}`)
    }
  }
  return { pass: failed ? false : undetermined ? null : true, evidence }
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
