/** One column of a text table: its header and which side its cells align to. */
export interface Column {
  header: string
  align?: 'left' | 'right'
}

/** Render rows of cells as an aligned plain-text table with a rule under the header. */
export function formatTable(columns: readonly Column[], rows: readonly (readonly string[])[]): string {
  const widths = columns.map((column, i) => Math.max(column.header.length, ...rows.map((row) => (row[i] ?? '').length)))
  const line = (cells: readonly string[]) =>
    columns
      .map((column, i) => {
        const cell = cells[i] ?? ''
        const width = widths[i] ?? 0
        return column.align === 'left' ? cell.padEnd(width) : cell.padStart(width)
      })
      .join('  ')
      .trimEnd()
  const header = line(columns.map((column) => column.header))
  const rule = widths.map((width) => '-'.repeat(width)).join('  ')
  return [header, rule, ...rows.map(line)].join('\n')
}

/** Bytes as KiB or MiB with two decimals; `n/a` for null. */
export function formatBytes(bytes: number | null): string {
  if (bytes === null) return 'n/a'
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`
  return `${(bytes / (1024 * 1024)).toFixed(2)} MiB`
}

/** A number with a fixed count of decimals and thousands separators. */
export function formatNumber(value: number, decimals = 0): string {
  return value.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals })
}

/** A ratio such as `1.23×`; `n/a` for null. */
export function formatRatio(ratio: number | null): string {
  return ratio === null ? 'n/a' : `${ratio.toFixed(2)}×`
}
