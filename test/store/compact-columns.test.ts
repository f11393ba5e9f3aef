import { copyFile, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import { afterAll, describe, expect, it } from 'vitest'
import { Agent, CheckpointCorruptionError, Runner, tool } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel } from '../../src/testing.js'

const dirs: string[] = []
afterAll(async () => Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true }))))

async function tempPath(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-columns-'))
  dirs.push(dir)
  return join(dir, 'cairn.db')
}

function withDb<T>(path: string, fn: (db: Database.Database) => T): T {
  const db = new Database(path)
  try {
    return fn(db)
  } finally {
    db.close()
  }
}

const PAGE = `page: ${'lorem ipsum '.repeat(50)}`

/** The agent of store-v6.db (see make-store-v6.ts), resumed past its approval. */
function v6Agent(): Agent {
  const lookup = tool({
    name: 'lookup',
    description: 'Look a page up.',
    inputSchema: { type: 'object', properties: { url: { type: 'string' } }, required: ['url'] },
    idempotent: true,
    callback: () => PAGE,
  })
  const approve = tool({
    name: 'approve',
    description: 'Ask a human.',
    inputSchema: { type: 'object', properties: { what: { type: 'string' } }, required: ['what'] },
    callback: async (input, ctx) => `approved: ${String(ctx.interrupt({ name: 'approval', reason: (input as { what: string }).what }))}`,
  })
  const model = new ScriptedModel(
    [
      [{ text: 'Looking.' }, { toolUse: { toolUseId: 'call-1', name: 'lookup', input: { url: 'https://example.com' } } }],
      [{ text: 'Asking.' }, { toolUse: { toolUseId: 'call-2', name: 'approve', input: { what: 'publish' } } }],
      [{ text: 'Published.' }],
    ],
    { select: 'conversation' },
  )
  return new Agent({ name: 'v6-agent', model, tools: [lookup, approve] })
}

/** A runner-like run of `n` small checkpoints, each the child of the one before. */
async function smallSaves(store: SqliteStore, n: number): Promise<string[]> {
  const ids: string[] = []
  for (let i = 0; i < n; i++) {
    ids.push(await store.save({ runId: 'small', kind: 'runner', phase: i % 2 === 0 ? 'pre_llm' : 'post_tool_batch', metadata: { step: i }, payload: { tool_call_count: 1 } }))
  }
  return ids
}

