import { spawn } from 'node:child_process'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The repository root: its node_modules lends the apps their dependencies. */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** What a child process did. */
export interface Exit {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

/** Run `command args…` in `cwd` to its end (npm and npx through the npm that runs the tests). */
export function run(cwd: string, command: string, args: readonly string[], env: Record<string, string> = {}): Promise<Exit> {
  const child = spawn(command, args, { cwd, env: { ...process.env, ...env, npm_config_update_notifier: 'false' }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }))
  })
}

/** Fail with the output of a command that did not exit 0. */
export function ok(exit: Exit, what: string): Exit {
  if (exit.code !== 0) throw new Error(`${what} exited ${exit.code ?? exit.signal}:\n${exit.stderr}${exit.stdout}`)
  return exit
}

/** `npm pack` of the built package (dist/ as `npm run build` left it) into `dir`; the tarball's path. */
export async function pack(dir: string): Promise<string> {
  const exit = ok(await run(ROOT, 'npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir]), 'npm pack')
  const [packed] = JSON.parse(exit.stdout) as { filename: string }[]
  return join(dir, packed!.filename)
}

/**
 * A fresh application in `dir` with the tarball installed by npm, offline: the package's own
 * dependencies and the `peers` asked for are links to the repository's installed copies (so
 * nothing is downloaded and better-sqlite3 is not compiled again), as a user's `npm install`
 * would have put them beside it.
 */
export async function installApp(dir: string, tarball: string, peers: readonly string[]): Promise<void> {
  const manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }
  const linked = [...Object.keys(manifest.dependencies), ...peers]
  const dependencies = Object.fromEntries(linked.map((name) => [name, `file:${join(ROOT, 'node_modules', name)}`]))
  await writeFile(join(dir, 'package.json'), JSON.stringify({ name: 'packed-app', version: '1.0.0', private: true, type: 'module', dependencies }, null, 2))
  ok(await run(dir, 'npm', ['install', '--offline', '--ignore-scripts', '--no-audit', '--no-fund', tarball]), 'npm install of the tarball')
}
