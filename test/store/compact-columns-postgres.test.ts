import { readFile } from 'node:fs/promises'
import { afterAll, describe, expect, it } from 'vitest'
import { Agent, CheckpointCorruptionError, Runner, tool } from '../../src/index.js'
import type { PostgresStore } from '../../src/postgres.js'
import { ScriptedModel } from '../../src/testing.js'
import { postgresTarget } from '../fixtures/postgres-target.js'

// A server when one answers (or DATABASE_URL / CAIRN_TEST_PG=server), else PGlite; see postgres-target.ts.
const target = await postgresTarget()
afterAll(() => target.close())

/** A runner-like run of `n` small checkpoints, each the child of the one before. */
async function smallSaves(store: PostgresStore, n: number): Promise<string[]> {
  const ids: string[] = []
  for (let i = 0; i < n; i++) {
    ids.push(await store.save({ runId: 'small', kind: 'runner', phase: i % 2 === 0 ? 'pre_llm' : 'post_tool_batch', metadata: { step: i }, payload: { tool_call_count: 1 } }))
  }
  return ids
}

async function parentsOf(schema: string, runId: string): Promise<unknown[]> {
  return (await target.sql(`SELECT id, parent_id AS parent FROM "${schema}".checkpoints WHERE run_id = $1 ORDER BY seq`, [runId])).map((row) => row.parent)
}

const PAGE = `page: ${'lorem ipsum '.repeat(50)}`

/** The agent of postgres-v6.sql (see make-postgres-v6.ts), resumed past its approval. */
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

