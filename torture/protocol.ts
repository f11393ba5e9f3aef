import type { Message } from '../src/index.js'
import type { RunResult } from '../src/index.js'

/*
 * What a worker reports on stdout, one JSON line each: `ready` once its store is open, `trace`
 * for every kill point reached (when tracing), `killed` just before it kills itself, and then
 * `result` or `error`.
 */

/** What a worker reports when its run or resume returns. */
export interface WorkerResult {
  type: 'result'
  state: RunResult['state']
  interrupts: { id: string; name: string; toolUseId: string; idempotencyKey: string | null }[]
  replayed: number
  fromTerminalCheckpoint: boolean
  /** Whether this process started the run (`run`) rather than resumed it. */
  started: boolean
  /** Stored transcripts (the newest runtime snapshot's messages) of the run and its child runs, when completed. */
  transcripts: Record<string, Message[]>
  /** The agent's messages in memory, when this process drove the run to its end. */
  live: Message[] | null
  /** Every run's status in the store. */
  statuses: Record<string, string>
}

/** What a worker reports when run or resume threw. */
export interface WorkerError {
  type: 'error'
  name: string
  message: string
  code: string | null
}
