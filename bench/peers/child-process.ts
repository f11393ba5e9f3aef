import { spawn } from 'node:child_process'
import { readFile, rm } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import type { ChildReport, ChildRequest } from './protocol.js'

const CHILD = fileURLToPath(new URL('./child.ts', import.meta.url))
/** A child that has not finished by then is killed and its measurement recorded as failed. */
const CHILD_TIMEOUT_MS = Number(process.env.PEERS_CHILD_TIMEOUT_MS ?? 300_000)

/** Extra node flags for one child (e.g. to write a CPU profile), and a tighter time limit. */
export interface ChildOptions {
  nodeFlags?: readonly string[]
  timeoutMs?: number
}

/** A child killed at its time limit. */
export class ChildTimeout extends Error {}

/**
 * Run one measurement in a fresh Node process (this process's loader flags, so TypeScript runs
 * as here) and return its report. Its stderr is kept and shown only when it fails.
 */
export async function runChild(request: ChildRequest, options: ChildOptions = {}): Promise<ChildReport> {
  const args = [...process.execArgv, ...(options.nodeFlags ?? []), CHILD, JSON.stringify(request)]
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, NODE_NO_WARNINGS: '1' } })
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-8000)
  })
  const limit = options.timeoutMs ?? CHILD_TIMEOUT_MS
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    child.kill('SIGKILL')
  }, limit)
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject)
    child.on('exit', (exitCode, signal) => resolve(signal ? null : exitCode))
  }).finally(() => clearTimeout(timer))
  if (timedOut) throw new ChildTimeout(`${request.system} n=${request.n} ${request.phase} was stopped at its limit of ${limit / 1000} s`)
  if (code !== 0) {
    const how = code === null ? 'was killed' : `exited with code ${code}`
    throw new Error(`${request.system} n=${request.n} ${request.phase} ${how}: ${stderr.trim().split('\n').slice(-12).join('\n')}`)
  }
  try {
    return JSON.parse(await readFile(request.resultFile, 'utf8')) as ChildReport
  } finally {
    await rm(request.resultFile, { force: true })
  }
}
