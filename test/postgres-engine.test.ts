import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest'
import { CairnError, SchemaVersionError, StoreError } from '../src/index.js'
import { MemoryEngine } from '../src/engine.js'
import { type CommitRequest, type StorageEngine } from '../src/engine.js'
import { POSTGRES_MIGRATIONS, PostgresEngine, PostgresStore, migratePostgres, type PostgresPool } from '../src/postgres.js'
import { postgresDialect, postgresStatements } from '../src/store/backends/postgres/sql.js'
import { listCheckpointsSql, listRunsSql } from '../src/store/sql/engine-sql.js'
import { leaseSql } from '../src/store/leases/lease-sql.js'
import { batchOf, commitOf, effectOf, runOf } from './fixtures/engine-rows.js'
import { countingPool, failingPool } from './fixtures/pool-wrappers.js'
import { postgresTarget } from './fixtures/postgres-target.js'

// A server when one answers (or DATABASE_URL / CAIRN_TEST_PG=server), else PGlite; see postgres-target.ts.
const target = await postgresTarget()
afterAll(() => target.close())

let schema = ''
const toClose: { close(): Promise<unknown> }[] = []

beforeEach(() => {
  schema = target.freshSchema()
})

afterEach(async () => {
  for (const handle of toClose.splice(0).reverse()) await handle.close()
})

/** A store on the test's schema, closed after the test. */
function openStore(options: { schema?: string } = {}): PostgresStore {
  const store = target.openStore(options.schema ?? schema, { onWarning: () => {} })
  toClose.push(store)
  return store
}

/** A pool on the target, released after the test. */
function openPool(): PostgresPool {
  const pool = target.pool()
  toClose.push({ close: async () => pool.end?.() })
  return pool
}

const sql = (text: string, values?: unknown[]) => target.sql(text, values)
const count = async (table: string, where = 'true', values?: unknown[]) =>
  Number((await sql(`SELECT count(*) AS n FROM "${schema}".${table} WHERE ${where}`, values))[0]?.n)

