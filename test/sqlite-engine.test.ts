import { spawn } from 'node:child_process'
import { existsSync, statSync } from 'node:fs'
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { SchemaVersionError, StoreError } from '../src/index.js'
import { MemoryEngine } from '../src/engine.js'
import { type CheckpointRow, type CommitRequest, type EffectRow, type RunRow, type StorageEngine } from '../src/engine.js'
import { SQLITE_MIGRATIONS, SqliteEngine, SqliteStore, migrateSqlite } from '../src/sqlite.js'

/** An empty database: one 8 KiB page for each table and index. */
const FIXED_SCHEMA_BYTES = 16 * 8192

let dir = ''
let dbPath = ''
const toClose: { close(): unknown }[] = []

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-sqlite-'))
  dbPath = join(dir, 'cairn.db')
})

afterEach(async () => {
  for (const handle of toClose.splice(0).reverse()) await handle.close()
  await rm(dir, { recursive: true, force: true })
})

/** A store closed after the test. */
function openStore(options: { synchronous?: 'full' | 'normal' } = {}): SqliteStore {
  const store = new SqliteStore({ path: dbPath, ...options })
  toClose.push(store)
  return store
}

/** A plain better-sqlite3 connection on the test's file, to look at what the engine wrote. */
function inspect(): Database.Database {
  const db = new Database(dbPath)
  toClose.push(db)
  return db
}

function count(db: Database.Database, sql: string, ...params: unknown[]): number {
  return db.prepare(sql).pluck().get(...params) as number
}