describe(`parent ids stored once on Postgres (${target.kind})`, () => {
  it('stores a parent that is the previous checkpoint as empty and reads the id back', async () => {
    const schema = target.freshSchema()
    const store = target.openStore(schema)
    const ids = await smallSaves(store, 4)
    expect(await parentsOf(schema, 'small')).toEqual([null, '', '', ''])
    expect((await store.listCheckpoints({ runId: 'small' })).map((c) => c.parentId)).toEqual([ids[2], ids[1], ids[0], null])
    expect((await store.load(ids[3]!)).parentId).toBe(ids[2])
    expect((await store.getLatest({ runId: 'small' }))?.parentId).toBe(ids[2])
    // Several rows in one commit: each after the first against the one before it.
    const written = await store.write({ runId: 'small', checkpoints: [1, 2, 3].map((k) => ({ runId: 'small', kind: 'runner', phase: 'pre_llm', payload: { k } })) })
    expect((await parentsOf(schema, 'small')).slice(4)).toEqual(['', '', ''])
    expect((await store.load(written[0]!)).parentId).toBe(ids[3])
    expect((await store.load(written[2]!)).parentId).toBe(written[1])
    await store.close()
  })

  it("stores the runner's usual metadata in a few characters, reads it back, and detects an edit of it", async () => {
    const schema = target.freshSchema()
    const store = target.openStore(schema)
    const metadata = [{ step: 2, snapshot: false }, { step: 3, snapshot: true }, { step: 4, snapshot: false, coalesced: true }, { step: 5, snapshot: false, other: 1 }]
    const ids = await store.write({ runId: 'meta', checkpoints: metadata.map((m) => ({ runId: 'meta', kind: 'runner', phase: 'pre_llm', metadata: m, payload: {} })) })
    const stored = await target.sql(`SELECT metadata FROM "${schema}".checkpoints WHERE run_id = 'meta' ORDER BY seq`)
    expect(stored.map((row) => row.metadata)).toEqual(['f2', 't3', 'c4', '{"step":5,"snapshot":false,"other":1}'])
    expect((await store.listCheckpoints({ runId: 'meta' })).map((c) => c.metadata)).toEqual([...metadata].reverse())
    expect((await store.load(ids[2]!)).metadata).toEqual(metadata[2])
    await target.sql(`UPDATE "${schema}".checkpoints SET metadata = 'f4' WHERE id = $1`, [ids[1]])
    await expect(store.load(ids[1]!)).rejects.toBeInstanceOf(CheckpointCorruptionError)
    await store.close()
  })

  it('listing one run, with a cursor or a workflow filter, reads the same parents as loading each checkpoint', async () => {
    const schema = target.freshSchema()
    const store = target.openStore(schema)
    const ids = await store.write({ runId: 'wf', checkpoints: [0, 1, 2, 3, 4].map((k) => ({ runId: 'wf', kind: 'runner', phase: 'pre_llm', workflowName: k % 2 === 0 ? 'even' : null, payload: { k } })) })
    const loaded = await Promise.all(ids.map(async (id) => (await store.load(id)).parentId))
    expect(loaded).toEqual([null, ids[0], ids[1], ids[2], ids[3]])
    const parents = async (query: Parameters<PostgresStore['listCheckpoints']>[0]) => (await store.listCheckpoints(query)).map((c) => [c.id, c.parentId])
    expect(await parents({ runId: 'wf' })).toEqual([4, 3, 2, 1, 0].map((k) => [ids[k], loaded[k]]))
    expect(await parents({ runId: 'wf', before: ids[4]! })).toEqual([3, 2, 1, 0].map((k) => [ids[k], loaded[k]]))
    expect(await parents({ runId: 'wf', before: ids[3]!, limit: 1 })).toEqual([[ids[2], ids[1]]])
    expect(await parents({ runId: 'wf', workflowName: 'even' })).toEqual([4, 2, 0].map((k) => [ids[k], loaded[k]]))
    expect(await parents({ workflowName: 'even' })).toEqual([4, 2, 0].map((k) => [ids[k], loaded[k]]))
    expect((await store.loadRun('wf')).map((c) => c.parentId)).toEqual(loaded)
    await store.close()
  })

  it('writes out parent ids that are not the previous checkpoint, and the parent of the row after a deleted one', async () => {
    const schema = target.freshSchema()
    const store = target.openStore(schema)
    await store.save({ id: 'own-1', runId: 'own', kind: 'workflow', phase: 'superstep', payload: { step: 1 } })
    await store.save({ id: 'own-2', runId: 'own', kind: 'workflow', phase: 'superstep', parentId: null, payload: { step: 2 } })
    await store.save({ id: 'own-3', runId: 'own', kind: 'workflow', phase: 'superstep', parentId: 'own-1', payload: { step: 3 } })
    await store.save({ id: 'own-4', runId: 'own', kind: 'workflow', phase: 'superstep', payload: { step: 4 } })
    await store.save({ id: 'own-5', runId: 'own', kind: 'workflow', phase: 'superstep', payload: { step: 5 } })
    expect(await parentsOf(schema, 'own')).toEqual([null, null, 'own-1', '', ''])
    expect(await store.delete('own-4')).toBe(true)
    expect(await parentsOf(schema, 'own')).toEqual([null, null, 'own-1', 'own-4'])
    expect((await store.listCheckpoints({ runId: 'own' })).map((c) => [c.id, c.parentId])).toEqual([
      ['own-5', 'own-4'],
      ['own-3', 'own-1'],
      ['own-2', null],
      ['own-1', null],
    ])
    const ids = await smallSaves(store, 5)
    await store.prune({ runId: 'small', keepLast: 2 })
    expect((await store.listCheckpoints({ runId: 'small' })).map((c) => [c.id, c.parentId])).toEqual([
      [ids[4], ids[3]],
      [ids[3], ids[2]],
    ])
    await store.close()
  })

  it('a checkpoint whose implicit parent was deleted or edited behind the store is a CheckpointCorruptionError', async () => {
    const schema = target.freshSchema()
    const store = target.openStore(schema)
    const ids = await smallSaves(store, 4)
    await target.sql(`DELETE FROM "${schema}".checkpoints WHERE id = $1`, [ids[1]])
    await expect(store.load(ids[2]!)).rejects.toBeInstanceOf(CheckpointCorruptionError)
    await target.sql(`UPDATE "${schema}".checkpoints SET parent_id = 'someone-else' WHERE id = $1`, [ids[3]])
    await expect(store.load(ids[3]!)).rejects.toBeInstanceOf(CheckpointCorruptionError)
    await store.close()
  })

  it('keeps 300 small checkpoint rows under 210 bytes each (228 with parent ids written out)', async () => {
    const schema = target.freshSchema()
    const store = target.openStore(schema)
    await smallSaves(store, 300)
    await store.close()
    // The size of each row as stored (tuple header included), free of page and index granularity.
    const [row] = await target.sql(`SELECT avg(pg_column_size(c.*))::float8 AS bytes FROM "${schema}".checkpoints c`)
    expect(Number(row!.bytes)).toBeLessThan(210)
  })
})