describe('Postgres schema and migrations', () => {
  it('migrations create the tables once and record each version in cairn_migrations', async () => {
    await openStore().ready()
    const tables = await sql(`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, [schema])
    expect(tables.map((t) => t.name)).toEqual(['cairn_events', 'cairn_migrations', 'cairn_schedules', 'cairn_timers', 'cairn_waits', 'checkpoints', 'effects', 'key_checks', 'list_items', 'pending_writes', 'run_events', 'runs'])
    const applied = await sql(`SELECT version, name, applied_at FROM "${schema}".cairn_migrations ORDER BY version`)
    expect(applied.map(({ version, name }) => ({ version, name }))).toEqual(POSTGRES_MIGRATIONS.map(({ version, name }) => ({ version, name })))

    // Reopening applies nothing again.
    const again = openStore()
    await again.save({ runId: 'r1', kind: 'demo', phase: 'p', payload: { n: 1 } })
    expect(await sql(`SELECT version, name, applied_at FROM "${schema}".cairn_migrations ORDER BY version`)).toEqual(applied)
    expect(await migratePostgres(openPool(), schema)).toEqual([])

    // Ids sort by byte, as in every other engine, whatever the database's collation.
    const collated = await sql(
      `SELECT table_name || '.' || column_name AS name FROM information_schema.columns WHERE table_schema = $1 AND collation_name = 'C' ORDER BY 1`,
      [schema],
    )
    expect(collated.map((row) => row.name)).toEqual([
      'checkpoints.id',
      'checkpoints.parent_id',
      'checkpoints.run_id',
      'effects.call_id',
      'effects.run_id',
      'list_items.list_id',
      'list_items.run_id',
      'pending_writes.checkpoint_id',
      'pending_writes.run_id',
      'pending_writes.task_id',
      'runs.run_id',
    ])
  })

  it('the runs table carries the lease columns the worker layer fences writes on', async () => {
    await openStore().save({ runId: 'r1', kind: 'demo', phase: 'p', payload: 1 })
    const columns = await sql(
      `SELECT column_name AS name, data_type AS type, is_nullable AS nullable, column_default AS "default"
       FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'runs' AND column_name = ANY($2) ORDER BY column_name`,
      [schema, ['owner', 'lease_expires_at', 'lease_epoch', 'queue', 'priority']],
    )
    expect(columns).toEqual([
      { name: 'lease_epoch', type: 'bigint', nullable: 'NO', default: '0' },
      { name: 'lease_expires_at', type: 'timestamp with time zone', nullable: 'YES', default: null },
      { name: 'owner', type: 'text', nullable: 'YES', default: null },
      { name: 'priority', type: 'integer', nullable: 'YES', default: null },
      { name: 'queue', type: 'text', nullable: 'YES', default: null },
    ])
    expect(await sql(`SELECT owner, lease_expires_at, lease_epoch::int AS epoch FROM "${schema}".runs`)).toEqual([{ owner: null, lease_expires_at: null, epoch: 0 }])
  })

  it.skipIf(target.skipChildProcesses !== undefined)('six processes starting together migrate a new schema exactly once', async () => {
    // Skipped on PGlite: it lives inside one process, so no other process can race on it.
    const postgresEntry = fileURLToPath(new URL('../src/postgres.ts', import.meta.url))
    // Every child loads its code first, then migrates at the same agreed instant.
    const startAt = Date.now() + 2500
    const script = `
      const { migratePostgres, PostgresStore } = await import(${JSON.stringify(postgresEntry)})
      const { default: pg } = await import('pg')
      const pool = new pg.Pool({ connectionString: ${JSON.stringify(target.connectionString)} })
      await new Promise((resolve) => setTimeout(resolve, ${startAt} - Date.now()))
      const applied = await migratePostgres(pool, ${JSON.stringify(schema)})
      await pool.end()
      const store = new PostgresStore({ connectionString: ${JSON.stringify(target.connectionString)}, schema: ${JSON.stringify(schema)} })
      await store.save({ runId: 'child-' + process.pid, kind: 'demo', phase: 'p', payload: { pid: process.pid } })
      await store.close()
      process.stdout.write(JSON.stringify(applied))
    `
    const children = Array.from({ length: 6 }, () => {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script], { stdio: ['ignore', 'pipe', 'pipe'] })
      let stdout = ''
      let stderr = ''
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
      return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr })))
    })
    const exits = await Promise.all(children)
    for (const exit of exits) expect(exit, exit.stderr).toMatchObject({ code: 0 })
    const applied = exits.map((exit) => JSON.parse(exit.stdout) as number[]).sort((a, b) => b.length - a.length)
    const all = POSTGRES_MIGRATIONS.map((step) => step.version)
    expect(applied).toEqual([all, [], [], [], [], []])
    expect((await sql(`SELECT version FROM "${schema}".cairn_migrations ORDER BY version`)).map((row) => row.version)).toEqual(all)
    expect(await count('runs', "run_id LIKE 'child-%'")).toBe(6)
  }, 30_000)

  it('refuses a schema migrated by a newer Cairn', async () => {
    await openStore().ready()
    await sql(`INSERT INTO "${schema}".cairn_migrations (version, name) VALUES (99, 'from the future')`)
    const store = openStore()
    await expect(store.ready()).rejects.toBeInstanceOf(SchemaVersionError)
    await expect(store.ready()).rejects.toThrow('schema version 99')
    await expect(store.getRun('r1')).rejects.toBeInstanceOf(SchemaVersionError)
  })

  it('takes only a plain identifier as schema name, before touching the database', async () => {
    const pool = failingPool()
    for (const bad of ['', 'Cairn', 'cairn-prod', 'x; DROP TABLE runs', '"quoted"', '1st', 'pg_cairn', 'a'.repeat(64), 'café']) {
      expect(() => new PostgresStore({ pool, schema: bad }), bad).toThrow(CairnError)
      expect(() => new PostgresStore({ pool, schema: bad }), bad).toThrow('is not a plain identifier')
    }
    expect(pool.calls).toBe(0)
    const store = new PostgresStore({ pool })
    expect(store.schema).toBe('cairn')
    await store.close()
    expect(() => new PostgresStore({} as never)).toThrow('needs a connection string')
    expect(() => new PostgresStore({ pool, connectionString: 'postgresql://x' } as never)).toThrow('not both')
    // The settings as a second argument still work (deprecated).
    const legacy = new PostgresStore({ pool }, { schema: 'cairn_legacy' })
    expect(legacy.schema).toBe('cairn_legacy')
    await legacy.close()
  })

  it('reports a server it cannot reach as a StoreError naming the schema, and retries on the next call', async () => {
    const unreachable = new PostgresStore({ connectionString: 'postgresql://postgres@127.0.0.1:1/none', schema })
    toClose.push(unreachable)
    await expect(unreachable.ready()).rejects.toBeInstanceOf(StoreError)
    await expect(unreachable.ready()).rejects.toThrow(`cannot open the Postgres store in schema "${schema}"`)
    await expect(unreachable.getRun('r1')).rejects.toBeInstanceOf(StoreError)

    // A pool whose server was briefly down: the first attempt fails, the next call migrates.
    const flaky = failingPool(openPool(), 1)
    const store = new PostgresStore({ pool: flaky, schema })
    toClose.push(store)
    await expect(store.ready()).rejects.toThrow('server is restarting')
    await store.save({ runId: 'r1', kind: 'demo', phase: 'p', payload: 1 })
    expect((await store.getLatest({ runId: 'r1' }))?.payload).toBe(1)
  })

  it('close() leaves a pool it was given open', async () => {
    const pool = openPool()
    const store = new PostgresStore({ pool, schema })
    await store.save({ runId: 'r1', kind: 'demo', phase: 'p', payload: 1 })
    await store.close()
    expect((await pool.query(`SELECT count(*)::int AS n FROM "${schema}".checkpoints`)).rows).toEqual([{ n: 1 }])
    await expect(store.getRun('r1')).rejects.toMatchObject({ code: 'store_closed' })
  })
})

describe('PostgresStore', () => {
  it('round-trips a 5 MB snapshot', async () => {
    const store = openStore()
    const snapshot = { blob: 'x'.repeat(5 * 1024 * 1024), nested: { at: new Date(0), big: 2n ** 80n }, messages: conversation(20) }
    const id = await store.save({ runId: 'big', kind: 'runner', phase: 'post_llm', payload: snapshot })
    const loaded = await store.load<typeof snapshot>(id)
    expect(loaded.payload.blob.length).toBe(snapshot.blob.length)
    expect(loaded.payload).toEqual(snapshot)
    const [row] = await sql(`SELECT octet_length(body) AS bytes FROM "${schema}".checkpoints WHERE id = $1`, [id])
    expect(Number(row?.bytes)).toBeGreaterThan(5 * 1024 * 1024)
  })

  it('stores a growing message list once: 200 saves keep 200 item rows, not the quadratic sum', async () => {
    const store = openStore()
    const messages: { role: string; content: { text: string }[] }[] = []
    const ids: string[] = []
    for (let i = 0; i < 200; i++) {
      messages.push({ role: i % 2 === 0 ? 'user' : 'assistant', content: [{ text: `m${i}: ${'lorem ipsum '.repeat(84)}` }] })
      ids.push(await store.save({ runId: 'grow', kind: 'agent', phase: 'after_model', payload: { messages, i } }))
    }
    expect((await store.getLatest<{ messages: unknown[] }>({ runId: 'grow' }))?.payload.messages).toEqual(messages)
    expect((await store.load<{ messages: unknown[] }>(ids[49]!)).payload.messages).toEqual(messages.slice(0, 50))
    expect(await count('list_items')).toBe(200)
    expect(await count('checkpoints')).toBe(200)
    // Logical bytes (before Postgres compresses anything): the items once plus a small row per
    // checkpoint. Stored whole at every save the conversation would be ~100x its size.
    const listBytes = Buffer.byteLength(JSON.stringify(messages))
    const [stored] = await sql(`SELECT
        (SELECT sum(octet_length(item)) FROM "${schema}".list_items) AS items,
        (SELECT sum(octet_length(body) + octet_length(lists) + octet_length(metadata) + 200) FROM "${schema}".checkpoints) AS rows`)
    expect(Number(stored?.items)).toBeLessThan(1.1 * listBytes)
    expect(Number(stored?.rows)).toBeLessThan(200 * 600)
  }, 30_000)

  it('a save is four round trips, each statement of the store a named prepared statement unless turned off', async () => {
    for (const preparedStatements of [true, false]) {
      const { pool, counter } = countingPool(openPool())
      const store = new PostgresStore({ pool, schema, preparedStatements })
      toClose.push(store)
      const runId = `prepared-${preparedStatements}`
      await store.save({ runId, kind: 'agent', phase: 'p', payload: { messages: conversation(3) } })
      const before = counter.sent.length
      await store.save({ runId, kind: 'agent', phase: 'p', payload: { messages: conversation(4) } })
      const sent = counter.sent.slice(before)
      // BEGIN; the run locked with its lists' lengths; items, checkpoint and run in one statement; COMMIT.
      expect(sent.map((statement) => (typeof statement === 'string' ? statement : 'statement'))).toEqual(['BEGIN', 'statement', 'statement', 'COMMIT'])
      const names = sent.flatMap((statement) => (typeof statement === 'string' || statement.name === undefined ? [] : [statement.name]))
      if (preparedStatements) expect(names).toEqual([expect.stringMatching(/^cairn_[0-9a-f]{24}$/), expect.stringMatching(/^cairn_[0-9a-f]{24}$/)])
      else expect(names).toEqual([])
      expect((await store.getLatest({ runId }))?.payload).toEqual({ messages: conversation(4) })
    }
  }, 30_000)

  it('getLatest takes one query and load two, whatever the length of the run', async () => {
    const { pool, counter } = countingPool(openPool())
    const writer = new PostgresStore({ pool, schema })
    toClose.push(writer)
    const grow = (n: number) => ({ messages: conversation(n), notes: conversation(n, 'note') })
    for (let i = 1; i <= 5; i++) await writer.save({ runId: 'short', kind: 'agent', phase: 'p', payload: grow(i) })
    let firstLong = ''
    for (let i = 1; i <= 120; i++) {
      const id = await writer.save({ runId: 'long', kind: 'agent', phase: 'p', payload: grow(i) })
      firstLong ||= id
    }
    const reader = new PostgresStore({ pool, schema }) // a cold store: nothing cached
    toClose.push(reader)
    await reader.ready()
    const queries = async (read: () => Promise<unknown>) => {
      const before = counter.queries
      await read()
      return counter.queries - before
    }
    // getLatest: the run row (its last seq, to refuse a rolled-back run), the checkpoint and its list items in one statement.
    expect(await queries(() => reader.getLatest({ runId: 'short' }))).toBe(1)
    expect(await queries(() => reader.getLatest({ runId: 'long' }))).toBe(1)
    expect(await queries(() => reader.load(firstLong))).toBe(2)
    expect((await reader.getLatest({ runId: 'long' }))?.payload).toEqual(grow(120))
  }, 30_000)

  it('has an index for every query it makes, and uses it', async () => {
    const store = openStore()
    for (let i = 0; i < 30; i++) {
      const runId = `run-${i % 6}`
      await store.save({ runId, kind: 'workflow', phase: 'p', workflowName: i % 2 ? 'wf' : null, payload: { messages: conversation(1 + (i % 4)) } })
      await store.recordEffectIntent({ runId, callId: `c${i}`, name: 't', inputHash: 'h', idempotencyKey: `k${i}` })
      if (i % 6 === 0) await store.updateRun(runId, { threadId: 'th', status: 'paused' })
    }
    const indexes = await sql(`SELECT tablename, indexname FROM pg_indexes WHERE schemaname = $1 ORDER BY tablename, indexname`, [schema])
    expect(indexes.map((row) => `${String(row.tablename)}.${String(row.indexname)}`)).toEqual([
      'cairn_events.cairn_events_free',
      'cairn_events.cairn_events_pkey',
      'cairn_events.cairn_events_taken',
      'cairn_migrations.cairn_migrations_pkey',
      'cairn_schedules.cairn_schedules_pkey',
      'cairn_timers.cairn_timers_pkey',
      'cairn_timers.cairn_timers_wake',
      'cairn_waits.cairn_waits_pkey',
      'checkpoints.checkpoints_created_at',
      'checkpoints.checkpoints_pkey',
      'checkpoints.checkpoints_run_seq',
      'checkpoints.checkpoints_workflow',
      'effects.effects_pkey',
      'key_checks.key_checks_pkey',
      'list_items.list_items_pkey',
      'pending_writes.pending_writes_pkey',
      'run_events.run_events_pkey',
      'runs.runs_claim',
      'runs.runs_created_at',
      'runs.runs_pkey',
      'runs.runs_status',
      'runs.runs_thread',
      'runs.runs_workflow',
    ])
    for (const table of ['runs', 'checkpoints', 'list_items', 'effects', 'pending_writes']) await sql(`ANALYZE "${schema}".${table}`)

    const s = postgresStatements(schema)
    const queries: [string, string, unknown[]][] = [
      ['getRun', s.getRun, ['run-1']],
      ['lockRunForCommit', s.lockRunForCommit, ['run-1']],
      ['anyCheckpointExists', s.anyCheckpointExists, [['x', 'y']]],
      ['lockRunAndLists', s.lockRunAndLists, ['run-1', ['a', 'b']]],
      ['getCheckpoints', s.getCheckpoints, [['x', 'y']]],
      ['latestOfRun', s.latestOfRun, ['run-1']],
      ['latestOfWorkflow', s.latestOfWorkflow, ['wf']],
      ['readLists', s.readLists, ['run-1', ['a', 'b'], [0, 1], [3, 4]]],
      ['loadRun', s.loadRun, ['run-1', 8, 'run-log']],
      ['loadRunRows', s.loadRunRows, ['run-1', 8]],
      ['listRefsOfRun', s.listRefsOfRun, ['run-1']],
      ['getEffects', s.getEffects, ['run-1', ['c1']]],
      ['listEffects', s.listEffects, ['run-1']],
      ['fenceOf', s.fenceOf, ['run-1']],
      ['listWrites', s.listWrites, ['run-1', ['x', 'y']]],
    ]
    // The worker layer's queries: claiming (from the partial index of claimable runs), heartbeats, leases.
    const leases = leaseSql(postgresDialect(schema), 'cairn_wake_test')
    queries.push(
      ['claim', leases.claim!, ['w1', 4, null, null, 30_000]],
      ['claim of some queues', leases.claim!, ['w1', 4, ['q1', 'q2'], ['q3'], 30_000]],
      ['candidates', leases.candidates, [20, null, ['q3']]],
      ['claimRuns', leases.claimRuns, ['w1', ['run-1', 'run-2'], 30_000]],
      ['heartbeat', leases.heartbeat, ['w1', 30_000, JSON.stringify([['run-1', 1], ['run-2', 2]])]],
      ['getLease', leases.getLease, ['run-1']],
      ['lockForCancel', leases.lockForCancel, ['run-1']],
    )
    for (const query of [{}, { status: 'paused' as const }, { workflowName: 'wf' }, { threadId: 'th' }, { before: 'run-3', limit: 2 }]) {
      const { text, values } = listRunsSql(postgresDialect(schema), query)
      queries.push([`listRuns ${JSON.stringify(query)}`, text, values])
    }
    for (const query of [{}, { runId: 'run-1' }, { workflowName: 'wf' }, { runId: 'run-1', before: 'x', limit: 2 }, { before: 'x' }]) {
      const { text, values } = listCheckpointsSql(postgresDialect(schema), query)
      queries.push([`listCheckpoints ${JSON.stringify(query)}`, text, values])
    }
    const pool = openPool()
    const client = await pool.connect()
    try {
      await client.query('BEGIN')
      // With sequential scans priced out, a plan still scanning a table whole has no index to use.
      await client.query('SET LOCAL enable_seqscan = off')
      for (const [name, text, values] of queries) {
        const plan = JSON.stringify((await client.query(`EXPLAIN (FORMAT JSON) ${text}`, values)).rows)
        expect(plan, name).not.toContain('"Seq Scan"')
        expect(plan, name).toMatch(/Index (Only )?Scan"/) // an index, bitmap or ordered scan
      }
    } finally {
      await client.query('ROLLBACK')
      client.release()
    }
  }, 30_000)

  it('two stores writing one run at once lose nothing (the run row lock serializes them)', async () => {
    const [a, b] = [openStore(), openStore()]
    const writes = (store: PostgresStore, writer: string) =>
      Array.from({ length: 25 }, (_, k) => store.save({ runId: 'shared', kind: 'demo', phase: 'p', payload: { writer, k, messages: conversation((k % 5) + 1, writer) } }))
    await Promise.all([...writes(a, 'a'), ...writes(b, 'b')])
    const history = await a.listCheckpoints({ runId: 'shared' })
    expect(history.map((cp) => cp.seq)).toEqual(Array.from({ length: 50 }, (_, i) => 50 - i))
    for (const cp of history) {
      const { payload } = await b.load<{ writer: string; k: number; messages: unknown[] }>(cp.id)
      expect(payload.messages).toEqual(conversation((payload.k % 5) + 1, payload.writer))
    }
    expect((await b.getRun('shared'))?.lastSeq).toBe(50)
  }, 30_000)
})

describe('PostgresEngine', () => {
  function openEngine(): PostgresEngine {
    const engine = new PostgresEngine({ pool: openPool(), schema })
    toClose.push(engine)
    return engine
  }

  it('commit writes nothing when the seq is stale, an id is taken or a list has moved on', async () => {
    const engine = openEngine()
    expect(await engine.commit(commitOf({ id: 'c1', seq: 1, appends: [{ listId: 'L', expectedLength: 0, items: ['"a"'] }] }))).toEqual({ ok: true })
    const snapshot = async () => [await count('checkpoints'), await count('list_items'), await count('effects'), await sql(`SELECT last_seq, updated_at FROM "${schema}".runs`)]
    const before = await snapshot()
    const appendB = [{ listId: 'L', expectedLength: 1, items: ['"b"'] }]
    const intents = [effectOf({ runId: 'run', callId: 'e1' })]
    expect(await engine.commit(commitOf({ id: 'c2', seq: 1, appends: appendB, intents }))).toEqual({ ok: false, reason: 'stale_seq', lastSeq: 1 })
    expect(await engine.commit(commitOf({ id: 'c1', seq: 2, appends: appendB, intents }))).toEqual({ ok: false, reason: 'duplicate_id' })
    expect(
      await engine.commit(commitOf({ id: 'c2', seq: 2, appends: [...appendB, { listId: 'L2', expectedLength: 3, items: ['"x"'] }], intents })),
    ).toEqual({ ok: false, reason: 'list_conflict' })
    // A failed first commit does not leave its run behind.
    expect(await engine.commit({ ...commitOf({ id: 'c1', seq: 1 }), run: runOf({ runId: 'other' }), rows: [{ ...commitOf({ id: 'c1', seq: 1 }).rows[0]!, runId: 'other' }] })).toEqual({
      ok: false,
      reason: 'duplicate_id',
    })
    expect(await snapshot()).toEqual(before)
    expect(await engine.getRun('other')).toBeUndefined()
    expect(await engine.commit(commitOf({ id: 'c2', seq: 2, appends: appendB, intents }))).toEqual({ ok: true })
    expect(await engine.readLists('run', [{ id: 'L', n: 2 }])).toEqual([['"a"', '"b"']])
    expect(await engine.listEffects('run', ['e1'])).toMatchObject([{ status: 'pending', attempts: 1 }])
  })

  it('readLists puts each item at its index, several ranges in one statement, and ends a list at an item missing from it', async () => {
    const engine = openEngine()
    const items = Array.from({ length: 40 }, (_, k) => JSON.stringify(`item ${k}`))
    await engine.commit(commitOf({ id: 'c1', seq: 1, appends: [{ listId: 'L', expectedLength: 0, items }, { listId: 'M', expectedLength: 0, items: ['"m"'] }] }))
    // Rows in another physical order than their index: the items still come back in order.
    await sql(`UPDATE "${schema}".list_items SET item = item WHERE run_id = 'run' AND list_id = 'L' AND idx % 3 = 0`)
    expect(await engine.readLists('run', [{ id: 'L', n: 40 }, { id: 'M', n: 1 }, { id: 'L', from: 30, n: 35 }])).toEqual([items, ['"m"'], items.slice(30, 35)])
    await sql(`DELETE FROM "${schema}".list_items WHERE run_id = 'run' AND list_id = 'L' AND idx = 7`)
    expect(await engine.readLists('run', [{ id: 'L', n: 40 }, { id: 'L', from: 5, n: 10 }, { id: 'L', from: 8, n: 10 }])).toEqual([items.slice(0, 7), items.slice(5, 7), items.slice(8, 10)])
  })

  it('loadRun reads in one statement the very rows getRun, getLatest, readLists and listEffects read', async () => {
    const engine = openEngine()
    expect(await engine.loadRun('nobody', { recent: 4 })).toEqual({ run: undefined, checkpoints: [], lists: [] })
    expect(await engine.insertRun(runOf({ runId: 'empty', createdAt: 1.5, metadata: '{"a":"\\u0000 é 𝄞 \\"q\\""}' }))).toBe(true)
    expect(await engine.loadRun('empty', { recent: 4 })).toEqual({ run: await engine.getRun('empty'), checkpoints: [], lists: [] })
    const text = 'line\nbreak \u0001 tab\t é 𝄞 "quoted" \\ back'
    await engine.commit(commitOf({ id: 'c1', seq: 1, body: JSON.stringify({ text }), appends: [{ listId: 'L', expectedLength: 0, items: [JSON.stringify(text)] }] }))
    await engine.commit({ ...commitOf({ id: 'c2', seq: 2, createdAt: 1795699947579.25, terminal: true, metadata: JSON.stringify({ text }), body: JSON.stringify(text) }), effects: { intents: [effectOf({ runId: 'run', callId: 'e1' })] } })
    const read = await engine.loadRun('run', { recent: 4 })
    expect(read.run).toEqual(await engine.getRun('run'))
    expect(read.checkpoints[0]).toEqual(await engine.getLatest({ runId: 'run' }))
    expect(read.checkpoints[0]).toMatchObject({ id: 'c2', seq: 2, createdAt: 1795699947579.25, terminal: true, body: JSON.stringify(text) })
    expect(read.checkpoints.map((row) => row.id)).toEqual(['c2', 'c1'])
    expect(read.lists).toEqual([{ id: 'L', items: (await engine.readLists('run', [{ id: 'L', n: 1 }]))[0] }])
  })

  it('loadRun reads of each list only the items the newest checkpoints refer to, and the run log whole', async () => {
    const engine = openEngine()
    const items = (prefix: string, n: number) => Array.from({ length: n }, (_, k) => JSON.stringify(`${prefix}${k}`))
    await engine.commit(commitOf({ id: 'l1', seq: 1, appends: [{ listId: 'old', expectedLength: 0, items: items('o', 3) }, { listId: 'L', expectedLength: 0, items: items('a', 2) }] }))
    // Two more items of L and one of the run log, but the checkpoint refers to the first 3 of L only.
    const appends = [{ listId: 'L', expectedLength: 2, items: items('a', 4).slice(2) }, { listId: 'run-log', expectedLength: 0, items: ['"log"'] }]
    await engine.commit({ ...commitOf({ id: 'l2', seq: 2, appends }), rows: [{ ...commitOf({ id: 'l2', seq: 2 }).rows[0]!, lists: JSON.stringify([{ id: 'L', n: 3, h: '' }]) }] })
    const read = await engine.loadRun('run', { recent: 1 })
    expect(read.checkpoints.map((row) => row.id)).toEqual(['l2'])
    expect(new Map(read.lists.map((list) => [list.id, list.items]))).toEqual(
      new Map([
        ['L', items('a', 3)],
        ['run-log', ['"log"']],
      ]),
    )
    // Both checkpoints: the old list too.
    expect((await engine.loadRun('run', { recent: 2 })).lists.map((list) => list.id).sort()).toEqual(['L', 'old', 'run-log'])
    // A list missing an item ends before it (the reader then finds it short of its ref).
    await sql(`DELETE FROM "${schema}".list_items WHERE run_id = 'run' AND list_id = 'L' AND idx = 1`)
    expect((await engine.loadRun('run', { recent: 1 })).lists.find((list) => list.id === 'L')?.items).toEqual(items('a', 1))
    // A row whose lists is not JSON: the rows still load, with the run log alone.
    await sql(`UPDATE "${schema}".checkpoints SET lists = 'not json' WHERE id = 'l2'`)
    const torn = await engine.loadRun('run', { recent: 2 })
    expect(torn.checkpoints.map((row) => row.id)).toEqual(['l2', 'l1'])
    expect(torn.lists).toEqual([{ id: 'run-log', items: ['"log"'] }])
  })

  it('concurrent commits to one run never move its lastSeq backwards (the run row lock orders them)', async () => {
    const [a, b] = [openEngine(), openEngine()]
    for (let round = 0; round < 20; round++) {
      const runId = `race-${round}`
      await a.commit(commitOf({ runId, id: `${runId}-1`, seq: 1 }))
      // Two writers, one with a gap: whichever order they commit in, the later must see the earlier.
      const results = await Promise.all([a.commit(commitOf({ runId, id: `${runId}-5`, seq: 5 })), b.commit(commitOf({ runId, id: `${runId}-2`, seq: 2 }))])
      const [stored] = await sql(`SELECT max(seq)::int AS seq FROM "${schema}".checkpoints WHERE run_id = $1`, [runId])
      expect((await a.getRun(runId))?.lastSeq, JSON.stringify(results)).toBe(stored?.seq)
    }
  })

  it('a checkpoint id committed by two runs at once is one success and one duplicate_id', async () => {
    const [a, b] = [openEngine(), openEngine()]
    for (let round = 0; round < 5; round++) {
      const id = `same-${round}`
      const results = await Promise.all([
        a.commit(commitOf({ runId: `ra-${round}`, id, seq: 1 })),
        b.commit(commitOf({ runId: `rb-${round}`, id, seq: 1 })),
      ])
      expect(results).toEqual(expect.arrayContaining([{ ok: true }, { ok: false, reason: 'duplicate_id' }]))
    }
    expect(await count('checkpoints')).toBe(5)
    expect(await count('runs')).toBe(5)
  })

  it('deleteRun removes every row of the run and nothing else', async () => {
    const engine = openEngine()
    for (const runId of ['gone', 'kept']) {
      await engine.commit(commitOf({ runId, id: `${runId}-c1`, seq: 1, appends: [{ listId: 'L', expectedLength: 0, items: ['1', '2'] }] }))
      await engine.commit({ rows: [], appends: [], run: runOf({ runId }), effects: { intents: [effectOf({ runId, callId: 'c' })] } })
    }
    expect(await engine.deleteRun('gone')).toBe(true)
    expect(await engine.deleteRun('gone')).toBe(false)
    for (const table of ['runs', 'checkpoints', 'list_items', 'effects']) {
      expect(await count(table, 'run_id = $1', ['gone']), table).toBe(0)
      expect(await count(table, 'run_id = $1', ['kept']), table).toBeGreaterThan(0)
    }
  })

  it('answers every query exactly as the memory engine does', async () => {
    const engines: StorageEngine[] = [new MemoryEngine(), openEngine()]
    const both = async <T>(fn: (engine: StorageEngine) => Promise<T>): Promise<T> => {
      const [expected, actual] = await Promise.all(engines.map(fn))
      expect(actual).toEqual(expected)
      return actual as T
    }

    // Runs with tied creation times, ids that sort differently by byte and by locale, and runs
    // created by their first commit.
    await both((e) => e.insertRun(runOf({ runId: 'ra', createdAt: 100, status: 'completed', threadId: 't1' })))
    await both((e) => e.insertRun(runOf({ runId: 'rb', createdAt: 100, workflowName: 'wf', threadId: 't1' })))
    await both((e) => e.insertRun(runOf({ runId: 'Rb', createdAt: 100 })))
    await both((e) => e.insertRun(runOf({ runId: 'r_b', createdAt: 100 })))
    await both((e) => e.insertRun(runOf({ runId: 'rc', createdAt: 300, status: 'failed' })))
    await both((e) => e.insertRun(runOf({ runId: 'ra', createdAt: 999 })))
    const commits: CommitRequest[] = [
      commitOf({ runId: 'ra', id: 'a1', seq: 1, createdAt: 150, appends: [{ listId: 'La', expectedLength: 0, items: ['1', '2', '3'] }] }),
      commitOf({ runId: 'ra', id: 'a2', seq: 2, createdAt: 150, lists: '[{"id":"La","n":4}]', appends: [{ listId: 'La', expectedLength: 3, items: ['4'] }] }),
      commitOf({ runId: 'ra', id: 'a5', seq: 5, createdAt: 170, terminal: true, lists: '[{"id":"Lb","n":1}]', appends: [{ listId: 'Lb', expectedLength: 0, items: ['x'] }] }),
      commitOf({ runId: 'rb', id: 'b1', seq: 1, createdAt: 150, workflowName: 'wf' }),
      commitOf({ runId: 'rb', id: 'B2', seq: 2, createdAt: 160, workflowName: 'wf' }),
      commitOf({ runId: 'rd', id: 'd1', seq: 1, createdAt: 160, workflowName: 'wf' }),
      // Within a run createdAt never decreases with seq: the memory engine's cross-run order is
      // only a total order then (it compares seq alone within a run, createdAt across runs).
      commitOf({ runId: 'rd', id: 'd2', seq: 2, createdAt: 165, workflowName: 'other' }),
      commitOf({ runId: 're', id: 'e1', seq: 3, createdAt: 50 }),
      // A batch of two checkpoints with effects, and an effects-only commit creating its run.
      batchOf('rg', [commitOf({ runId: 'rg', id: 'g1', seq: 1, createdAt: 180 }), commitOf({ runId: 'rg', id: 'g2', seq: 2, createdAt: 190 })], {
        intents: [effectOf({ runId: 'rg', callId: 'i1', startedAt: 3 }), effectOf({ runId: 'rg', callId: 'i1', startedAt: 4 })],
      }),
      batchOf('rf', [], { intents: [effectOf({ runId: 'rf', callId: 'f1' })] }),
    ]
    for (const request of commits) await both((e) => e.commit(request))
    await both((e) => e.commit(commits[0]!))
    await both((e) => e.commit(batchOf('rg', [], { completions: [{ runId: 'rg', callId: 'i1', status: 'succeeded', output: '1', outputHash: 'h', completedAt: 9 }] })))
    await both((e) => e.updateRun('rb', { status: 'paused', name: null, metadata: '{"k":1}', updatedAt: 500 }))
    await both((e) => e.updateRun('rc', { name: 'named', threadId: null, updatedAt: 501 }))
    await both((e) => e.updateRun('missing', { status: 'paused', updatedAt: 1 }))

    const runIds = ['ra', 'rb', 'Rb', 'r_b', 'rc', 'rd', 're', 'rf', 'rg', 'unknown']
    const filters = [{}, { status: 'running' as const }, { status: ['completed', 'failed'] as const }, { status: [] }, { workflowName: 'wf' }, { threadId: 't1' }]
    for (const filter of filters) {
      for (const before of [undefined, ...runIds]) {
        for (const limit of [undefined, 1, 2]) {
          await both((e) => e.listRuns({ ...filter, ...(before === undefined ? {} : { before }), ...(limit === undefined ? {} : { limit }) }))
        }
      }
    }
    const checkpointIds = ['a1', 'a2', 'a5', 'b1', 'B2', 'd1', 'd2', 'e1', 'g1', 'g2', 'unknown']
    for (const filter of [{}, { runId: 'ra' }, { runId: 'rd' }, { workflowName: 'wf' }, { runId: 'rd', workflowName: 'wf' }, { runId: 'unknown' }]) {
      for (const before of [undefined, ...checkpointIds]) {
        for (const limit of [undefined, 1, 3]) {
          await both((e) => e.listCheckpoints({ ...filter, ...(before === undefined ? {} : { before }), ...(limit === undefined ? {} : { limit }) }))
        }
      }
    }
    for (const query of [{ runId: 'ra' }, { runId: 'rd' }, { runId: 'rg' }, { runId: 'unknown' }, { workflowName: 'wf' }, { workflowName: 'other' }, { workflowName: 'none' }]) {
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

    // The effect journal: attempts, started, first writer wins, startedAt order with ties.
    for (const [callId, startedAt] of [['z', 10], ['y', 5], ['x', 10], ['z', 99]] as const) {
      await both((e) => e.commit({ rows: [], appends: [], run: runOf({ runId: 'ra' }), effects: { intents: [effectOf({ runId: 'ra', callId, startedAt })] } }))
    }
    await both((e) => e.commit({ rows: [], appends: [], run: runOf({ runId: 'ra' }), effects: { starts: ['z'] } }))
    await both((e) => e.commit({ rows: [], appends: [], run: runOf({ runId: 'ra' }), effects: { starts: ['missing'] } }))
    await both((e) => e.commit({ rows: [], appends: [], run: runOf({ runId: 'ra' }), effects: { completions: [{ runId: 'ra', callId: 'z', status: 'succeeded', output: '"ok"', outputHash: 'h1', completedAt: 20 }] } }))
    await both((e) => e.commit({ rows: [], appends: [], run: runOf({ runId: 'ra' }), effects: { completions: [{ runId: 'ra', callId: 'z', status: 'failed', output: '"late"', outputHash: 'h2', completedAt: 21 }] } }))
    await both((e) => e.commit({ rows: [], appends: [], run: runOf({ runId: 'ra' }), effects: { starts: ['z'] } }))
    await both((e) => e.commit({ rows: [], appends: [], run: runOf({ runId: 'ra' }), effects: { completions: [{ runId: 'ra', callId: 'missing', status: 'failed', output: '"x"', outputHash: 'h', completedAt: 22 }] } }))
    await both((e) => e.listEffects('ra'))
    await both((e) => e.listEffects('rg'))
    await both((e) => e.listEffects('ra', ['y']))
    await both((e) => e.deleteEffects('ra'))
    await both((e) => e.listEffects('ra'))
    await both((e) => e.deleteRun('rd'))
    await both((e) => e.listCheckpoints({}))
  }, 30_000)
})

/** A conversation of `count` messages of about 1 KB each. */
function conversation(count: number, tag = 'm'): { role: string; content: { text: string }[] }[] {
  return Array.from({ length: count }, (_, i) => ({ role: i % 2 ? 'user' : 'assistant', content: [{ text: `${tag}${i}:`.padEnd(1000, 'abc') }] }))
}
