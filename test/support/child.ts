import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** The repository root: examples run from here, as `npx tsx examples/...` would. */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** What a finished child process printed and how it exited. */
export interface ChildOutput {
  code: number | null
  stdout: string
  stderr: string
}

/** Run a TypeScript script (an example) in a child Node process through tsx and collect its output. */
export async function runScript(args: readonly string[], options: { env?: NodeJS.ProcessEnv } = {}): Promise<ChildOutput> {
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], ...(options.env ? { env: options.env } : {}) })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (exitCode) => resolve(exitCode))
  })
  return { code, stdout, stderr }
}

/** The rest of every line of `text` that starts with `prefix`. */
export function linesStartingWith(text: string, prefix: string): string[] {
  return text.split('\n').flatMap((line) => (line.startsWith(prefix) ? [line.slice(prefix.length)] : []))
}
