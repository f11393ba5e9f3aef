import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

/**
 * Start the conformance child with the given arguments: the built `crash-child.js` beside this
 * module (at the root of dist/, as the build lays it out), or its TypeScript source through tsx.
 */
export function startChild(args: readonly string[]): ChildProcess {
  const compiled = fileURLToPath(new URL('./crash-child.js', import.meta.url))
  const script = existsSync(compiled) ? compiled : fileURLToPath(new URL('./crash-child.ts', import.meta.url))
  const needsTsx = script.endsWith('.ts') || args.some((arg) => arg.endsWith('.ts'))
  return spawn(process.execPath, [...(needsTsx ? ['--import', 'tsx'] : []), script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
}

/** Resolve with the exit code (or signal) once the child is gone; stderr is kept for messages. */
export function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
  let stderr = ''
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, stderr })))
}

/** Call `onLine` for each stdout line of the child. */
export function onLines(child: ChildProcess, onLine: (line: string) => void): void {
  let buffered = ''
  child.stdout?.on('data', (chunk: Buffer) => {
    buffered += chunk.toString()
    const lines = buffered.split('\n')
    buffered = lines.pop() ?? ''
    for (const line of lines) onLine(line)
  })
}
