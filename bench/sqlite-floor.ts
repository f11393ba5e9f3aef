import Database from 'better-sqlite3'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sqliteBytes } from './disk-usage.js'
import { benchMessage, messagesBytes, type BenchMessage } from './messages.js'
import { microsSince } from './stats.js'

/** The raw measurements of one floor run of `n` steps (one trial). */
export interface FloorTrial {
  n: number
  /** Microseconds of each serialize-insert-commit, in step order. */
  saves: number[]
  bytesOpen: number
  bytesClosed: number
  messagesBytes: number
}

/**
 * The floor: what a full-snapshot saver costs on bare better-sqlite3 with SqliteStore's durability
 * settings (WAL, synchronous=FULL, 8 KiB pages, `BEGIN IMMEDIATE`). Each step serializes the whole
 * payload and inserts it in its own committed transaction; the time of one step covers
 * `JSON.stringify` and the commit. WAL checkpointing stays at SQLite's default (every 1000 pages):
 * SqliteStore's tighter setting would checkpoint after nearly every large insert here, slowing the
 * floor and flattering the ratio.
 */
export async function runSqliteFloor(n: number): Promise<FloorTrial> {
  const location = await mkdtemp(join(tmpdir(), 'cairn-bench-floor-'))
  const path = join(location, 'floor.db')
  try {
    const db = new Database(path)
    let open = true
    try {
      const { saves, messages } = insertSnapshots(db, n)
      const bytesOpen = await sqliteBytes(path)
      db.close()
      open = false
      const bytesClosed = await sqliteBytes(path)
      return { n, saves, bytesOpen, bytesClosed, messagesBytes: messagesBytes(messages) }
    } finally {
      if (open) db.close()
    }
  } finally {
    await rm(location, { recursive: true, force: true })
  }
}

function insertSnapshots(db: Database.Database, n: number): { saves: number[]; messages: BenchMessage[] } {
  db.pragma('page_size = 8192')
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = FULL')
  db.exec('CREATE TABLE checkpoints (id TEXT PRIMARY KEY, run_id TEXT, body TEXT)')
  const insert = db.prepare<[string, string, string]>('INSERT INTO checkpoints (id, run_id, body) VALUES (?, ?, ?)')
  const commit = db.transaction((id: string, body: string) => insert.run(id, 'floor-run', body))
  const messages: BenchMessage[] = []
  const saves: number[] = []
  for (let i = 0; i < n; i++) {
    messages.push(benchMessage(i))
    const start = process.hrtime.bigint()
    commit.immediate(`checkpoint-${i}`, JSON.stringify({ messages }))
    saves.push(microsSince(start))
  }
  return { saves, messages }
}
