import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import { importPeer } from '../engine.js'
import { FileStore, type CheckpointStore, type KeyRing } from '../index.js'
import { CliError } from './cli-error.js'

/** The store a command works on when neither `--store` nor `CAIRN_STORE` is given. */
export const DEFAULT_STORE = 'sqlite:.cairn/cairn.db'

/** A store URL taken apart. */
export type StoreLocation =
  | { kind: 'sqlite'; path: string; url: string }
  | { kind: 'file'; directory: string; url: string }
  | { kind: 'postgres'; connectionString: string; schema: string; url: string }

/** How to open a store: create it when missing, and the keys that sign (and encrypt) its records. */
export interface OpenOptions {
  create?: boolean
  /** The key ring (`CAIRN_KEYS`): records are signed with its first key and verified with any. */
  keys?: KeyRing
  /** With `keys`: encrypt what is written (`CAIRN_ENCRYPT`, `--encrypt`). */
  encrypt?: boolean
}

/** An open store, with what the CLI needs beside the `CheckpointStore` interface. */
export interface OpenStore {
  store: CheckpointStore
  location: StoreLocation
  /** Schema versions applied before and after opening (`cairn migrate`). */
  migrations: { before: number[]; after: () => Promise<number[]> }
}

/**
 * Parse `sqlite:PATH`, `file:DIR` or `postgres://…` (`postgresql://…`, with `?schema=NAME`). A
 * bare path is taken as a SQLite file.
 */
export function parseStoreUrl(url: string): StoreLocation {
  if (/^postgres(ql)?:\/\//.test(url)) {
    const parsed = new URL(url)
    const schema = parsed.searchParams.get('schema') ?? 'cairn'
    parsed.searchParams.delete('schema')
    return { kind: 'postgres', connectionString: parsed.toString(), schema, url: redact(url) }
  }
  if (url.startsWith('file:')) return { kind: 'file', directory: resolve(stripScheme(url, 'file:')), url }
  if (url.startsWith('sqlite:')) return { kind: 'sqlite', path: resolve(stripScheme(url, 'sqlite:')), url }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) {
    throw new CliError(`unsupported store URL ${redact(url)}: use sqlite:PATH, file:DIR or postgres://…`)
  }
  return { kind: 'sqlite', path: resolve(url), url: `sqlite:${url}` }
}

/**
 * Open the store at `url`. Unless `create` is set, a store that does not exist yet, or that is
 * not Cairn's, is refused (a read never creates tables in someone else's database).
 */
export async function openStore(url: string, options: OpenOptions = {}): Promise<OpenStore> {
  const location = parseStoreUrl(url)
  if (options.encrypt === true && options.keys === undefined) {
    throw new CliError('encryption needs keys: set CAIRN_KEYS=id:base64secret (the first key writes), e.g. CAIRN_KEYS="k1:$(openssl rand -base64 32)"')
  }
  const trust = options.keys === undefined ? {} : { keys: options.keys, encrypt: options.encrypt === true }
  switch (location.kind) {
    case 'sqlite':
      return openSqlite(location, options.create === true, trust)
    case 'file':
      return openFile(location, options.create === true, trust)
    case 'postgres':
      return openPostgres(location, options.create === true, trust)
  }
}

/** The store options that carry the keys. */
type Trust = { keys?: KeyRing; encrypt?: boolean }

async function openSqlite(location: Extract<StoreLocation, { kind: 'sqlite' }>, create: boolean, trust: Trust): Promise<OpenStore> {
  const { default: Database } = await importPeer<{ default: typeof import('better-sqlite3') }>({ name: 'better-sqlite3', neededBy: `the SQLite store ${location.url}` })
  const versions = (): number[] => {
    if (!existsSync(location.path)) return []
    const db = new Database(location.path, { readonly: true, fileMustExist: true })
    try {
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]
      if (tables.length === 0) return []
      if (!tables.some((t) => t.name === 'cairn_migrations')) throw notCairn(location.url)
      return (db.prepare('SELECT version FROM cairn_migrations ORDER BY version').all() as { version: number }[]).map((row) => row.version)
    } catch (err) {
      if (err instanceof CliError) throw err
      throw new CliError(`${location.url} is not a Cairn store (${(err as Error).message}); point --store at a Cairn database`, { cause: err })
    } finally {
      db.close()
    }
  }
  const before = versions()
  if (before.length === 0 && !create) throw missing(location.url)
  const { SqliteStore } = await import('../sqlite.js')
  return { store: new SqliteStore({ path: location.path, ...trust }), location, migrations: { before, after: () => Promise.resolve(versions()) } }
}

