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

/** The tool result the fixture's run journaled (see make-store-v4.ts). */
const PAGE = `page: ${'lorem ipsum '.repeat(50)}`

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

function agent(): Agent {
  const model = new ScriptedModel(
    [
      [{ text: 'Looking.' }, { toolUse: { toolUseId: 'call-1', name: 'lookup', input: { url: 'https://example.com' } } }],
      [{ text: 'Asking.' }, { toolUse: { toolUseId: 'call-2', name: 'approve', input: { what: 'publish' } } }],
      [{ text: 'Published.' }],
    ],
    { select: 'conversation' },
  )
  return new Agent({ name: 'v4-agent', model, tools: [lookup, approve] })
}

async function fixtureCopy(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-compact-'))
  dirs.push(dir)
  const path = join(dir, 'cairn.db')
  // store-v4.db was written by the code before compact digests and shared tool results (see make-store-v4.ts).
  await copyFile(fileURLToPath(new URL('../fixtures/checkpoints/store-v4.db', import.meta.url)), path)
  return path
}

function rows<T>(path: string, sql: string): T[] {
  const db = new Database(path, { readonly: true })
  try {
    return db.prepare(sql).all() as T[]
  } finally {
    db.close()
  }
}

describe('a store written before compact records', () => {
  it('opens, reads every old record, resumes, and keeps old and new rows verifiable side by side', async () => {
    const path = await fixtureCopy()
    expect(rows<{ v: number }>(path, 'SELECT max(version) AS v FROM cairn_migrations')[0]!.v).toBe(4)
    const store = new SqliteStore({ path })
    const before = await new Runner({ store }).history('v4-run')
    expect(before.length).toBeGreaterThan(5)
    expect(await store.getEffect('v4-run', 'call-1')).toMatchObject({ status: 'succeeded', output: { content: [{ text: PAGE }] } })

    const result = await new Runner({ store, durability: 'sync' }).resume(agent(), { runId: 'v4-run', responses: { 'call-2:approval': 'yes' } })
    expect(result.state).toBe('completed')
    expect(result.result?.toString()).toBe('Published.')
    await store.close()

    expect(rows<{ v: number }>(path, 'SELECT max(version) AS v FROM cairn_migrations')[0]!.v).toBe(9)
    // Old rows keep their 64-character text digests; new ones store 16 bytes.
    const forms = rows<{ form: string }>(path, "SELECT DISTINCT typeof(digest) || ':' || length(digest) AS form FROM checkpoints ORDER BY form").map((row) => row.form)
    expect(forms).toEqual(['blob:16', 'text:64'])

    const reopened = new SqliteStore({ path })
    const after = await new Runner({ store: reopened }).history('v4-run')
    expect(after.length).toBeGreaterThan(before.length)
    expect(JSON.stringify(after.at(-1)!.payload)).toContain('Published.')
    await reopened.close()
  })

  it('an old row whose full digest no longer matches is still a CheckpointCorruptionError', async () => {
    const path = await fixtureCopy()
    const db = new Database(path)
    db.prepare("UPDATE checkpoints SET body = replace(body, 'Looking.', 'Lookinq.') WHERE body LIKE '%Looking.%'").run()
    db.close()
    const store = new SqliteStore({ path })
    const error = await new Runner({ store })
      .history('v4-run')
      .then(
        () => undefined,
        (err: unknown) => err,
      )
    await store.close()
    expect(error).toBeInstanceOf(CheckpointCorruptionError)
  })

  it('a new row with a compact digest that does not match is a CheckpointCorruptionError', async () => {
    const path = await fixtureCopy()
    const store = new SqliteStore({ path })
    const id = await store.save({ runId: 'fresh', kind: 'k', phase: 'p', payload: { text: 'hello' } })
    await store.close()
    const db = new Database(path)
    const digest = db.prepare('SELECT digest FROM checkpoints WHERE id = ?').pluck().get(id) as Buffer
    expect(digest).toHaveLength(16)
    db.prepare('UPDATE checkpoints SET body = ? WHERE id = ?').run('{"text":"hellO"}', id)
    db.close()
    const reopened = new SqliteStore({ path })
    await expect(reopened.load(id)).rejects.toBeInstanceOf(CheckpointCorruptionError)
    await reopened.close()
  })
})
