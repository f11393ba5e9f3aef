/** The storage plot of the doc: bytes stored against n, one line per system, log-log, as a standalone SVG. */
import type { Row } from './summarize.js'

const WIDTH = 900
const HEIGHT = 500
const PLOT = { left: 80, right: 590, top: 50, bottom: 440 }

/** Line colour and dash of each system. */
const STYLE: Record<string, { color: string; dash?: string }> = {
  'cairn-file-async': { color: '#1b9e77' },
  'cairn-file-sync': { color: '#1b9e77', dash: '6 4' },
  'cairn-sqlite-async': { color: '#1f78b4' },
  'cairn-sqlite-sync': { color: '#1f78b4', dash: '6 4' },
  'cairn-postgres-async': { color: '#6a3d9a' },
  'cairn-postgres-sync': { color: '#6a3d9a', dash: '6 4' },
  'langgraph-sqlite': { color: '#e31a1c' },
  'langgraph-sqlite-delta': { color: '#e31a1c', dash: '2 3' },
  'langgraph-postgres': { color: '#ff7f00' },
  'langgraph-postgres-delta': { color: '#ff7f00', dash: '2 3' },
  'langgraph-cairn-sqlite': { color: '#33a02c' },
  'langgraph-cairn-postgres': { color: '#33a02c', dash: '6 4' },
  dbos: { color: '#8c6d31' },
}

/** An SVG of `rows`' stored bytes (writer open, with WAL) against n, for every system that stores to disk. */
export function storagePlot(rows: readonly Row[], sizes: readonly number[]): string {
  const series = Object.keys(STYLE)
    .map((system) => ({
      system,
      label: rows.find((r) => r.system === system)?.label ?? system,
      points: rows.filter((r) => r.system === system && r.bytes !== null).map((r) => ({ n: r.n, bytes: r.bytes as number })),
    }))
    .filter((s) => s.points.length > 0)
  const all = series.flatMap((s) => s.points.map((p) => p.bytes))
  if (all.length === 0) return svg(['<text x="20" y="40">no storage figures were measured</text>'])
  const yMin = 10 ** Math.floor(Math.log10(Math.min(...all)))
  const yMax = 10 ** Math.ceil(Math.log10(Math.max(...all)))
  const xMin = Math.min(...sizes)
  const xMax = Math.max(...sizes)
  const x = (n: number) => PLOT.left + ((Math.log(n) - Math.log(xMin)) / (Math.log(xMax) - Math.log(xMin))) * (PLOT.right - PLOT.left)
  const y = (bytes: number) => PLOT.bottom - ((Math.log(bytes) - Math.log(yMin)) / (Math.log(yMax) - Math.log(yMin))) * (PLOT.bottom - PLOT.top)

  const parts: string[] = []
  parts.push(`<text x="${PLOT.left}" y="28" font-size="16" font-weight="bold">Bytes stored after a run of n agent cycles (log–log)</text>`)
  for (let decade = yMin; decade <= yMax; decade *= 10) {
    parts.push(`<line x1="${PLOT.left}" x2="${PLOT.right}" y1="${y(decade)}" y2="${y(decade)}" stroke="#ddd"/>`)
    parts.push(`<text x="${PLOT.left - 8}" y="${y(decade) + 4}" font-size="12" text-anchor="end">${bytesLabel(decade)}</text>`)
  }
  for (const n of sizes) {
    parts.push(`<line x1="${x(n)}" x2="${x(n)}" y1="${PLOT.top}" y2="${PLOT.bottom}" stroke="#eee"/>`)
    parts.push(`<text x="${x(n)}" y="${PLOT.bottom + 18}" font-size="12" text-anchor="middle">${n}</text>`)
  }
  parts.push(`<rect x="${PLOT.left}" y="${PLOT.top}" width="${PLOT.right - PLOT.left}" height="${PLOT.bottom - PLOT.top}" fill="none" stroke="#333"/>`)
  parts.push(`<text x="${(PLOT.left + PLOT.right) / 2}" y="${PLOT.bottom + 40}" font-size="13" text-anchor="middle">n (cycles: one ~1 KB model message and one ~1 KB tool result each)</text>`)
  parts.push(`<text x="18" y="${(PLOT.top + PLOT.bottom) / 2}" font-size="13" text-anchor="middle" transform="rotate(-90 18 ${(PLOT.top + PLOT.bottom) / 2})">bytes stored (database files with WAL, or Postgres table sizes)</text>`)
  series.forEach((s, i) => {
    const style = STYLE[s.system] ?? { color: '#000' }
    const dash = style.dash ? ` stroke-dasharray="${style.dash}"` : ''
    const path = s.points.map((p, k) => `${k === 0 ? 'M' : 'L'}${x(p.n).toFixed(1)},${y(p.bytes).toFixed(1)}`).join(' ')
    parts.push(`<path d="${path}" fill="none" stroke="${style.color}" stroke-width="2"${dash}/>`)
    for (const p of s.points) parts.push(`<circle cx="${x(p.n).toFixed(1)}" cy="${y(p.bytes).toFixed(1)}" r="3" fill="${style.color}"/>`)
    const ly = PLOT.top + 10 + i * 22
    parts.push(`<line x1="${PLOT.right + 20}" x2="${PLOT.right + 50}" y1="${ly}" y2="${ly}" stroke="${style.color}" stroke-width="2"${dash}/>`)
    parts.push(`<text x="${PLOT.right + 56}" y="${ly + 4}" font-size="12">${escapeXml(s.label)}</text>`)
  })
  return svg(parts)
}

function svg(parts: readonly string[]): string {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="Helvetica, Arial, sans-serif">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="#fff"/>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n')
}

function bytesLabel(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB']
  let value = bytes
  let unit = 0
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000
    unit++
  }
  return `${value} ${units[unit]}`
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}