describe(`the index of checkpoint times on Postgres (${target.kind})`, () => {
  it('holds created_at alone, and the listing across runs walks it newest first, a cursor included', async () => {
    const schema = target.freshSchema()
    const store = target.openStore(schema)
    const ids = await smallSaves(store, 3)
    await store.close()
    const [index] = await target.sql(`SELECT pg_get_indexdef(i.indexrelid) AS def FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = 'checkpoints_created_at'`, [schema])
    expect(index!.def).toMatch(/\(created_at\)$/)
    await target.sql('SET enable_seqscan = off')
    try {
      const plan = async (where: string) =>
        (await target.sql(`EXPLAIN SELECT id FROM "${schema}".checkpoints${where} ORDER BY created_at DESC, seq DESC, id DESC LIMIT 20`)).map((row) => String(row['QUERY PLAN'])).join('\n')
      expect(await plan('')).toContain('checkpoints_created_at')
      const cursor = ` WHERE (created_at, seq, id) < (SELECT created_at, seq, id FROM "${schema}".checkpoints WHERE id = '${ids[1]!}')`
      expect(await plan(cursor)).toMatch(/Index Scan Backward using checkpoints_created_at[\s\S]*Index Cond: \(created_at <=/)
    } finally {
      await target.sql('RESET enable_seqscan')
    }
  })
})

describe(`a Postgres schema written with parent ids written out (schema version 6, ${target.kind})`, () => {
  async function fixtureSchema(): Promise<string> {
    const schema = target.freshSchema()
    const dump = await readFile(new URL('../fixtures/checkpoints/postgres-v6.sql', import.meta.url), 'utf8')
    const statements = dump
      .split(/;\n/)
      .map((statement) => statement.replace(/^--.*\n/gm, '').trim())
      .filter((statement) => statement !== '')
    for (const statement of statements) await target.sql(statement.replaceAll('cairn_fixture_v6', `"${schema}"`))
    return schema
  }

  it('opens, reads every old record the same, resumes, and keeps old and new rows side by side', async () => {
    const schema = await fixtureSchema()
    const stored = await target.sql(`SELECT id, parent_id AS "parentId", kind, phase FROM "${schema}".checkpoints WHERE run_id = 'v6-run' ORDER BY seq DESC`)
    const store = target.openStore(schema)
    const headers = await store.listCheckpoints({ runId: 'v6-run' })
    expect(headers.map((c) => ({ id: c.id, parentId: c.parentId, kind: c.kind, phase: c.phase }))).toEqual(stored)
    const history = await new Runner({ store }).history('v6-run')
    const result = await new Runner({ store, durability: 'sync' }).resume(v6Agent(), { runId: 'v6-run', responses: { 'call-2:approval': 'yes' } })
    expect(result.state).toBe('completed')
    expect(result.result?.toString()).toBe('Published.')
    await store.save({ id: 'own-4', runId: 'own-run', kind: 'workflow', phase: 'superstep', payload: { step: 4 } })
    await store.close()

    const [version] = await target.sql(`SELECT max(version) AS v FROM "${schema}".cairn_migrations`)
    expect(version!.v).toBe(9)
    // Bodies: the old rows' as they were (none holds a code), the resumed run's phase records compact.
    const bodies = await target.sql(
      `SELECT (CASE WHEN strpos(body, chr(1)) > 0 THEN 'compact' ELSE 'text' END) AS form, count(*)::int AS n FROM "${schema}".checkpoints WHERE run_id = 'v6-run' GROUP BY form ORDER BY form`,
    )
    expect(bodies.map((row) => row.form)).toEqual(['compact', 'text'])
    expect(bodies[1]!.n).toBeGreaterThanOrEqual(stored.length)
    expect(bodies[0]!.n).toBeGreaterThan(5)
    const reopened = target.openStore(schema)
    const after = await new Runner({ store: reopened }).history('v6-run')
    expect(after.slice(0, history.length)).toEqual(history)
    expect(JSON.stringify(after.at(-1)!.payload)).toContain('Published.')
    const all = await reopened.listCheckpoints({ runId: 'v6-run' })
    expect(all.slice(-headers.length)).toEqual(headers)
    expect(all.at(-headers.length - 1)!.parentId).toBe(headers[0]!.id)
    const parents = await parentsOf(schema, 'v6-run')
    expect(parents.slice(0, headers.length)).toEqual([...headers].reverse().map((c) => c.parentId))
    expect(parents.slice(headers.length).every((parent) => parent === '')).toBe(true)
    expect((await reopened.listCheckpoints({ runId: 'own-run' })).map((c) => [c.id, c.parentId])).toEqual([
      ['own-4', 'own-3'],
      ['own-3', 'own-1'],
      ['own-2', null],
      ['own-1', null],
    ])
    await reopened.close()
  })
})
