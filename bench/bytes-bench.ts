/**
 * Bytes stored by the bench:peers Cairn workload (n cycles of a ~1 KB model reply asking for one
 * tool call and a ~1 KB tool result, in the real Runner and Agent) on SQLite (async and sync
 * durability) and Postgres, beside the JSON size of the run's final message list.
 *
 *   npm run bench:bytes                       # n = 200, 500, 1000
 *   npm run bench:bytes -- 500                # one n
 *
 * SQLite: db + wal + shm with the writer open, and after it closed (checkpointed WAL), and a
 * dbstat breakdown; and what a generic compression step would leave of the record texts (bodies,
 * list items, effect outputs): `node:zlib` deflate-raw of each text on its own, no dictionary. Postgres: `pg_total_relation_size` summed over the schema's tables (heap,
 * TOAST, indexes) in database `test` (override with BYTES_PG_URL), and per table.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { deflateRawSync } from 'node:zlib'
import Database from 'better-sqlite3'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { Runner, type CheckpointStore } from '../src/index.js'
import { PostgresStore } from '../src/postgres.js'
import { SqliteStore } from '../src/sqlite.js'
import { sqliteBytes } from './disk-usage.js'
import { sqliteBreakdown } from './peers/sqlite-breakdown.js'
import { buildAgent } from './peers/systems/cairn.js'
import { PROMPT } from './peers/workload.js'

const PG_URL = process.env.BYTES_PG_URL ?? 'postgresql://postgres@127.0.0.1:5432/test'
const RUN_ID = 'bytes-run'
const sizes = process.argv.slice(2).map(Number).filter((n) => Number.isInteger(n) && n > 0)

interface Row {
  store: string
  n: number
  checkpoints: number
  messagesJson: number
  bytesOpen: number
  bytesClosed: number
  breakdown: Record<string, number>
  /** SQLite: the record texts' characters, and their bytes deflated one by one. */
  texts?: { raw: number; deflated: number }
}

async function main(): Promise<void> {
  const rows: Row[] = []
  for (const n of sizes.length > 0 ? sizes : [200, 500, 1000]) {
    rows.push(await measureSqlite(n, 'async'))
    rows.push(await measureSqlite(n, 'sync'))
    rows.push(await measurePostgres(n))
  }
  printTable(rows)
  for (const row of rows) console.log(`\n${row.store} n=${row.n}: ${Object.entries(row.breakdown).map(([name, bytes]) => `${name} ${kib(bytes)}`).join(', ')}`)
}

async function measureSqlite(n: number, durability: 'async' | 'sync'): Promise<Row> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-bytes-'))
  const path = join(dir, 'cairn.db')
  try {
    const store = new SqliteStore({ path })
    const { messagesJson, checkpoints } = await runWorkload(store, n, durability)
    const bytesOpen = await sqliteBytes(path)
    await store.close()
    const bytesClosed = await sqliteBytes(path)
    return { store: `sqlite-${durability}`, n, checkpoints, messagesJson, bytesOpen, bytesClosed, breakdown: sqliteBreakdown(path) ?? {}, texts: deflatedTexts(path) }
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

async function measurePostgres(n: number): Promise<Row> {
  const schema = `cairn_bytes_n${n}`
  const admin = new pg.Client({ connectionString: PG_URL })
  await admin.connect()
  try {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    const store = new PostgresStore({ connectionString: PG_URL, schema })
    const { messagesJson, checkpoints } = await runWorkload(store, n, 'async')
    await store.close()
    const { rows } = await admin.query<{ name: string; bytes: string }>(
      `SELECT c.relname AS name, pg_total_relation_size(c.oid)::text AS bytes
         FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
        WHERE s.nspname = $1 AND c.relkind IN ('r', 'p', 'm') ORDER BY pg_total_relation_size(c.oid) DESC`,
      [schema],
    )
    const breakdown = Object.fromEntries(rows.map((row) => [row.name, Number(row.bytes)]))
    const total = Object.values(breakdown).reduce((sum, bytes) => sum + bytes, 0)
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    return { store: 'postgres', n, checkpoints, messagesJson, bytesOpen: total, bytesClosed: total, breakdown }
  } finally {
    await admin.end()
  }
}

/** Run the workload to the end; the JSON size of the final message list and the checkpoint count. */
async function runWorkload(store: CheckpointStore, n: number, durability: 'async' | 'sync'): Promise<{ messagesJson: number; checkpoints: number }> {
  const result = await new Runner({ store, durability }).run(buildAgent(n), { input: PROMPT, runId: RUN_ID })
  if (result.state !== 'completed' || result.toolCalls !== n) throw new Error(`run ended ${result.state} after ${result.toolCalls} tool calls, expected ${n}`)
  const latest = await store.getLatest<{ runtime?: { messages?: unknown[] } }>({ runId: RUN_ID })
  let record = latest
  if (latest && latest.metadata.snapshot !== true) {
    const info = (await store.listCheckpoints({ runId: RUN_ID, limit: 16 })).find((c) => c.metadata.snapshot === true)
    if (info) record = await store.load(info.id)
  }
  const messages = record?.payload.runtime?.messages
  if (!Array.isArray(messages) || messages.length !== 2 * n + 2) throw new Error(`loaded ${String(messages?.length)} messages, expected ${2 * n + 2}`)
  let checkpoints = 0
  let before: string | undefined
  for (;;) {
    const page = await store.listCheckpoints({ runId: RUN_ID, limit: 500, ...(before === undefined ? {} : { before }) })
    checkpoints += page.length
    if (page.length < 500) break
    before = page.at(-1)?.id
  }
  return { messagesJson: Buffer.byteLength(JSON.stringify(messages)), checkpoints }
}

/** The record texts of a SQLite store (bodies, list items, effect outputs): characters, and bytes after deflate-raw of each. */
function deflatedTexts(path: string): { raw: number; deflated: number } {
  const db = new Database(path, { readonly: true })
  try {
    const texts = db.prepare('SELECT body FROM checkpoints UNION ALL SELECT item FROM list_items UNION ALL SELECT output FROM effects WHERE output IS NOT NULL').pluck().all() as string[]
    let raw = 0
    let deflated = 0
    for (const text of texts) {
      const bytes = Buffer.byteLength(text)
      raw += bytes
      deflated += Math.min(bytes, deflateRawSync(text).length)
    }
    return { raw, deflated }
  } finally {
    db.close()
  }
}

function printTable(rows: readonly Row[]): void {
  const header = ['store', 'n', 'checkpoints', 'messages JSON', 'stored (open)', 'stored (closed)', 'bytes / cycle', 'ratio (closed / messages)', 'record texts', 'deflated']
  const lines = rows.map((r) => [
    r.store,
    String(r.n),
    String(r.checkpoints),
    mib(r.messagesJson),
    mib(r.bytesOpen),
    mib(r.bytesClosed),
    String(Math.round(r.bytesClosed / r.n)),
    (r.bytesClosed / r.messagesJson).toFixed(2),
    r.texts ? mib(r.texts.raw) : '-',
    r.texts ? `${mib(r.texts.deflated)} (${((100 * r.texts.deflated) / r.texts.raw).toFixed(0)} %)` : '-',
  ])
  const widths = header.map((h, k) => Math.max(h.length, ...lines.map((line) => line[k]!.length)))
  const format = (cells: string[]) => cells.map((cell, k) => cell.padEnd(widths[k]!)).join('  ')
  console.log(format(header))
  for (const line of lines) console.log(format(line))
}

function mib(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(2)} MiB`
}

function kib(bytes: number): string {
  return `${(bytes / 1024).toFixed(0)} KiB`
}

await main()
