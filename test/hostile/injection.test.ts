import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { CairnError, FileStore, type CheckpointStore } from '../../src/index.js'
import { PostgresStore } from '../../src/postgres.js'
import { SqliteStore } from '../../src/sqlite.js'
import { postgresTarget } from '../fixtures/postgres-target.js'

/** Strings an attacker might put in any name Cairn stores or queries by. */
const HOSTILE = [
  "'; DROP TABLE runs; --",
  "x' OR '1'='1",
  '" OR 1=1 --',
  "') OR ('a'='a",
  "'||(SELECT pg_sleep(5))||'",
  '%',
  '_',
  '*',
  '\\',
  '$1',
  '; DELETE FROM checkpoints',
  '..',
  '../escape',
  '../../../../tmp/cairn-escape',
  '/etc/passwd',
  'C:\\Windows\\system32',
  'a/b',
  'a\\b',
  'nul\u0000byte',
  'CON',
  'NUL',
  'aux.txt',
  'COM1',
  '.',
  '.hidden',
  '-rf',
  'x'.repeat(300),
  'x'.repeat(100_000),
  '',
  ' ',
  'ünïcødé 🚀',
  'line\nbreak',
  '__proto__',
  'constructor',
]

interface Backend {
  name: string
  open(): Promise<{ store: CheckpointStore; tables: () => Promise<string[]>; outside: () => string[]; close: () => Promise<void> }>
}

const dirs: string[] = []
afterAll(async () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  await (await postgresTarget()).close()
})

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-hostile-'))
  dirs.push(dir)
  return dir
}

const BACKENDS: Backend[] = [
  {
    name: 'SQLite',
    async open() {
      const dir = tempDir()
      const store = new SqliteStore({ path: join(dir, 'cairn.db') })
      const Database = (await import('better-sqlite3')).default
      return {
        store,
        tables: async () => {
          const db = new Database(join(dir, 'cairn.db'), { readonly: true })
          try {
            return (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]).map((r) => r.name)
          } finally {
            db.close()
          }
        },
        outside: () => readdirSync(dir).filter((name) => !name.startsWith('cairn.db')),
        close: () => store.close(),
      }
    },
  },
  {
    name: 'file store',
    async open() {
      const dir = tempDir()
      const store = new FileStore({ directory: join(dir, 'store') })
      return { store, tables: async () => readdirSync(join(dir, 'store')).sort(), outside: () => readdirSync(dir).filter((name) => name !== 'store'), close: () => store.close() }
    },
  },
  {
    name: 'Postgres',
    async open() {
      const target = await postgresTarget()
      const schema = target.freshSchema()
      const store = target.openStore(schema)
      return {
        store,
        tables: async () => (await target.sql('SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name', [schema])).map((r) => String(r.table_name)),
        outside: () => [],
        close: () => store.close(),
      }
    },
  },
]

/** Run `work`: a refusal must be a CairnError; anything else fails the test. Returns whether it was accepted. */
async function acceptedOrRefused(work: () => Promise<unknown>): Promise<boolean> {
  try {
    await work()
    return true
  } catch (err) {
    expect(err, String(err)).toBeInstanceOf(CairnError)
    return false
  }
}