describe('compact checkpoint columns on SQLite', () => {
  it('stores a parent that is the previous checkpoint and no lists as empty, runner names as one character, digests as bytes', async () => {
    const path = await tempPath()
    const store = new SqliteStore({ path })
    const ids = await smallSaves(store, 3)
    await store.close()
    const stored = withDb(path, (db) =>
      db.prepare('SELECT quote(parent_id) AS parent, hex(kind) AS kind, hex(phase) AS phase, quote(lists) AS lists, typeof(digest) || length(digest) AS digest FROM checkpoints ORDER BY seq').all(),
    )
    expect(stored).toEqual([
      { parent: 'NULL', kind: '01', phase: '04', lists: "''", digest: 'blob16' },
      { parent: "''", kind: '01', phase: '07', lists: "''", digest: 'blob16' },
      { parent: "''", kind: '01', phase: '04', lists: "''", digest: 'blob16' },
    ])
    const reopened = new SqliteStore({ path })
    expect((await reopened.listCheckpoints({ runId: 'small' })).map((c) => [c.id, c.parentId, c.kind, c.phase])).toEqual([
      [ids[2], ids[1], 'runner', 'pre_llm'],
      [ids[1], ids[0], 'runner', 'post_tool_batch'],
      [ids[0], null, 'runner', 'pre_llm'],
    ])
    expect((await reopened.load(ids[2]!)).parentId).toBe(ids[1])
    await reopened.close()
  })

  it("stores the runner's usual metadata in a few characters and reads it back", async () => {
    const path = await tempPath()
    const store = new SqliteStore({ path })
    const metadata = [{ step: 2, snapshot: false }, { step: 3, snapshot: true }, { step: 4, snapshot: false, coalesced: true }, { step: 5, snapshot: false, other: 1 }]
    const ids = await store.write({ runId: 'meta', checkpoints: metadata.map((m) => ({ runId: 'meta', kind: 'runner', phase: 'pre_llm', metadata: m, payload: {} })) })
    await store.close()
    const stored = withDb(path, (db) => db.prepare("SELECT metadata FROM checkpoints WHERE run_id = 'meta' ORDER BY seq").pluck().all())
    expect(stored).toEqual(['f2', 't3', 'c4', '{"step":5,"snapshot":false,"other":1}'])
    const reopened = new SqliteStore({ path })
    expect((await reopened.listCheckpoints({ runId: 'meta' })).map((c) => c.metadata)).toEqual([...metadata].reverse())
    expect((await reopened.load(ids[2]!)).metadata).toEqual(metadata[2])
    await reopened.close()
  })

  it('keeps 300 small checkpoints under 170 bytes each, the id index included (224 with every column as text)', async () => {
    const path = await tempPath()
    const store = new SqliteStore({ path })
    await smallSaves(store, 300)
    await store.close()
    const bytes = withDb(path, (db) => db.prepare("SELECT sum(payload) FROM dbstat WHERE name IN ('checkpoints', 'sqlite_autoindex_checkpoints_1')").pluck().get() as number)
    // Each row: a 36-character id (twice, with the index), the run id, seq, times, metadata, body and digest.
    expect(bytes / 300).toBeLessThan(170)
  })

  it('keeps a kind or phase that is itself a one-character code apart from the name it codes', async () => {
    const path = await tempPath()
    const store = new SqliteStore({ path })
    const id = await store.save({ runId: 'odd', kind: '\u0001', phase: 'runner', payload: {} })
    await store.close()
    const stored = withDb(path, (db) => db.prepare('SELECT typeof(kind) AS kind, hex(phase) AS phase FROM checkpoints').get())
    expect(stored).toEqual({ kind: 'blob', phase: '01' })
    const reopened = new SqliteStore({ path })
    expect(await reopened.load(id)).toMatchObject({ kind: '\u0001', phase: 'runner' })
    await reopened.close()
  })

  it('listing one run, with a cursor or a workflow filter, reads the same parents as loading each checkpoint', async () => {
    const path = await tempPath()
    const store = new SqliteStore({ path })
    const ids = await store.write({ runId: 'wf', checkpoints: [0, 1, 2, 3, 4].map((k) => ({ runId: 'wf', kind: 'runner', phase: 'pre_llm', workflowName: k % 2 === 0 ? 'even' : null, payload: { k } })) })
    const loaded = await Promise.all(ids.map(async (id) => (await store.load(id)).parentId))
    expect(loaded).toEqual([null, ids[0], ids[1], ids[2], ids[3]])
    const parents = async (query: Parameters<SqliteStore['listCheckpoints']>[0]) => (await store.listCheckpoints(query)).map((c) => [c.id, c.parentId])
    expect(await parents({ runId: 'wf', before: ids[4]! })).toEqual([3, 2, 1, 0].map((k) => [ids[k], loaded[k]]))
    expect(await parents({ runId: 'wf', before: ids[3]!, limit: 1 })).toEqual([[ids[2], ids[1]]])
    expect(await parents({ runId: 'wf', workflowName: 'even' })).toEqual([4, 2, 0].map((k) => [ids[k], loaded[k]]))
    expect(await parents({ workflowName: 'even' })).toEqual([4, 2, 0].map((k) => [ids[k], loaded[k]]))
    expect((await store.loadRun('wf')).map((c) => c.parentId)).toEqual(loaded)
    await store.close()
  })

  it('writes parent ids out that differ from the previous checkpoint: none, an older one, another run', async () => {
    const path = await tempPath()
    const store = new SqliteStore({ path })
    await store.save({ id: 'own-1', runId: 'own', kind: 'workflow', phase: 'superstep', payload: { step: 1 } })
    await store.save({ id: 'own-2', runId: 'own', kind: 'workflow', phase: 'superstep', parentId: null, payload: { step: 2 } })
    await store.save({ id: 'own-3', runId: 'own', kind: 'workflow', phase: 'superstep', parentId: 'own-1', payload: { step: 3 } })
    await store.save({ id: 'own-4', runId: 'own', kind: 'workflow', phase: 'superstep', payload: { step: 4 } })
    const forked = await store.fork({ checkpointId: 'own-3', runId: 'fork' })
    await store.close()
    const parents = withDb(path, (db) => db.prepare("SELECT id, parent_id AS parent FROM checkpoints WHERE run_id = 'own' ORDER BY seq").all())
    expect(parents).toEqual([
      { id: 'own-1', parent: null },
      { id: 'own-2', parent: null },
      { id: 'own-3', parent: 'own-1' },
      { id: 'own-4', parent: '' },
    ])
    const reopened = new SqliteStore({ path })
    expect((await reopened.listCheckpoints({ runId: 'own' })).map((c) => c.parentId)).toEqual(['own-3', 'own-1', null, null])
    expect((await reopened.load(forked.id)).parentId).toBe('own-3')
    await reopened.close()
  })

  it('deleting a checkpoint writes its id out in the next one, which keeps its parent', async () => {
    const path = await tempPath()
    const store = new SqliteStore({ path })
    const ids = await smallSaves(store, 5)
    expect(await store.delete(ids[1]!)).toBe(true)
    await store.prune({ runId: 'small', keepLast: 2 })
    expect((await store.listCheckpoints({ runId: 'small' })).map((c) => [c.id, c.parentId])).toEqual([
      [ids[4], ids[3]],
      [ids[3], ids[2]],
    ])
    expect((await store.load(ids[3]!)).parentId).toBe(ids[2])
    await store.close()
  })

  it('a checkpoint before an implicit parent deleted behind the store is a CheckpointCorruptionError', async () => {
    const path = await tempPath()
    const store = new SqliteStore({ path })
    const ids = await smallSaves(store, 3)
    await store.close()
    withDb(path, (db) => db.prepare('DELETE FROM checkpoints WHERE id = ?').run(ids[1]))
    const reopened = new SqliteStore({ path })
    await expect(reopened.load(ids[2]!)).rejects.toBeInstanceOf(CheckpointCorruptionError)
    await reopened.close()
  })

  it('an edited compact column is a CheckpointCorruptionError', async () => {
    const path = await tempPath()
    const store = new SqliteStore({ path })
    const ids = await smallSaves(store, 3)
    await store.close()
    for (const [column, value] of [
      ['parent_id', 'someone-else'],
      ['parent_id', null],
      ['phase', '\u0005'],
      ['phase', '\u00c8'],
      ['lists', '[]x'],
      ['metadata', 'f4'],
      ['metadata', 't2'],
    ] as const) {
      const copy = await tempPath()
      await copyFile(path, copy)
      withDb(copy, (db) => db.prepare(`UPDATE checkpoints SET ${column} = ? WHERE id = ?`).run(value, ids[2]))
      const edited = new SqliteStore({ path: copy })
      await expect(edited.load(ids[2]!), `${column} = ${String(value)}`).rejects.toBeInstanceOf(CheckpointCorruptionError)
      await edited.close()
    }
  })
})

