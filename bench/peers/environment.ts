/** The machine and the exact versions a run measured, for the doc and the JSON. */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { arch, cpus, loadavg, platform, release, totalmem } from 'node:os'
import pg from 'pg'
import { pgUrl } from './pg-admin.js'

/** What the run ran on. */
export interface Environment {
  date: string
  os: string
  cpu: string
  cores: number
  memoryGiB: number
  node: string
  postgres: string | null
  postgresSettings: Record<string, string>
  /** 1-minute load average when the run started (other work on the machine shows here). */
  loadAverageAtStart: number
  cairn: { version: string; commit: string }
  versions: Record<string, string>
}

const PEER_PACKAGES = [
  '@langchain/langgraph',
  '@langchain/core',
  '@langchain/langgraph-checkpoint',
  '@langchain/langgraph-checkpoint-sqlite',
  '@langchain/langgraph-checkpoint-postgres',
  '@dbos-inc/dbos-sdk',
  'better-sqlite3',
  'pg',
  'zod',
]

/** Describe this machine and read every version from the installed packages. */
export async function describeEnvironment(): Promise<Environment> {
  const root = new URL('../..', import.meta.url)
  const peers = new URL('./', import.meta.url)
  const peersRequire = createRequire(new URL('package.json', peers))
  const rootRequire = createRequire(new URL('package.json', root))
  const versions: Record<string, string> = {}
  for (const name of PEER_PACKAGES) versions[name] = versionOf(peers, name)
  versions['better-sqlite3 (Cairn, root)'] = versionOf(root, 'better-sqlite3')
  versions['pg (Cairn, root)'] = versionOf(root, 'pg')
  versions['SQLite (Cairn, root better-sqlite3)'] = sqliteVersion(rootRequire)
  versions['SQLite (peers better-sqlite3)'] = sqliteVersion(peersRequire)
  const cairnPackage = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { version: string }
  const { postgres, settings } = await postgresInfo()
  return {
    date: new Date().toISOString(),
    os: `${osName()} (${platform()} ${release()} ${arch()})`,
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 1024 ** 3),
    node: process.version,
    postgres,
    postgresSettings: settings,
    loadAverageAtStart: loadavg()[0] ?? 0,
    cairn: { version: cairnPackage.version, commit: gitCommit(root) },
    versions,
  }
}

/** The version of `name` installed under `base` (read from its package.json: not every package exports that file). */
function versionOf(base: URL, name: string): string {
  try {
    return (JSON.parse(readFileSync(new URL(`node_modules/${name}/package.json`, base), 'utf8')) as { version: string }).version
  } catch {
    return 'not installed'
  }
}

function sqliteVersion(require: NodeJS.Require): string {
  try {
    const Database = require('better-sqlite3') as new (path: string) => { prepare(sql: string): { pluck(): { get(): unknown } }; close(): void }
    const db = new Database(':memory:')
    const version = String(db.prepare('SELECT sqlite_version()').pluck().get())
    db.close()
    return version
  } catch {
    return 'unknown'
  }
}

async function postgresInfo(): Promise<{ postgres: string | null; settings: Record<string, string> }> {
  const client = new pg.Client({ connectionString: pgUrl('postgres') })
  try {
    await client.connect()
    const version = (await client.query<{ version: string }>('SELECT version()')).rows[0]?.version ?? null
    const names = ['synchronous_commit', 'fsync', 'wal_sync_method', 'shared_buffers']
    const rows = (await client.query<{ name: string; setting: string; unit: string | null }>('SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1)', [names])).rows
    return { postgres: version, settings: Object.fromEntries(rows.map((r) => [r.name, r.unit ? `${r.setting} × ${r.unit}` : r.setting])) }
  } catch {
    return { postgres: null, settings: {} }
  } finally {
    await client.end().catch(() => {})
  }
}

function gitCommit(root: URL): string {
  try {
    const cwd = new URL('.', root).pathname
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() !== ''
    return dirty ? `${commit} with uncommitted changes in src/` : commit
  } catch {
    return 'unknown (not a git checkout)'
  }
}

function osName(): string {
  try {
    const match = /^PRETTY_NAME="?([^"\n]*)"?/m.exec(readFileSync('/etc/os-release', 'utf8'))
    return match?.[1] ?? platform()
  } catch {
    return platform()
  }
}
