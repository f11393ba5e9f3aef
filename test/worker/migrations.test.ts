import { spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { POSTGRES_MIGRATIONS, migratePostgres } from '../../src/postgres.js'
import { SQLITE_MIGRATIONS, SqliteStore, migrateSqlite } from '../../src/sqlite.js'
import { postgresTarget } from '../fixtures/postgres-target.js'

// Migration 2 (the worker layer's columns and claim index) applied to a database written at
// migration 1, by six processes starting at once: exactly one applies it.
const target = await postgresTarget()
afterAll(() => target.close())

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** Run `script` (an ES module body) in six processes that start migrating at the same instant; their stdout, parsed. */
async function race(script: (startAt: number) => string): Promise<unknown[]> {
  const startAt = Date.now() + 2500
  const exits = await Promise.all(
    Array.from({ length: 6 }, () => {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script(startAt)], { stdio: ['ignore', 'pipe', 'pipe'] })
      let stdout = ''
      let stderr = ''
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
      return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr })))
    }),
  )
  for (const exit of exits) expect(exit, exit.stderr).toMatchObject({ code: 0 })
  return exits.map((exit) => JSON.parse(exit.stdout) as unknown)
}

describe('migrations 2 and 3 on a database at migration 1', () => {
  it('SQLite: six processes opening it at once apply them exactly once; old runs keep their data', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-migrate-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    const path = join(dir, 'cairn.db')
    const old = new Database(path)
    old.pragma('journal_mode = WAL')
    expect(migrateSqlite(old, SQLITE_MIGRATIONS.slice(0, 1))).toEqual([1])
    old
      .prepare(`INSERT INTO runs (run_id, status, name, thread_id, workflow_name, config_signature, last_seq, created_at, updated_at, metadata) VALUES ('old', 'running', 'legacy', NULL, NULL, NULL, 0, 1, 1, '{}')`)
      .run()
    old.close()

    const entry = fileURLToPath(new URL('../../src/sqlite.ts', import.meta.url))
    const applied = await race(
      (startAt) => `
        const { default: Database } = await import('better-sqlite3')
        const { migrateSqlite } = await import(${JSON.stringify(entry)})
        const db = new Database(${JSON.stringify(path)})
        db.pragma('busy_timeout = 10000')
        await new Promise((resolve) => setTimeout(resolve, ${startAt} - Date.now()))
        process.stdout.write(JSON.stringify(migrateSqlite(db)))
        db.close()
      `,
    )
    expect(applied.sort((a, b) => (b as number[]).length - (a as number[]).length)).toEqual([[2, 3], [], [], [], [], []])

    const store = new SqliteStore({ path })
    cleanups.push(() => store.close())
    expect(await store.getRun('old')).toMatchObject({ status: 'running', name: 'legacy' })
    expect(await store.leases!.getLease('old')).toEqual({ runId: 'old', queue: null, priority: 0, owner: null, epoch: 0, leaseExpiresAt: null, recoveries: 0, cancelRequested: false })
    // A run from before the worker layer was never enqueued: no worker claims it.
    await store.leases!.enqueue({ runId: 'new' })
    expect((await store.leases!.claim({ owner: 'w', limit: 5, leaseMs: 1000 })).map((c) => c.run.runId)).toEqual(['new'])
  }, 30_000)

  it.skipIf(target.skipChildProcesses !== undefined)('Postgres: six processes starting at once apply them exactly once; old runs keep their data', async () => {
    // Skipped on PGlite: it lives inside one process, so no other process can race on it.
    const schema = target.freshSchema()
    const pool = target.pool()
    cleanups.push(async () => pool.end?.())
    expect(await migratePostgres(pool, schema, POSTGRES_MIGRATIONS.slice(0, 1))).toEqual([1])
    await target.sql(
      `INSERT INTO "${schema}".runs (run_id, status, name, thread_id, workflow_name, config_signature, last_seq, created_at, updated_at, metadata) VALUES ('old', 'running', 'legacy', NULL, NULL, NULL, 0, 1, 1, '{}')`,
    )
    const entry = fileURLToPath(new URL('../../src/postgres.ts', import.meta.url))
    const applied = await race(
      (startAt) => `
        const { migratePostgres } = await import(${JSON.stringify(entry)})
        const { default: pg } = await import('pg')
        const pool = new pg.Pool({ connectionString: ${JSON.stringify(target.connectionString)} })
        await new Promise((resolve) => setTimeout(resolve, ${startAt} - Date.now()))
        process.stdout.write(JSON.stringify(await migratePostgres(pool, ${JSON.stringify(schema)})))
        await pool.end()
      `,
    )
    expect(applied.sort((a, b) => (b as number[]).length - (a as number[]).length)).toEqual([[2, 3], [], [], [], [], []])
    expect((await target.sql(`SELECT version FROM "${schema}".cairn_migrations ORDER BY version`)).map((row) => row.version)).toEqual([1, 2, 3])

    const store = target.openStore(schema, { onWarning: () => {} })
    cleanups.push(() => store.close())
    expect(await store.getRun('old')).toMatchObject({ status: 'running', name: 'legacy' })
    expect(await store.leases!.getLease('old')).toEqual({ runId: 'old', queue: null, priority: 0, owner: null, epoch: 0, leaseExpiresAt: null, recoveries: 0, cancelRequested: false })
    await store.leases!.enqueue({ runId: 'new' })
    expect((await store.leases!.claim({ owner: 'w', limit: 5, leaseMs: 1000 })).map((c) => c.run.runId)).toEqual(['new'])
  }, 30_000)
})
