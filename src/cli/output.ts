import cliProgress from 'cli-progress'

/** Where a command prints: stdout for results, stderr for progress. */
export interface Output {
  json: boolean
  line(text?: string): void
  /** Print `value` as JSON (with `--json`) or call `human` to print it for people. */
  result(value: unknown, human: () => void): void
  /** A progress bar on a terminal; nothing on a pipe (or with --json). */
  progress(label: string): Progress
}

/** A progress reporter: `update(done, total)`, then `stop()`. */
export interface Progress {
  update(done: number, total: number): void
  stop(): void
}

/** The output of one command run. */
export function makeOutput(options: { json: boolean }): Output {
  return {
    json: options.json,
    line: (text = '') => void process.stdout.write(`${text}\n`),
    result(value, human) {
      if (options.json) process.stdout.write(`${JSON.stringify(value, null, 2)}\n`)
      else human()
    },
    progress(label) {
      if (!process.stderr.isTTY || options.json) return { update: () => {}, stop: () => {} }
      const bar = new cliProgress.SingleBar({ format: `${label} [{bar}] {value}/{total}`, stream: process.stderr, clearOnComplete: true, hideCursor: true }, cliProgress.Presets.shades_classic)
      let started = false
      return {
        update(done, total) {
          if (!started) {
            bar.start(total, done)
            started = true
          } else {
            bar.setTotal(total)
            bar.update(done)
          }
        },
        stop: () => {
          if (started) bar.stop()
        },
      }
    },
  }
}

/** Rows as an aligned text table with a header. */
export function table(headers: readonly string[], rows: readonly (readonly (string | number | null | undefined)[])[]): string[] {
  const cells = rows.map((row) => row.map((cell) => (cell === null || cell === undefined ? '' : String(cell))))
  const widths = headers.map((header, i) => Math.max(header.length, ...cells.map((row) => row[i]?.length ?? 0)))
  const format = (row: readonly string[]) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ').trimEnd()
  return [format(headers), format(widths.map((w) => '-'.repeat(w))), ...cells.map(format)]
}

/** A Unix-ms time as `2026-11-23 22:31:05` (UTC). */
export function time(ms: number | null | undefined): string {
  return typeof ms === 'number' ? new Date(ms).toISOString().replace('T', ' ').slice(0, 19) : ''
}