describe('a store written with every checkpoint column as text (schema version 6)', () => {
  async function fixtureCopy(): Promise<string> {
    const path = await tempPath()
    // store-v6.db was written by the code before compact checkpoint columns (see make-store-v6.ts).
    await copyFile(fileURLToPath(new URL('../fixtures/checkpoints/store-v6.db', import.meta.url)), path)
    return path
  }

  it('opens, reads every old record the same, resumes, and keeps old and new rows side by side', async () => {
    const path = await fixtureCopy()
    const stored = withDb(path, (db) => db.prepare("SELECT id, parent_id AS parentId, kind, phase FROM checkpoints WHERE run_id = 'v6-run' ORDER BY seq DESC").all())
    const store = new SqliteStore({ path })
    const headers = await store.listCheckpoints({ runId: 'v6-run' })
    expect(headers.map((c) => ({ id: c.id, parentId: c.parentId, kind: c.kind, phase: c.phase }))).toEqual(stored)
    const history = await new Runner({ store }).history('v6-run')
    expect((await store.listCheckpoints({ runId: 'own-run' })).map((c) => [c.id, c.parentId])).toEqual([
      ['own-3', 'own-1'],
      ['own-2', null],
      ['own-1', null],
    ])
    const result = await new Runner({ store, durability: 'sync' }).resume(v6Agent(), { runId: 'v6-run', responses: { 'call-2:approval': 'yes' } })
    expect(result.state).toBe('completed')
    expect(result.result?.toString()).toBe('Published.')
    await store.save({ id: 'own-4', runId: 'own-run', kind: 'workflow', phase: 'superstep', payload: { step: 4 } })
    await store.close()

    const versions = withDb(path, (db) => db.prepare('SELECT max(version) FROM cairn_migrations').pluck().get())
    expect(versions).toBe(9)
    // Bodies: the old rows' as they were (none holds a code), the resumed run's phase records compact.
    const bodies = withDb(path, (db) =>
      db.prepare("SELECT (CASE WHEN instr(body, char(1)) > 0 THEN 'compact' ELSE 'text' END) AS form, count(*) AS n FROM checkpoints WHERE run_id = 'v6-run' GROUP BY form ORDER BY form").all(),
    ) as { form: string; n: number }[]
    expect(bodies.map((row) => row.form)).toEqual(['compact', 'text'])
    expect(bodies[1]!.n).toBeGreaterThanOrEqual(stored.length)
    expect(bodies[0]!.n).toBeGreaterThan(5)
    const forms = withDb(path, (db) =>
      db.prepare("SELECT DISTINCT (CASE WHEN length(phase) = 1 THEN 'code' ELSE 'name' END) || ':' || typeof(digest) FROM checkpoints ORDER BY 1").pluck().all(),
    )
    // New runner rows are compact; a workflow's own names stay text; old rows keep text throughout.
    expect(forms).toEqual(['code:blob', 'name:blob', 'name:text'])

    const reopened = new SqliteStore({ path })
    const after = await new Runner({ store: reopened }).history('v6-run')
    expect(after.slice(0, history.length)).toEqual(history)
    expect(JSON.stringify(after.at(-1)!.payload)).toContain('Published.')
    // Old headers read as before; the first new row's parent is the last old one, stored as ''.
    const all = await reopened.listCheckpoints({ runId: 'v6-run' })
    expect(all.slice(-headers.length)).toEqual(headers)
    expect(all.at(-headers.length - 1)!.parentId).toBe(headers[0]!.id)
    const firstNew = withDb(path, (db) => db.prepare("SELECT parent_id FROM checkpoints WHERE run_id = 'v6-run' AND seq = ?").pluck().get(headers[0]!.seq + 1))
    expect(firstNew).toBe('')
    expect((await reopened.load('own-4')).parentId).toBe('own-3')
    await reopened.close()
  })

  it('an old row whose text parent was edited is still a CheckpointCorruptionError', async () => {
    const path = await fixtureCopy()
    withDb(path, (db) => db.prepare("UPDATE checkpoints SET parent_id = 'own-2' WHERE id = 'own-3'").run())
    const store = new SqliteStore({ path })
    await expect(store.load('own-3')).rejects.toBeInstanceOf(CheckpointCorruptionError)
    await store.close()
  })
})
