import Database from 'better-sqlite3'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { median, microsSince } from './stats.js'

/**
 * The commit floor: what one durable commit costs on this disk. Bare better-sqlite3 with the
 * settings of bench/sqlite-floor.ts and SqliteStore (WAL, synchronous=FULL, 8 KiB pages,
 * `BEGIN IMMEDIATE`): `commits` transactions of one INSERT each, of a small row or, with
 * `bodyChars`, of a row holding that many characters (what a durable point of the agent loop
 * must store at least: the model's response, or the tool's result). Returns the median
 * microseconds of one.
 */
export async function measureCommitFloor(commits: number, bodyChars = 0): Promise<number> {
  const location = await mkdtemp(join(tmpdir(), 'cairn-bench-commit-floor-'))
  const db = new Database(join(location, 'floor.db'))
  try {
    db.pragma('page_size = 8192')
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = FULL')
    db.exec('CREATE TABLE marks (id TEXT PRIMARY KEY, run_id TEXT, body TEXT)')
    const insert = db.prepare<[string, string, string]>('INSERT INTO marks (id, run_id, body) VALUES (?, ?, ?)')
    const body = bodyChars === 0 ? '{"phase":"post_tool_batch","step":1}' : JSON.stringify({ text: 'x'.repeat(bodyChars) })
    const commit = db.transaction((id: string) => insert.run(id, 'floor-run', body))
    const samples: number[] = []
    for (let i = 0; i < commits; i++) {
      const start = process.hrtime.bigint()
      commit.immediate(`mark-${i}`)
      samples.push(microsSince(start))
    }
    return median(samples)
  } finally {
    db.close()
    await rm(location, { recursive: true, force: true })
  }
}