describe('SQLite schema and connection', () => {
  it('migrations create the tables once and record each version in cairn_migrations', async () => {
    const store = openStore()
    await store.close()
    const db = inspect()
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all()
    expect(tables).toEqual(['cairn_events', 'cairn_migrations', 'cairn_schedules', 'cairn_timers', 'cairn_waits', 'checkpoints', 'effects', 'key_checks', 'list_items', 'pending_writes', 'run_events', 'runs'])
    const applied = db.prepare('SELECT version, name, applied_at AS appliedAt FROM cairn_migrations ORDER BY version').all()
    expect(applied).toEqual(SQLITE_MIGRATIONS.map((step) => ({ version: step.version, name: step.name, appliedAt: expect.any(Number) as unknown })))

    // Reopening applies nothing again: the same rows, and no step left to run.
    const again = openStore()
    await again.save({ runId: 'r1', kind: 'demo', phase: 'p', payload: { n: 1 } })
    await again.close()
    expect(db.prepare('SELECT version, name, applied_at AS appliedAt FROM cairn_migrations ORDER BY version').all()).toEqual(applied)
    expect(migrateSqlite(db)).toEqual([])
  })

  it('processes opening a new file at the same time migrate it exactly once', async () => {
    const fixture = fileURLToPath(new URL('./fixtures/open-sqlite.ts', import.meta.url))
    // Every child loads its code first, then opens the file at the same agreed instant.
    const startAt = Date.now() + 2500
    const script = `
      const { openStore } = await import(${JSON.stringify(fixture)})
      await new Promise((resolve) => setTimeout(resolve, ${startAt} - Date.now()))
      const store = await openStore(${JSON.stringify(dir)})
      await store.save({ runId: 'child-' + process.pid, kind: 'demo', phase: 'p', payload: { pid: process.pid } })
      await store.close()
    `
    const children = Array.from({ length: 4 }, () => {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script], { stdio: ['ignore', 'ignore', 'pipe'] })
      let stderr = ''
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
      return new Promise<{ code: number | null; stderr: string }>((resolve) => child.on('exit', (code) => resolve({ code, stderr })))
    })
    for (const exit of await Promise.all(children)) expect(exit, exit.stderr).toMatchObject({ code: 0 })
    const db = inspect()
    expect(db.prepare('SELECT version FROM cairn_migrations ORDER BY version').pluck().all()).toEqual(SQLITE_MIGRATIONS.map((step) => step.version))
    expect(count(db, "SELECT count(*) FROM runs WHERE run_id LIKE 'child-%'")).toBe(4)
  }, 30_000)

  it('waits out another process writing the new file before it switches it to WAL, up to busyTimeoutMs', async () => {
    // SQLite answers SQLITE_BUSY at once (no busy wait) to a switch to WAL while another
    // connection holds a write lock on a file still in rollback mode: a process opening a new
    // file while another one is creating it.
    const holder = await holdWriteLock(dbPath)
    const opening = configureInChild(dbPath, 5000)
    await new Promise((resolve) => setTimeout(resolve, 1500))
    const released = holder.release()
    const waited = await opening
    expect(waited).toMatchObject({ journalMode: 'wal' })
    expect(waited.ms).toBeGreaterThan(0)
    expect(await released).toBe(0)

    // Held past the busy timeout: SQLite's own busy error, not a hang.
    const other = join(dir, 'other.db')
    const longer = await holdWriteLock(other)
    expect((await configureInChild(other, 200)).error).toMatch(/locked|busy/i)
    expect(await longer.release()).toBe(0)
  }, 20_000)

  it('refuses a database migrated by a newer Cairn', async () => {
    await openStore().close()
    const db = inspect()
    db.prepare("INSERT INTO cairn_migrations (version, name, applied_at) VALUES (99, 'from the future', 0)").run()
    let error: unknown
    try {
      openStore()
    } catch (err) {
      error = err
    }
    expect(error).toBeInstanceOf(SchemaVersionError)
    expect((error as Error).message).toContain('schema version 99')
  })

  it('opens in WAL mode with 8 KiB pages, creating the parent directory', async () => {
    dbPath = join(dir, 'nested', '.cairn', 'cairn.db')
    const store = openStore()
    await store.save({ runId: 'r1', kind: 'demo', phase: 'p', payload: {} })
    expect(existsSync(dbPath)).toBe(true)
    const db = inspect()
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal')
    expect(db.pragma('page_size', { simple: true })).toBe(8192)
  })

  it('applies synchronous FULL and a 5 s busy timeout by default, and the options when given', async () => {
    const defaults = new Database(dbPath)
    openStoreOn(defaults)
    expect(defaults.pragma('synchronous', { simple: true })).toBe(2)
    expect(defaults.pragma('busy_timeout', { simple: true })).toBe(5000)
    expect(defaults.pragma('wal_autocheckpoint', { simple: true })).toBe(256)
    expect(defaults.pragma('journal_size_limit', { simple: true })).toBe(4 * 1024 * 1024)

    const tuned = new Database(dbPath)
    openStoreOn(tuned, { synchronous: 'normal', busyTimeoutMs: 250 })
    expect(tuned.pragma('synchronous', { simple: true })).toBe(1)
    expect(tuned.pragma('busy_timeout', { simple: true })).toBe(250)
  })

  it('reports a file it cannot open as a StoreError naming the path', () => {
    dbPath = dir // a directory is not a database file
    expect(() => openStore()).toThrow(StoreError)
    expect(() => openStore()).toThrow(dir)
  })

  it('close() checkpoints the WAL into the database file', async () => {
    const store = openStore()
    await store.save({ runId: 'r1', kind: 'demo', phase: 'p', payload: { n: 1 } })
    await store.close()
    const wal = `${dbPath}-wal`
    expect(!existsSync(wal) || statSync(wal).size === 0).toBe(true)
  })
})