describe.each(BACKENDS)('hostile names on $name', (backend) => {
  it('run ids, thread ids, run names, workflow names, kinds, phases and metadata keys are stored and matched exactly, or refused with a CairnError', async () => {
    const { store, tables, outside, close } = await backend.open()
    try {
      await store.save({ runId: 'sentinel', kind: 'k', phase: 'p', workflowName: 'wf', metadata: { a: 1 }, payload: { keep: true } })
      const tablesBefore = await tables()
      let accepted = 0
      for (const [i, s] of HOSTILE.entries()) {
        if (await acceptedOrRefused(() => store.createRun({ runId: s }))) {
          accepted++
          expect((await store.getRun(s))?.runId).toBe(s)
        }
        const runId = `hostile-${i}`
        const named = await acceptedOrRefused(() => store.createRun({ runId, threadId: s, name: s, workflowName: s, metadata: { [s]: s } }))
        if (named) {
          accepted++
          const run = (await store.getRun(runId))!
          expect([run.threadId, run.name, run.workflowName, run.metadata[s]]).toEqual([s, s, s, s])
          expect((await store.listRuns({ threadId: s })).map((r) => r.runId)).toEqual([runId])
          expect((await store.listRuns({ workflowName: s })).map((r) => r.runId)).toEqual([runId])
        }
        let id: string | undefined
        if (await acceptedOrRefused(async () => (id = await store.save({ runId: `${runId}-cp`, kind: s, phase: s, workflowName: s, metadata: { [s]: s }, payload: { [s]: s } })))) {
          accepted++
          const record = await store.load(id!)
          expect([record.kind, record.phase, record.workflowName, record.metadata[s], (record.payload as Record<string, unknown>)[s]]).toEqual([s, s, s, s, s])
          expect((await store.listCheckpoints({ workflowName: s })).map((c) => c.id)).toEqual([id])
          expect((await store.getLatest({ workflowName: s }))?.id).toBe(id)
        }
        await acceptedOrRefused(() => store.listCheckpoints({ runId: s }))
        await acceptedOrRefused(() => store.getLatest({ runId: s }))
      }
      expect(accepted).toBeGreaterThan(HOSTILE.length)
      expect(await tables()).toEqual(tablesBefore)
      expect(outside()).toEqual([])
      expect((await store.load((await store.getLatest({ runId: 'sentinel' }))!.id)).payload).toEqual({ keep: true })
      expect((await store.listRuns({ workflowName: 'wf' })).map((r) => r.runId)).toEqual(['sentinel'])
      expect((await store.listCheckpoints({ workflowName: 'wf' })).map((c) => c.runId)).toEqual(['sentinel'])
    } finally {
      await close()
    }
  })

  it('queue names are stored and claimed exactly, or refused with a CairnError', async (ctx) => {
    const { store, tables, close } = await backend.open()
    try {
      const leases = (store as { leases?: NonNullable<SqliteStore['leases']> }).leases
      if (!leases) ctx.skip()
      await leases!.enqueue({ runId: 'sentinel-job', queue: 'default' })
      const tablesBefore = await tables()
      for (const [i, s] of HOSTILE.entries()) {
        const runId = `job-${i}`
        if (!(await acceptedOrRefused(() => leases!.enqueue({ runId, queue: s, threadId: `t-${i}` })))) continue
        const claimed = await leases!.claim({ owner: `worker-${i}`, limit: 50, leaseMs: 60_000, queues: [s], queueLimits: { [s]: 50 } })
        expect(claimed.map((c) => c.run.runId)).toEqual([runId])
      }
      expect(await tables()).toEqual(tablesBefore)
      const rest = await leases!.claim({ owner: 'last', limit: 50, leaseMs: 60_000, queues: ['default'] })
      expect(rest.map((c) => c.run.runId)).toEqual(['sentinel-job'])
    } finally {
      await close()
    }
  })
})

describe('Postgres schema names', () => {
  it('every schema name that is not a plain lowercase identifier is refused with a CairnError before any statement runs', async () => {
    const target = await postgresTarget()
    const plain = /^[a-z_][a-z0-9_]{0,62}$/
    for (const s of [...HOSTILE, 'cairn; DROP SCHEMA public CASCADE', 'Cairn', 'pg_catalog', '1abc'].filter((name) => !plain.test(name) || name.startsWith('pg_'))) {
      let err: unknown
      try {
        const store = target.kind === 'server' ? new PostgresStore({ connectionString: target.connectionString! }, { schema: s }) : target.openStore(s)
        err = await store.listRuns().then(
          () => undefined,
          (e: unknown) => e,
        )
        await store.close()
      } catch (e) {
        err = e
      }
      expect(err, `schema ${JSON.stringify(s.slice(0, 40))}`).toBeInstanceOf(CairnError)
      expect((err as CairnError).code).toBe('invalid_argument')
    }
    const schemas = await target.sql("SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE '%drop%' OR schema_name LIKE '%;%'")
    expect(schemas).toEqual([])
  })
})
