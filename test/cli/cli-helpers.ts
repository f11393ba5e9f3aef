import { spawn } from 'node:child_process'
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import type { PostgresTarget } from '../fixtures/postgres-target.js'
import { runLogOf } from '../support/file-log.js'

/** The repository root; the tests run the built `cairn` (`npm test` builds first). */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url))
export const CAIRN_BIN = join(ROOT, 'dist/cli/main.js')
export const AGENTS = join(ROOT, 'test/cli/fixtures/agents.mjs')

/** What a child process did. */
export interface Exit {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

/** Run `node file args…` to its end. */
export function runNode(args: readonly string[], options: { input?: string; env?: Record<string, string> } = {}): Promise<Exit> {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...options.env }, stdio: ['pipe', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  child.stdin.end(options.input ?? '')
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }))
  })
}

/** Run the real `cairn` binary on `store`. */
export function cairn(store: string, args: readonly string[], options: { input?: string; env?: Record<string, string> } = {}): Promise<Exit> {
  return runNode([CAIRN_BIN, '--store', store, ...args], options)
}

/** `cairn … --json`, parsed; fails with the output when the command failed. */
export async function cairnJson<T>(store: string, args: readonly string[], options: { env?: Record<string, string> } = {}): Promise<T> {
  const exit = await cairn(store, [...args, '--json'], options)
  if (exit.code !== 0) throw new Error(`cairn ${args.join(' ')} exited ${exit.code}: ${exit.stderr}${exit.stdout}`)
  return JSON.parse(exit.stdout) as T
}

/** One store the CLI tests run on. */
export interface StoreUnderTest {
  name: 'sqlite' | 'file' | 'postgres'
  url: string
  /** Edit one stored checkpoint behind the store's back (for `cairn verify`). */
  tamper(checkpointId: string): Promise<void>
}

export function sqliteStore(path: string): StoreUnderTest {
  return {
    name: 'sqlite',
    url: `sqlite:${path}`,
    tamper: async (id) => {
      const db = new Database(path)
      db.prepare(`UPDATE checkpoints SET metadata = '{"edited":true}' WHERE id = ?`).run(id)
      db.close()
    },
  }
}

export function fileStore(dir: string): StoreUnderTest {
  return {
    name: 'file',
    url: `file:${dir}`,
    // The checkpoint's row edited in its run's log, and the log's checks computed again.
    tamper: async (id) => {
      for (const run of await readdir(join(dir, 'runs'))) {
        const log = await runLogOf(dir, run)
        const at = log.lines.findIndex((line) => line.split(' ')[1]!.split(',').some((pair) => pair.endsWith(`:${id}`)))
        if (at < 0) continue
        const [check, ids, ...json] = log.lines[at]!.split(' ')
        const record = JSON.parse(json.join(' ')) as { c: Record<string, unknown>[] }
        for (const row of record.c) if (row.id === id) row.metadata = '{"edited":true}'
        log.lines[at] = `${check} ${ids} ${JSON.stringify(record)}`
        await log.write(true)
      }
    },
  }
}

export function postgresStore(target: PostgresTarget, schema: string): StoreUnderTest {
  const url = new URL(target.connectionString!)
  url.searchParams.set('schema', schema)
  return {
    name: 'postgres',
    url: url.toString(),
    tamper: async (id) => {
      await target.sql(`UPDATE "${schema}".checkpoints SET metadata = '{"edited":true}' WHERE id = $1`, [id])
    },
  }
}