describe('SqliteStore', () => {
  it('round-trips save, load, getLatest and listCheckpoints', async () => {
    const store = openStore()
    const payload = { at: new Date(1_700_000_000_000), tags: new Set(['a']), counts: new Map([['x', 2n]]), text: 'hé' }
    const first = await store.save({ runId: 'r1', kind: 'agent', phase: 'after_model', metadata: { step: 1 }, payload })
    const second = await store.save({ runId: 'r1', kind: 'agent', phase: 'after_tools', terminal: true, payload: { done: true } })
    const third = await store.save({ runId: 'r2', kind: 'workflow', phase: 'superstep', workflowName: 'wf', payload: { step: 0 } })

    const loaded = await store.load(first)
    expect(loaded).toMatchObject({ id: first, runId: 'r1', seq: 1, parentId: null, terminal: false, metadata: { step: 1 }, payload })
    expect(await store.getLatest({ runId: 'r1' })).toMatchObject({ id: second, seq: 2, parentId: first, terminal: true, payload: { done: true } })
    expect(await store.getLatest({ workflowName: 'wf' })).toMatchObject({ id: third, payload: { step: 0 } })
    expect((await store.listCheckpoints({ runId: 'r1' })).map((cp) => cp.id)).toEqual([second, first])
    expect((await store.listCheckpoints({ runId: 'r1', before: second })).map((cp) => cp.id)).toEqual([first])
    expect(await store.listCheckpoints({ runId: 'r1', before: 'no-such-checkpoint' })).toEqual([])
    expect(await store.getRun('r1')).toMatchObject({ lastSeq: 2, status: 'running' })
  })

  it('stores a growing message list once: 200 saves keep 200 item rows, not the quadratic sum', async () => {
    const store = openStore({ synchronous: 'normal' })
    const messages: { role: string; content: { text: string }[] }[] = []
    const ids: string[] = []
    let largestWal = 0
    for (let i = 0; i < 200; i++) {
      messages.push({ role: i % 2 === 0 ? 'user' : 'assistant', content: [{ text: `m${i}: ${'lorem ipsum '.repeat(84)}` }] })
      ids.push(await store.save({ runId: 'grow', kind: 'agent', phase: 'after_model', payload: { messages, i } }))
      largestWal = Math.max(largestWal, existsSync(`${dbPath}-wal`) ? statSync(`${dbPath}-wal`).size : 0)
    }
    // Checkpoints every 256 pages keep the WAL near 2 MiB, not SQLite's default 8 MB (at 8 KiB pages).
    expect(largestWal).toBeGreaterThan(0)
    expect(largestWal).toBeLessThan(2.5 * 1024 * 1024)
    expect((await store.getLatest<{ messages: unknown[] }>({ runId: 'grow' }))?.payload.messages).toEqual(messages)
    expect((await store.load<{ messages: unknown[] }>(ids[49]!)).payload.messages).toEqual(messages.slice(0, 50))
    await store.close()

    const db = inspect()
    expect(count(db, 'SELECT count(*) FROM list_items')).toBe(200)
    expect(count(db, 'SELECT count(*) FROM checkpoints')).toBe(200)
    db.close()
    const listBytes = Buffer.byteLength(JSON.stringify(messages))
    let stored = 0
    for (const name of await readdir(dir)) stored += (await stat(join(dir, name))).size
    // Linear: the items once plus ~400 bytes of row per checkpoint, and the fixed cost of the
    // schema (a page per table and index). Stored whole every time, it would be ~100x the list.
    expect(stored).toBeLessThan(2 * listBytes + FIXED_SCHEMA_BYTES)
  }, 30_000)

  it('two handles on one file see each other’s writes', async () => {
    const a = openStore()
    const b = openStore()
    const fromA = await a.save({ runId: 'shared', kind: 'demo', phase: 'p', payload: { by: 'a' } })
    expect(await b.load(fromA)).toMatchObject({ payload: { by: 'a' } })
    // b appends after a's checkpoint; a's cached seq is stale and must catch up, not fail.
    const fromB = await b.save({ runId: 'shared', kind: 'demo', phase: 'p', payload: { by: 'b' } })
    const again = await a.save({ runId: 'shared', kind: 'demo', phase: 'p', payload: { by: 'a2' } })
    expect((await b.listCheckpoints({ runId: 'shared' })).map((cp) => [cp.id, cp.seq])).toEqual([
      [again, 3],
      [fromB, 2],
      [fromA, 1],
    ])

    await a.recordEffectIntent({ runId: 'shared', callId: 'c1', name: 'send', inputHash: 'h', idempotencyKey: 'k' })
    expect(await b.recordEffectIntent({ runId: 'shared', callId: 'c1', name: 'send', inputHash: 'h', idempotencyKey: 'k' })).toMatchObject({ attempts: 2 })
    expect(await b.completeEffect({ runId: 'shared', callId: 'c1', status: 'succeeded', output: 'first' })).toMatchObject({ recorded: true })
    expect(await a.completeEffect({ runId: 'shared', callId: 'c1', status: 'failed', output: 'second' })).toMatchObject({
      recorded: false,
      effect: { status: 'succeeded', output: 'first' },
    })
  })
})

