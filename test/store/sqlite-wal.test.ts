import { stat } from 'node:fs/promises'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { SqliteStore } from '../../src/sqlite.js'
import { useTempDirs } from '../support/temp-dirs.js'

const tempDir = useTempDirs('cairn-wal-')

async function newStore(): Promise<{ store: SqliteStore; path: string }> {
  const dir = await tempDir()
  const path = join(dir, 'cairn.db')
  return { store: new SqliteStore({ path }), path }
}

const walBytes = async (path: string) => (await stat(`${path}-wal`)).size

/** `count` checkpoints of about `chars` characters each, in one commit. */
function batch(count: number, chars: number, from = 0) {
  return Array.from({ length: count }, (_, i) => ({ runId: 'r', kind: 'k', phase: `p${from + i}`, payload: { text: `${from + i} `.repeat(chars / 5) } }))
}

/** ~1 MB in small commits: under the 2 MiB at which the log is checkpointed, so it is not. */
async function fillLog(store: SqliteStore): Promise<void> {
  for (let k = 0; k < 10; k++) await store.write({ runId: 'r', checkpoints: batch(10, 10_000, k * 10) })
}

describe('the SQLite write-ahead log', () => {
  it('grows to a couple of MiB between checkpoints during a run, and shrinks back to 4 MiB after a larger batch', async () => {
    const { store, path } = await newStore()
    await fillLog(store)
    expect(await walBytes(path)).toBeGreaterThan(1024 * 1024)
    // ~6 MB in one commit (a write-behind batch of a busy loop), then a small one: cut back to the limit.
    await store.write({ runId: 'r', checkpoints: batch(300, 20_000, 100) })
    expect(await walBytes(path)).toBeGreaterThan(5 * 1024 * 1024)
    await store.save({ runId: 'r', kind: 'k', phase: 'small', payload: { n: 1 } })
    expect(await walBytes(path)).toBeLessThanOrEqual(4 * 1024 * 1024)
    expect((await store.getLatest({ runId: 'r' }))?.phase).toBe('small')
    await store.close()
  })

  it('is left to SQLite between commits, even when a run ends, and folded into the database when the store closes', async () => {
    const { store, path } = await newStore()
    await fillLog(store)
    await store.save({ runId: 'r', kind: 'k', phase: 'end', payload: { done: true }, terminal: true })
    // No folding of Cairn's own: the log is checkpointed by SQLite at its size threshold only.
    expect(await walBytes(path)).toBeGreaterThan(1024 * 1024)
    await store.close()
    // The last connection to close checkpoints the log and removes it; nothing was lost on the way.
    await expect(stat(`${path}-wal`)).rejects.toThrow(/ENOENT/)
    const db = new Database(path, { readonly: true })
    expect(db.prepare("SELECT count(*) FROM checkpoints WHERE run_id = 'r'").pluck().get()).toBe(101)
    db.close()
  })
})
