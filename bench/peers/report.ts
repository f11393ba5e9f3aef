/** The result and ratio tables, as aligned text for stdout and as Markdown for the doc. */
import { formatBytes, formatNumber, formatTable, type Column } from '../format-table.js'
import { labelOf, ratioOf, SHOWN_PAIRS, type Ratio, type Row } from './summarize.js'

/** A table as headers and cells, rendered either way. */
export interface Table {
  columns: Column[]
  rows: string[][]
}

/** The figures of every system at `n`. */
export function resultTable(rows: readonly Row[], n: number): Table {
  const columns: Column[] = [
    { header: 'system', align: 'left' },
    { header: 'wall ms' },
    { header: 'added µs/step' },
    { header: 'added CPU µs/step' },
    { header: 'cycle ms first→last' },
    { header: 'stored (open, with WAL)' },
    { header: 'stored (closed)' },
    { header: 'checkpoints' },
    { header: 'rows written per step' },
    { header: 'cold load ms' },
    { header: 'history ms (full states)' },
    { header: 'listing ms (headers)' },
    { header: 'peak RSS run' },
    { header: 'peak RSS load' },
  ]
  const cells = rows
    .filter((row) => row.n === n)
    .map((row) => {
      if (row.wallMs === null) return [row.label, row.note ?? 'n/a', ...Array<string>(columns.length - 2).fill('')]
      return [
        row.synchronous === null ? row.label : `${row.label} [synchronous = ${row.synchronous}]`,
        num(row.wallMs, 0),
        row.addedPerStepUs === null ? (row.backend === 'none' ? '(baseline)' : 'n/a') : num(row.addedPerStepUs, 0),
        row.addedCpuPerStepUs === null ? '' : num(row.addedCpuPerStepUs, 0),
        row.firstCyclesMs === null || row.lastCyclesMs === null ? 'n/a' : `${num(row.firstCyclesMs, 2)}→${num(row.lastCyclesMs, 2)}`,
        row.backend === 'none' ? '' : row.bytes === null ? 'in memory' : formatBytes(row.bytes),
        row.bytesClosed === null ? '' : formatBytes(row.bytesClosed),
        row.checkpoints === null ? '' : num(row.checkpoints, 0),
        row.checkpoints === null ? '' : num(row.checkpoints / (2 * row.n + 1), 3),
        row.loadMs === null ? '' : `${num(row.loadMs, 1)}${row.loadInProcess ? ' (in-process)' : ''}`,
        row.historySkipped ? 'not run' : row.historyMs === null ? '' : `${row.historyComplete ? '' : '> '}${num(row.historyMs, 0)}${row.historyComplete ? '' : ` (${row.historyEntries ?? 0} listed)`}`,
        row.headersMs === null ? '' : num(row.headersMs, 1),
        mib(row.rssBytes),
        mib(row.resumeRssBytes),
      ]
    })
  return { columns, rows: cells }
}

/** Cairn against its peers at `n`: how many times better Cairn is (peer ÷ Cairn; below 1× the peer wins). */
export function ratioTable(ratios: readonly Ratio[], n: number): Table {
  const columns: Column[] = [
    { header: 'Cairn', align: 'left' },
    { header: 'peer', align: 'left' },
    { header: 'added time/step' },
    { header: 'storage' },
    { header: 'cold load' },
    { header: 'history (full states)' },
    { header: 'listing (headers vs full)' },
    { header: 'peak RSS' },
  ]
  const cells = SHOWN_PAIRS.flatMap(([cairn, peer]) => {
    const r = ratioOf(ratios, cairn, peer, n)
    if (!r) return []
    const bound = (value: number | null) => (value === null ? 'n/a' : `${r.lowerBound ? '≥ ' : ''}${times(value)}`)
    return [[labelOf(cairn), labelOf(peer), times(r.addedPerStep), times(r.bytes), times(r.load), bound(r.history), bound(r.listing), times(r.rss)]]
  })
  return { columns, rows: cells }
}

/** Plain text, aligned. */
export function asText(table: Table): string {
  return formatTable(table.columns, table.rows)
}

/** A GitHub Markdown table. */
export function asMarkdown(table: Table): string {
  const escape = (cell: string) => cell.replace(/\|/g, '\\|')
  const header = `| ${table.columns.map((c) => escape(c.header)).join(' | ')} |`
  const rule = `|${table.columns.map((c) => (c.align === 'left' ? ' :--- ' : ' ---: ')).join('|')}|`
  return [header, rule, ...table.rows.map((row) => `| ${row.map(escape).join(' | ')} |`)].join('\n')
}

function num(value: number, decimals: number): string {
  return formatNumber(value, decimals)
}

function mib(bytes: number | null): string {
  return bytes === null ? '' : `${(bytes / (1024 * 1024)).toFixed(0)} MiB`
}

function times(value: number | null): string {
  if (value === null) return 'n/a'
  return value >= 100 ? `${value.toFixed(0)}×` : value >= 10 ? `${value.toFixed(1)}×` : `${value.toFixed(2)}×`
}
