import { CairnError } from '../index.js'

/**
 * A problem the `cairn` command reports in one line (with exit code 1): an unknown run or
 * checkpoint, a store that cannot be reached or is not Cairn's, a bad argument.
 */
export class CliError extends CairnError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('invalid_argument', message, options)
  }
}

/** The one line printed for `err`; the stack only with `--debug`. */
export function describeFailure(err: unknown, debug: boolean): string {
  if (debug && err instanceof Error && err.stack) return err.stack
  if (err instanceof CairnError) return `cairn: ${err.message}`
  if (err instanceof Error) return `cairn: ${err.message.split('\n')[0]} (run again with --debug for details)`
  return `cairn: ${String(err)}`
}
