import { mkdtemp, rm, stat } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterEach, describe, expect, it } from 'vitest'
import { SqliteStore } from '../../src/sqlite.js'

const dirs: string[] = []
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true })
})

async function newStore(): Promise<{ store: SqliteStore; path: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-wal-'))
  dirs.push(dir)
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

  it('is folded into the database and truncated when a run ends', async () => {
    const { store, path } = await newStore()
    await fillLog(store)
    expect(await walBytes(path)).toBeGreaterThan(1024 * 1024)
    await store.save({ runId: 'r', kind: 'k', phase: 'end', payload: { done: true }, terminal: true })
    expect(await walBytes(path)).toBe(0)
    // Nothing was lost on the way: a fresh connection reads every checkpoint from the database.
    await store.close()
    const db = new Database(path, { readonly: true })
    expect(db.prepare("SELECT count(*) FROM checkpoints WHERE run_id = 'r'").pluck().get()).toBe(101)
    db.close()
  })

  it('a run that ends while another connection reads an older snapshot does not wait for it', async () => {
    const { store, path } = await newStore()
    await fillLog(store)
    const reader = new Database(path, { readonly: true })
    const rows = reader.prepare('SELECT id FROM checkpoints').iterate()
    rows.next() // holds a read snapshot open
    const started = Date.now()
    await store.save({ runId: 'r', kind: 'k', phase: 'end', payload: { done: true }, terminal: true })
    // Well under the store's 5 s busy timeout: the checkpoint gave up at once.
    expect(Date.now() - started).toBeLessThan(2000)
    expect(await walBytes(path)).toBeGreaterThan(0)
    rows.return?.()
    reader.close()
    expect((await store.getLatest({ runId: 'r' }))?.phase).toBe('end')
    await store.close()
  })

  it('is folded in once the store has been quiet for a second, when no run ends (a LangGraph thread)', async () => {
    const { store, path } = await newStore()
    await fillLog(store)
    expect(await walBytes(path)).toBeGreaterThan(1024 * 1024)
    // Commits keep coming: the log stays.
    for (let k = 0; k < 4; k++) {
      await sleep(400)
      await store.save({ runId: 'r', kind: 'k', phase: `more${k}`, payload: { k } })
    }
    expect(await walBytes(path)).toBeGreaterThan(1024 * 1024)
    await sleep(1300)
    expect(await walBytes(path)).toBe(0)
    expect((await store.getLatest({ runId: 'r' }))?.phase).toBe('more3')
    await store.close()
  })
})