describe('SqliteEngine', () => {
  function openEngine(): SqliteEngine {
    const engine = new SqliteEngine({ database: new Database(dbPath) })
    toClose.push(engine)
    return engine
  }

  it('commit writes nothing when the seq is stale, the id is taken or a list has moved on', async () => {
    const engine = openEngine()
    expect(await engine.commit(commitOf({ id: 'c1', seq: 1, appends: [{ listId: 'L', expectedLength: 0, items: ['"a"'] }] }))).toEqual({ ok: true })
    const db = inspect()
    const snapshot = () => [count(db, 'SELECT count(*) FROM checkpoints'), count(db, 'SELECT count(*) FROM list_items'), (db.prepare('SELECT last_seq, updated_at FROM runs').get() as object)]
    const before = snapshot()
    const appendB = [{ listId: 'L', expectedLength: 1, items: ['"b"'] }]
    expect(await engine.commit(commitOf({ id: 'c2', seq: 1, appends: appendB }))).toEqual({ ok: false, reason: 'stale_seq', lastSeq: 1 })
    expect(await engine.commit(commitOf({ id: 'c1', seq: 2, appends: appendB }))).toEqual({ ok: false, reason: 'duplicate_id' })
    expect(
      await engine.commit(commitOf({ id: 'c2', seq: 2, appends: [...appendB, { listId: 'L', expectedLength: 0, items: ['"x"'] }] })),
    ).toEqual({ ok: false, reason: 'list_conflict' })
    expect(snapshot()).toEqual(before)
    expect(await engine.commit(commitOf({ id: 'c2', seq: 2, appends: appendB }))).toEqual({ ok: true })
    expect(await engine.readLists('run', [{ id: 'L', n: 2 }])).toEqual([['"a"', '"b"']])
  })

  it('deleteRun removes every row of the run and nothing else', async () => {
    const engine = openEngine()
    for (const runId of ['gone', 'kept']) {
      await engine.commit(commitOf({ runId, id: `${runId}-c1`, seq: 1, appends: [{ listId: 'L', expectedLength: 0, items: ['1', '2'] }] }))
      await engine.commit({ rows: [], appends: [], run: runOf({ runId }), effects: { intents: [effectOf({ runId, callId: 'c' })] } })
    }
    expect(await engine.deleteRun('gone')).toBe(true)
    expect(await engine.deleteRun('gone')).toBe(false)
    const db = inspect()
    for (const table of ['runs', 'checkpoints', 'list_items', 'effects']) {
      expect(count(db, `SELECT count(*) FROM ${table} WHERE run_id = 'gone'`), table).toBe(0)
      expect(count(db, `SELECT count(*) FROM ${table} WHERE run_id = 'kept'`), table).toBeGreaterThan(0)
    }
  })

  it('answers every query exactly as the memory engine does', async () => {
    const sqlite = openEngine()
    const memory = new MemoryEngine()
    const engines: StorageEngine[] = [memory, sqlite]
    const both = async <T>(fn: (engine: StorageEngine) => Promise<T>): Promise<T> => {
      const [expected, actual] = await Promise.all(engines.map(fn))
      expect(actual).toEqual(expected)
      return actual as T
    }

    // Runs with tied creation times, and runs created by their first commit.
    await both((e) => e.insertRun(runOf({ runId: 'ra', createdAt: 100, status: 'completed', threadId: 't1' })))
    await both((e) => e.insertRun(runOf({ runId: 'rb', createdAt: 100, workflowName: 'wf', threadId: 't1' })))
    await both((e) => e.insertRun(runOf({ runId: 'rc', createdAt: 300, status: 'failed' })))
    await both((e) => e.insertRun(runOf({ runId: 'ra', createdAt: 999 })))
    const commits: CommitRequest[] = [
      commitOf({ runId: 'ra', id: 'a1', seq: 1, createdAt: 150, appends: [{ listId: 'La', expectedLength: 0, items: ['1', '2', '3'] }] }),
      commitOf({ runId: 'ra', id: 'a2', seq: 2, createdAt: 150, lists: '[{"id":"La","n":4}]', appends: [{ listId: 'La', expectedLength: 3, items: ['4'] }] }),
      commitOf({ runId: 'ra', id: 'a5', seq: 5, createdAt: 170, terminal: true, lists: '[{"id":"Lb","n":1}]', appends: [{ listId: 'Lb', expectedLength: 0, items: ['x'] }] }),
      commitOf({ runId: 'rb', id: 'b1', seq: 1, createdAt: 150, workflowName: 'wf' }),
      commitOf({ runId: 'rb', id: 'b2', seq: 2, createdAt: 160, workflowName: 'wf' }),
      commitOf({ runId: 'rd', id: 'd1', seq: 1, createdAt: 160, workflowName: 'wf' }),
      // Within a run createdAt never decreases with seq: the memory engine's cross-run order is
      // only a total order then (it compares seq alone within a run, createdAt across runs).
      commitOf({ runId: 'rd', id: 'd2', seq: 2, createdAt: 165, workflowName: 'other' }),
      commitOf({ runId: 're', id: 'e1', seq: 3, createdAt: 50 }),
    ]
    for (const request of commits) await both((e) => e.commit(request))
    await both((e) => e.commit(commits[0]!))
    await both((e) => e.updateRun('rb', { status: 'paused', name: null, metadata: '{"k":1}', updatedAt: 500 }))
    await both((e) => e.updateRun('rc', { name: 'named', threadId: null, updatedAt: 501 }))
    await both((e) => e.updateRun('missing', { status: 'paused', updatedAt: 1 }))

    const runIds = ['ra', 'rb', 'rc', 'rd', 're', 'unknown']
    const filters = [{}, { status: 'running' as const }, { status: ['completed', 'failed'] as const }, { status: [] }, { workflowName: 'wf' }, { threadId: 't1' }]
    for (const filter of filters) {
      for (const before of [undefined, ...runIds]) {
        for (const limit of [undefined, 1, 2]) {
          await both((e) => e.listRuns({ ...filter, ...(before === undefined ? {} : { before }), ...(limit === undefined ? {} : { limit }) }))
        }
      }
    }
    const checkpointIds = ['a1', 'a2', 'a5', 'b1', 'b2', 'd1', 'd2', 'e1', 'unknown']
    for (const filter of [{}, { runId: 'ra' }, { runId: 'rd' }, { workflowName: 'wf' }, { runId: 'rd', workflowName: 'wf' }, { runId: 'unknown' }]) {
      for (const before of [undefined, ...checkpointIds]) {
        for (const limit of [undefined, 1, 3]) {
          await both((e) => e.listCheckpoints({ ...filter, ...(before === undefined ? {} : { before }), ...(limit === undefined ? {} : { limit }) }))
        }
      }
    }
    for (const query of [{ runId: 'ra' }, { runId: 'rd' }, { runId: 'unknown' }, { workflowName: 'wf' }, { workflowName: 'other' }, { workflowName: 'none' }]) {
      await both((e) => e.getLatest(query))
    }
    for (const runId of runIds) await both((e) => e.getRun(runId))
    await both((e) => e.getCheckpoints(['a5']))
    await both((e) => e.readLists('ra', [{ id: 'La', n: 2 }, { id: 'La', n: 9 }, { id: 'Lb', n: 1 }, { id: 'nope', n: 1 }]))

    // Deleting checkpoints drops the list items no remaining checkpoint refers to.
    await both((e) => e.deleteCheckpoints('ra', ['a2', 'a5', 'b1', 'nope']))
    await both((e) => e.readLists('ra', [{ id: 'La', n: 9 }, { id: 'Lb', n: 9 }]))
    await both((e) => e.listCheckpoints({ runId: 'ra' }))
    await both((e) => e.getRun('ra'))

    // The effect journal: attempts, first writer wins, startedAt order with ties.
    for (const [callId, startedAt] of [['z', 10], ['y', 5], ['x', 10], ['z', 99]] as const) {
      await both((e) => e.commit({ rows: [], appends: [], run: runOf({ runId: 'ra' }), effects: { intents: [effectOf({ runId: 'ra', callId, startedAt })] } }))
    }
    await both((e) => e.commit({ rows: [], appends: [], run: runOf({ runId: 'ra' }), effects: { completions: [{ runId: 'ra', callId: 'z', status: 'succeeded', output: '"ok"', outputHash: 'h1', completedAt: 20 }] } }))
    await both((e) => e.commit({ rows: [], appends: [], run: runOf({ runId: 'ra' }), effects: { completions: [{ runId: 'ra', callId: 'z', status: 'failed', output: '"late"', outputHash: 'h2', completedAt: 21 }] } }))
    await both((e) => e.commit({ rows: [], appends: [], run: runOf({ runId: 'ra' }), effects: { completions: [{ runId: 'ra', callId: 'missing', status: 'failed', output: '"x"', outputHash: 'h', completedAt: 22 }] } }))
    await both((e) => e.listEffects('ra'))
    await both((e) => e.listEffects('ra', ['y']))
    await both((e) => e.deleteEffects('ra'))
    await both((e) => e.listEffects('ra'))
    await both((e) => e.deleteRun('rd'))
    await both((e) => e.listCheckpoints({}))
  })
})

