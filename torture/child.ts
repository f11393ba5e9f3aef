import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import type { JsonValue } from '../src/index.js'
import { KILL_ENV, TRACE_ENV, type Role, type TraceEntry } from './kill-switch.js'
import type { WorkerError, WorkerResult } from './protocol.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))

/** The node arguments that start a worker: a compiled `worker.js`, or `worker.ts` through tsx. */
export type WorkerCommand = readonly string[]

/** `node --import tsx torture/worker.ts`: no build step, about three times the start-up CPU. */
export const TSX_WORKER: WorkerCommand = ['--import', 'tsx', fileURLToPath(new URL('./worker.ts', import.meta.url))]

/** How to start one worker process. */
export interface WorkerLaunch {
  command: WorkerCommand
  dir: string
  runId: string
  durability: 'sync' | 'async'
  responses?: Record<string, JsonValue>
  /** `<point>:<occurrence>`: the worker kills itself there. */
  killAt?: string
  /** The harness SIGKILLs the worker this many ms after it reports `ready`. */
  killAfterMs?: number
  trace?: boolean
  /** A worker still running after this long is killed and reported as hung. */
  timeoutMs: number
}

/** How one worker process ended. */
export interface WorkerOutcome {
  /** Killed at a named point (by itself) or by the harness's timer, before it reported a result. */
  killed: { by: 'point'; point: string; role: Role } | { by: 'timer'; afterMs: number } | undefined
  hung: boolean
  result: WorkerResult | undefined
  error: WorkerError | undefined
  trace: TraceEntry[]
  /** Milliseconds from `ready` to the result. */
  runMs: number | undefined
  code: number | null
  signal: NodeJS.Signals | null
  stderr: string
}

/** Start a worker and wait for it to exit or die. */
export function runWorker(launch: WorkerLaunch): Promise<WorkerOutcome> {
  const args = [...launch.command, '--dir', launch.dir, '--run', launch.runId, '--durability', launch.durability]
  if (launch.responses) args.push('--responses', JSON.stringify(launch.responses))
  const env: NodeJS.ProcessEnv = { ...process.env, [TRACE_ENV]: launch.trace ? '1' : '0' }
  delete env[KILL_ENV]
  if (launch.killAt !== undefined) env[KILL_ENV] = launch.killAt
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] })
  const outcome: WorkerOutcome = { killed: undefined, hung: false, result: undefined, error: undefined, trace: [], runMs: undefined, code: null, signal: null, stderr: '' }
  let readyAt = 0
  let timer: NodeJS.Timeout | undefined
  let pending = ''
  const onLine = (line: string) => {
    if (line.trim() === '') return
    const message = JSON.parse(line) as { type: string } & Record<string, unknown>
    switch (message.type) {
      case 'ready':
        readyAt = performance.now()
        if (launch.killAfterMs !== undefined) {
          const afterMs = launch.killAfterMs
          timer = setTimeout(() => {
            if (!outcome.result && !outcome.error) outcome.killed = { by: 'timer', afterMs }
            child.kill('SIGKILL')
          }, afterMs)
        }
        break
      case 'trace':
        outcome.trace.push(message as unknown as TraceEntry)
        break
      case 'killed':
        outcome.killed = { by: 'point', point: String(message.point), role: message.role as Role }
        break
      case 'result':
        outcome.result = message as unknown as WorkerResult
        outcome.runMs = performance.now() - readyAt
        break
      case 'error':
        outcome.error = message as unknown as WorkerError
        break
    }
  }
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk
    const lines = pending.split('\n')
    pending = lines.pop() ?? ''
    lines.forEach(onLine)
  })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (outcome.stderr += chunk))
  const deadline = setTimeout(() => {
    outcome.hung = true
    child.kill('SIGKILL')
  }, launch.timeoutMs)
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code, signal) => {
      clearTimeout(deadline)
      clearTimeout(timer)
      onLine(pending)
      outcome.code = code
      outcome.signal = signal
      // A timer that fired after the result was out killed nothing that mattered.
      if (outcome.killed?.by === 'timer' && signal !== 'SIGKILL') outcome.killed = undefined
      resolve(outcome)
    })
  })
}
