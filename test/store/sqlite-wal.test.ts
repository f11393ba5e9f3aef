import { mkdtemp, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { SqliteStore } from '../../src/sqlite.js'

const dirs: string[] = []
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true })
})

describe('the SQLite write-ahead log', () => {
  it('shrinks back to 64 KiB after a large batch, while the store stays open', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-wal-'))
    dirs.push(dir)
    const path = join(dir, 'cairn.db')
    const store = new SqliteStore({ path })
    // ~2 MB in one commit (a write-behind batch of a busy loop), then a small one.
    const big = Array.from({ length: 200 }, (_, i) => ({ runId: 'r', kind: 'k', phase: `p${i}`, payload: { text: `${i} `.repeat(5000) } }))
    await store.write({ runId: 'r', checkpoints: big })
    expect((await stat(`${path}-wal`)).size).toBeGreaterThan(1024 * 1024)
    await store.save({ runId: 'r', kind: 'k', phase: 'small', payload: { n: 1 } })
    expect((await stat(`${path}-wal`)).size).toBeLessThanOrEqual(64 * 1024)
    expect((await store.getLatest({ runId: 'r' }))?.phase).toBe('small')
    await store.close()
  })
})