async function openFile(location: Extract<StoreLocation, { kind: 'file' }>, create: boolean, trust: Trust): Promise<OpenStore> {
  const isStore = existsSync(resolve(location.directory, 'runs'))
  if (!isStore) {
    if (existsSync(location.directory) && (!statSync(location.directory).isDirectory() || readdirSync(location.directory).length > 0)) throw notCairn(location.url)
    if (!create) throw missing(location.url)
    // A file store creates its directories at its first write; `migrate` (create) makes it a store now.
    mkdirSync(resolve(location.directory, 'runs'), { recursive: true })
  }
  const store = new FileStore({ directory: location.directory, ...trust })
  return { store, location, migrations: { before: isStore ? [1] : [], after: () => Promise.resolve([1]) } }
}

async function openPostgres(location: Extract<StoreLocation, { kind: 'postgres' }>, create: boolean, trust: Trust): Promise<OpenStore> {
  const { default: pg } = await importPeer<typeof import('pg')>({ name: 'pg', neededBy: `the Postgres store ${location.url}` })
  const postgres = await import('../postgres.js')
  const { PostgresStore } = postgres
  try {
    const check: (schema: string) => void = postgres.assertSchemaName
    check(location.schema)
  } catch (err) {
    throw new CliError(`${location.url}: ${(err as Error).message}`, { cause: err })
  }
  const pool = new pg.Pool({ connectionString: location.connectionString, max: 4, connectionTimeoutMillis: 5000 })
  pool.on('error', () => {})
  const versions = async (): Promise<number[]> => {
    const table = `"${location.schema}".cairn_migrations`
    const found = await pool.query<{ exists: boolean }>('SELECT to_regclass($1) IS NOT NULL AS "exists"', [table])
    if (found.rows[0]?.exists !== true) {
      const other = await pool.query('SELECT 1 FROM information_schema.tables WHERE table_schema = $1 LIMIT 1', [location.schema])
      if (other.rows.length > 0) throw notCairn(location.url)
      return []
    }
    return (await pool.query<{ version: number }>(`SELECT version FROM ${table} ORDER BY version`)).rows.map((row) => Number(row.version))
  }
  let before: number[]
  try {
    before = await versions()
  } catch (err) {
    await pool.end().catch(() => {})
    if (err instanceof CliError) throw err
    throw new CliError(`cannot reach the Postgres store ${location.url}: ${(err as Error).message}; check the URL and that the server is running`, { cause: err })
  }
  if (before.length === 0 && !create) {
    await pool.end().catch(() => {})
    throw missing(location.url)
  }
  const store = new PostgresStore({ pool, schema: location.schema, ...trust })
  const close = store.close.bind(store)
  store.close = async () => {
    await close()
    await pool.end().catch(() => {})
  }
  await store.ready()
  return { store, location, migrations: { before, after: versions } }
}

function stripScheme(url: string, scheme: string): string {
  const rest = url.slice(scheme.length)
  return rest.startsWith('//') ? rest.slice(2) : rest
}

function redact(url: string): string {
  return url.replace(/:[^:@/]*@/, ':***@')
}

function missing(url: string): CliError {
  return new CliError(`no Cairn store at ${url}; give the store with --store URL or CAIRN_STORE (sqlite:PATH, file:DIR, postgres://…), or create one with \`cairn migrate\``)
}

function notCairn(url: string): CliError {
  return new CliError(`${url} is not a Cairn store: it holds other data; point --store at a Cairn store`)
}