function openStoreOn(database: Database.Database, options: { synchronous?: 'full' | 'normal'; busyTimeoutMs?: number } = {}): SqliteStore {
  const store = new SqliteStore({ database, ...options })
  toClose.push(store)
  return store
}

function runOf(fields: Partial<RunRow> & { runId: string }): RunRow {
  return {
    status: 'running',
    name: null,
    threadId: null,
    workflowName: null,
    configSignature: null,
    lastSeq: 0,
    createdAt: 1,
    updatedAt: fields.createdAt ?? 1,
    metadata: '{}',
    ...fields,
  }
}

function commitOf(params: Partial<CheckpointRow> & { id: string; seq: number; appends?: CommitRequest['appends'] }): CommitRequest {
  const { appends = [], ...fields } = params
  const row: CheckpointRow = {
    runId: 'run',
    parentId: null,
    kind: 'demo',
    phase: 'p',
    schemaVersion: 1,
    createdAt: 10,
    workflowName: null,
    terminal: false,
    metadata: '{}',
    body: '{}',
    lists: JSON.stringify(appends.map((append) => ({ id: append.listId, n: append.expectedLength + append.items.length, h: '' }))),
    digest: 'd',
    ...fields,
  }
  return { rows: [row], appends, run: runOf({ runId: row.runId, createdAt: row.createdAt, workflowName: row.workflowName }) }
}

