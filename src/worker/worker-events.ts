import type { RunStatus } from '../store/checkpoint-store.js'

/**
 * What a worker reports through `onEvent`, for logs and metrics: runs it claimed (with their
 * epoch: one ownership interval each), released, or lost to another worker, and errors it kept
 * going after.
 */
export type WorkerEvent =
  | { type: 'claimed'; runId: string; owner: string; epoch: number; recoveries: number }
  | {
      type: 'released'
      runId: string
      epoch: number
      /** `finished`: the run ended (or paused); `suspended`: the worker stopped; `failed_attempt`: handed back after an error; `failed_by_worker`: failed by the worker layer. */
      reason: 'finished' | 'suspended' | 'failed_attempt' | 'failed_by_worker'
      status: RunStatus | undefined
    }
  | { type: 'lost'; runId: string; epoch: number; reason: string; rejectedWrites: number }
  | { type: 'error'; runId?: string; error: Error }
