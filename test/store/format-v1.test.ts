import { copyFile, cp, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import { afterAll, describe, expect, it } from 'vitest'
import { Agent, FileStore, Runner } from '../../src/index.js'
import type { EngineStore } from '../../src/engine.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel, conversation } from '../../src/testing.js'
import { LOOKUP_RESULT, SCHEMA_PLACEHOLDER, lookupTool } from '../fixtures/v1/make-v1.js'
import { postgresTarget } from '../fixtures/postgres-target.js'
import { useTempDirs } from '../support/temp-dirs.js'

/**
 * Stores written in format v1 (see `test/fixtures/v1/make-v1.ts`), opened and read by today's
 * code. When the format changes, this test keeps passing only through a migration: the fixture
 * files are never rewritten.
 */
const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/v1/${name}`, import.meta.url))

/** The runner's phase chain of the fixture run, newest first, as v1 wrote it. */
const RUNNER_PHASES = ['run_terminal', 'post_llm', 'pre_llm', 'step_started', 'post_tool_batch', 'pre_tool_batch', 'post_llm', 'pre_llm', 'step_started', 'run_started']

const tempDir = useTempDirs('cairn-format-v1-')
const pg = await postgresTarget()
afterAll(() => pg.close())

const backends: [string, () => Promise<EngineStore>][] = [
  [
    'sqlite',
    async () => {
      const path = join(await tempDir(), 'cairn.db')
      await copyFile(fixture('store-v1.db'), path)
      return new SqliteStore({ path })
    },
  ],
  [
    'file',
    async () => {
      const directory = join(await tempDir(), 'store')
      await cp(fixture('file-v1'), directory, { recursive: true })
      return new FileStore({ directory })
    },
  ],
  [
    'postgres',
    async () => {
      const schema = pg.freshSchema()
      const pool = pg.pool()
      const sql = (await readFile(fixture('postgres-v1.sql'), 'utf8')).replaceAll(SCHEMA_PLACEHOLDER, schema)
      await pool.query(`CREATE SCHEMA "${schema}"`)
      for (const statement of sql.split(';\n').filter((text) => text.trim() !== '')) await pool.query(statement)
      await pool.end?.()
      return pg.openStore(schema)
    },
  ],
]

describe.each(backends)('a %s store written in format v1', (name, open) => {
  it("reads the runner's run: every phase in order, its journal and its terminal record, and resumes it as finished", async () => {
    const store = await open()
    try {
      const history = await store.listCheckpoints({ runId: 'runner-v1' })
      expect(history.map((checkpoint) => checkpoint.phase)).toEqual(RUNNER_PHASES)
      expect(history.map((checkpoint) => checkpoint.seq)).toEqual([10, 9, 8, 7, 6, 5, 4, 3, 2, 1])
      expect(history.slice(0, -1).map((checkpoint) => checkpoint.parentId)).toEqual(history.slice(1).map((checkpoint) => checkpoint.id))
      const [effect] = await store.listEffects('runner-v1')
      expect(effect).toMatchObject({ callId: 'call-1', name: 'lookup', status: 'succeeded' })
      expect(JSON.stringify(effect!.output)).toContain(LOOKUP_RESULT.slice(0, 60))
      const records = await store.loadRun('runner-v1')
      expect(records).toHaveLength(10)
      expect(records.at(-1)!.payload).toMatchObject({ state: 'completed', final_text: 'Lima is sunny.' })
      const agent = new Agent({ name: 'v1-agent', model: new ScriptedModel([], { modelId: 'scripted:v1' }), tools: [lookupTool()], systemPrompt: 'Be brief.' })
      const again = await new Runner({ store }).resume(agent, { runId: 'runner-v1' })
      expect(again.fromTerminalCheckpoint).toBe(true)
      expect(again.result?.toString()).toBe('Lima is sunny.')
    } finally {
      await store.close()
    }
  })

  it("reads a store user's records (lists, metadata, pending writes) and goes on writing after them", async () => {
    const store = await open()
    try {
      expect(await store.getRun('records-v1')).toMatchObject({ name: 'records', workflowName: 'fixture-flow', metadata: { owner: 'v1' }, lastSeq: 3 })
      const records = await store.loadRun<{ messages: unknown[]; n: number }>('records-v1')
      expect(records.map((record) => [record.phase, record.metadata, record.payload.n])).toEqual([
        ['step-1', { step: 1 }, 1],
        ['step-2', { step: 2 }, 2],
        ['step-3', { step: 3 }, 3],
      ])
      records.forEach((record, k) => expect(record.payload.messages).toEqual(conversation((k + 1) * 2)))
      const latest = records[2]!
      expect(await store.listPendingWrites('records-v1', [latest.id])).toMatchObject([{ taskId: 't1', index: 0, channel: 'out', value: { done: true } }])
      const next = await store.save({ runId: 'records-v1', kind: 'note', phase: 'step-4', payload: { messages: conversation(8), n: 4 } })
      expect(await store.load(next)).toMatchObject({ seq: 4, parentId: latest.id, payload: { messages: conversation(8), n: 4 } })
    } finally {
      await store.close()
    }
  })

  it('is migrated on open: its run events (and timers, where the store keeps them) work after', async () => {
    const store = await open()
    try {
      const cursors = await store.events!.append('events-v2', [{ type: 'note', n: 1 }])
      expect(await store.events!.read('events-v2')).toEqual([{ cursor: cursors[0], event: { type: 'note', n: 1 } }])
      if (name === 'file') expect(store.waits).toBeUndefined()
      else {
        await store.waits!.setTimer('runner-v1', 1_000)
        expect(await store.waits!.getTimer('runner-v1')).toBe(1_000)
      }
    } finally {
      await store.close()
    }
  })
})

describe('the v1 fixture of SQLite', () => {
  it('records schema version 1 alone', () => {
    const db = new Database(fixture('store-v1.db'), { readonly: true })
    try {
      expect(db.prepare('SELECT version FROM cairn_migrations').pluck().all()).toEqual([1])
    } finally {
      db.close()
    }
  })

  it('is at version 2 once opened, with the tables of the event log and of time', async () => {
    const path = join(await tempDir(), 'cairn.db')
    await copyFile(fixture('store-v1.db'), path)
    await new SqliteStore({ path }).close()
    const db = new Database(path, { readonly: true })
    try {
      expect(db.prepare('SELECT version FROM cairn_migrations ORDER BY version').pluck().all()).toEqual([1, 2])
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all()
      expect(tables).toEqual(expect.arrayContaining(['run_events', 'cairn_timers', 'cairn_events', 'cairn_waits', 'cairn_schedules']))
    } finally {
      db.close()
    }
  })
})