function effectOf(fields: Partial<EffectRow> & { runId: string; callId: string }): EffectRow {
  return {
    name: 'tool',
    inputHash: 'in',
    idempotencyKey: `${fields.runId}:${fields.callId}`,
    status: 'pending',
    output: null,
    outputHash: null,
    attempts: 1,
    startedAt: 1,
    completedAt: null,
    ...fields,
  }
}

/**
 * A child process that creates `path` in rollback mode and holds a write transaction on it until
 * released; resolves once the lock is held. `release` resolves to the child's exit code.
 */
async function holdWriteLock(path: string): Promise<{ release(): Promise<number | null> }> {
  const script = `const Database = require('better-sqlite3')
    const db = new Database(${JSON.stringify(path)})
    db.exec('CREATE TABLE IF NOT EXISTS held (a)')
    db.exec('BEGIN IMMEDIATE')
    db.exec('INSERT INTO held VALUES (1)')
    process.stdout.write('held\\n')
    process.stdin.resume()
    process.stdin.on('end', () => { db.exec('COMMIT'); db.close() })`
  const child = spawn(process.execPath, ['--eval', script], { stdio: ['pipe', 'pipe', 'inherit'] })
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
  await new Promise<void>((resolve, reject) => {
    child.stdout.once('data', () => resolve())
    child.once('exit', (code) => reject(new Error(`the lock holder exited with ${code} before holding the lock`)))
  })
  return {
    release() {
      child.stdin.end()
      return exited
    },
  }
}

/** Open `path` in a fresh process and apply the engine's connection settings: how long it took, and the journal mode or the error. */
async function configureInChild(path: string, busyTimeoutMs: number): Promise<{ ms: number; journalMode?: string; error?: string }> {
  const driver = fileURLToPath(new URL('../src/store/backends/sqlite/driver.ts', import.meta.url))
  const script = `const { default: Database } = await import('better-sqlite3')
    const { configureConnection } = await import(${JSON.stringify(driver)})
    const db = new Database(${JSON.stringify(path)})
    const started = Date.now()
    let out
    try { configureConnection(db, { busyTimeoutMs: ${busyTimeoutMs} }); out = { journalMode: db.pragma('journal_mode', { simple: true }) } }
    catch (err) { out = { error: String(err) } }
    db.close()
    process.stdout.write(JSON.stringify({ ms: Date.now() - started, ...out }))`
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  let stdout = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  await new Promise((resolve) => child.on('exit', resolve))
  return JSON.parse(stdout) as { ms: number; journalMode?: string; error?: string }
}
