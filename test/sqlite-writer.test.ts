import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { Agent, Runner, StoreError, tool } from '../src/index.js'
import { ScriptedModel } from '../src/testing.js'
import { type CommitRequest } from '../src/engine.js'
import { SqliteStore, SqliteWriter } from '../src/sqlite.js'

let dir = ''
const cleanups: (() => Promise<unknown>)[] = []

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-sqlite-writer-'))
})
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
  await rm(dir, { recursive: true, force: true })
})

function request(runId: string, seq: number): CommitRequest {
  const now = Date.now()
  return {
    rows: [
      {
        id: `${runId}-${seq}`,
        runId,
        parentId: seq === 1 ? null : `${runId}-${seq - 1}`,
        seq,
        kind: 'k',
        phase: 'p',
        schemaVersion: 1,
        createdAt: now,
        workflowName: null,
        terminal: false,
        metadata: '{}',
        body: '{}',
        lists: '[]',
        digest: 'd',
      },
    ],
    appends: [],
    run: { runId, status: 'running', name: null, threadId: null, workflowName: null, configSignature: null, lastSeq: 0, createdAt: now, updatedAt: now, metadata: '{}' },
  }
}

describe('SQLite writer thread', () => {
  it('commits a file store on a thread of its own, which the store reports, and reads see each commit once it resolves', async () => {
    const path = join(dir, 'cairn.db')
    const store = new SqliteStore({ path, writerThread: true })
    cleanups.push(() => store.close())
    expect(store.writerStats).toEqual({ commits: 0, micros: 0 })
    for (let i = 1; i <= 5; i++) {
      await store.save({ runId: 'r', kind: 'k', phase: `p${i}`, payload: { i } })
      expect((await store.getLatest({ runId: 'r' }))?.phase).toBe(`p${i}`)
    }
    expect(store.writerStats?.commits).toBe(5)
    expect(store.writerStats?.micros).toBeGreaterThan(0)
  })

  it('commits inline by default, and over an open database; a writer thread needs a file', async () => {
    const inline = new SqliteStore({ path: join(dir, 'inline.db') })
    cleanups.push(() => inline.close())
    await inline.save({ runId: 'r', kind: 'k', phase: 'p', payload: 1 })
    expect(inline.writerStats).toBeUndefined()
    expect(() => new SqliteStore({ path: ':memory:', writerThread: true })).toThrow(/writerThread needs a database file/)
    const opened = new SqliteStore({ database: new Database(join(dir, 'opened.db')) })
    cleanups.push(() => opened.close())
    await opened.save({ runId: 'r', kind: 'k', phase: 'p', payload: 1 })
    expect(opened.writerStats).toBeUndefined()
  })

  it('close waits for the commits in flight, and refuses later ones', async () => {
    const path = join(dir, 'cairn.db')
    const store = new SqliteStore({ path })
    await store.save({ runId: 'seed', kind: 'k', phase: 'p', payload: 1 })
    await store.close()
    const writer = new SqliteWriter(path, {})
    const commits = Array.from({ length: 20 }, (_, i) => writer.commit(request(`run-${i}`, 1)))
    await writer.close()
    expect(await Promise.all(commits)).toEqual(Array.from({ length: 20 }, () => ({ ok: true })))
    const db = new Database(path, { readonly: true })
    expect(db.prepare("SELECT count(*) FROM checkpoints WHERE run_id LIKE 'run-%'").pluck().get()).toBe(20)
    db.close()
    await expect(writer.commit(request('late', 1))).rejects.toThrow(/is closed/)
  })

  it('a writer thread that cannot open its database fails every commit with a StoreError naming the file', async () => {
    const missing = join(dir, 'missing', 'cairn.db')
    const writer = new SqliteWriter(missing, {})
    cleanups.push(() => writer.close())
    const first = writer.commit(request('r', 1))
    await expect(first).rejects.toThrow(StoreError)
    await expect(first).rejects.toThrow(`the SQLite writer thread for ${missing} stopped`)
    await expect(writer.commit(request('r', 2))).rejects.toThrow(/reopen the store/)
  })

  it('a commit the thread refuses (a constraint) rejects that commit only; the next one goes through', async () => {
    const path = join(dir, 'cairn.db')
    const store = new SqliteStore({ path })
    await store.save({ runId: 'seed', kind: 'k', phase: 'p', payload: 1 })
    await store.close()
    const writer = new SqliteWriter(path, {})
    cleanups.push(() => writer.close())
    const bad = request('r', 1)
    const broken = { ...bad, rows: [{ ...bad.rows[0]!, kind: null as unknown as string }] }
    await expect(writer.commit(broken)).rejects.toThrow(/NOT NULL/)
    await expect(writer.commit(request('r', 1))).resolves.toEqual({ ok: true })
  })

  it('keeps committing behind an async run whose loop never waits on I/O, instead of letting its queue fill', async () => {
    const store = new SqliteStore({ path: join(dir, 'cairn.db'), writerThread: true })
    cleanups.push(() => store.close())
    const cycles = 400
    const echo = tool({ name: 'echo', description: 'echo', inputSchema: z.object({ i: z.number() }), idempotent: true, callback: ({ i }) => `echo ${i}` })
    const turns = Array.from({ length: cycles }, (_, i) => [{ toolUse: { toolUseId: `t${i}`, name: 'echo', input: { i } } }])
    const model = new ScriptedModel([...turns, [{ text: 'done' }]])
    const result = await new Runner({ store, durability: 'async' }).run(new Agent({ model, tools: [echo] }), { input: 'go', runId: 'busy' })
    expect(result.state).toBe('completed')
    // 5 records a cycle and a queue of up to 1,000: a writer that only hears back from its thread
    // once the loop waits makes one commit each time the queue fills and one at the end, 3 in all
    // (how many more it makes depends on how fast the thread commits beside the loop).
    expect(store.writerStats!.commits).toBeGreaterThan(3)
    expect((await store.listCheckpoints({ runId: 'busy', limit: 1 }))[0]?.phase).toBe('run_terminal')
  })
})
