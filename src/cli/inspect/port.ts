import { CliError } from '../cli-error.js'

/** A TCP port option: 0 (any free port) to 65535. */
export function positiveIntOrZero(value: string, flag: string): number {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 0 || n > 65_535) throw new CliError(`${flag} must be a port number (0 for any free port), got ${JSON.stringify(value)}`)
  return n
}
