import { formatBytes, formatNumber, formatRatio, formatTable, type Column } from './format-table.js'
import type { SaveBreakdown } from './save-breakdown.js'
import { saveOverFloor, type FloorResult, type WorkloadResult } from './store-summary.js'

/** The main table: one row per backend and `n`, then the floor's rows. */
export function resultTable(results: readonly WorkloadResult[], floors: readonly FloorResult[]): string {
  const columns: Column[] = [
    { header: 'backend', align: 'left' },
    { header: 'n' },
    { header: 'save p50 µs' },
    { header: 'save p95 µs' },
    { header: 'vs floor' },
    { header: 'disk open' },
    { header: 'disk closed' },
    { header: 'open/msgs' },
    { header: 'closed/msgs' },
    { header: 'cold latest µs' },
    { header: 'list ms' },
    { header: 'msgs JSON' },
  ]
  const rows = results.map((r) => [
    r.backend,
    String(r.n),
    formatNumber(r.saveMedianUs),
    formatNumber(r.saveP95Us),
    formatRatio(saveOverFloor(r, floors)),
    formatBytes(r.bytesOpen),
    formatBytes(r.bytesClosed),
    formatRatio(r.bytesOpen === null ? null : r.bytesOpen / r.messagesBytes),
    formatRatio(r.bytesClosed === null ? null : r.bytesClosed / r.messagesBytes),
    formatNumber(r.coldLatestUs),
    formatNumber(r.listMs, 2),
    formatBytes(r.messagesBytes),
  ])
  const floorRows = floors.map((f) => [
    'floor',
    String(f.n),
    formatNumber(f.saveMedianUs),
    formatNumber(f.saveP95Us),
    formatRatio(1),
    formatBytes(f.bytesOpen),
    formatBytes(f.bytesClosed),
    formatRatio(f.bytesOpen / f.messagesBytes),
    formatRatio(f.bytesClosed / f.messagesBytes),
    '-',
    '-',
    formatBytes(f.messagesBytes),
  ])
  return formatTable(columns, [...rows, ...floorRows])
}

/** Where save time goes: the engine's commit against everything before it. */
export function breakdownTable(breakdowns: readonly SaveBreakdown[]): string {
  const columns: Column[] = [
    { header: 'backend', align: 'left' },
    { header: 'n' },
    { header: 'save p50 µs' },
    { header: 'commit p50 µs' },
    { header: 'outside commit p50 µs' },
    { header: 'outside share' },
  ]
  const rows = breakdowns.map((b) => [
    b.backend,
    String(b.n),
    formatNumber(b.saveMedianUs),
    formatNumber(b.commitMedianUs),
    formatNumber(b.outsideCommitMedianUs),
    `${((100 * b.outsideCommitMedianUs) / b.saveMedianUs).toFixed(0)}%`,
  ])
  return formatTable(columns, rows)
}
