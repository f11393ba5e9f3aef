import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { runEventsResponse } from '../../src/http.js'
import { FileStore, importRun, InvalidArgumentError, KeyRing, MemoryStore, Runner, StoreError, type CheckpointStore } from '../../src/index.js'
import { PostgresStore } from '../../src/postgres.js'
import { SqliteStore } from '../../src/sqlite.js'
import { postgresTarget } from '../fixtures/postgres-target.js'

const target = await postgresTarget()
afterAll(() => target.close())

const dirs: string[] = []
const stores: CheckpointStore[] = []
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close()
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true })
})

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-bad-args-'))
  dirs.push(dir)
  return dir
}

const backends: [string, () => Promise<CheckpointStore>][] = [
  ['memory', async () => new MemoryStore()],
  ['file', async () => new FileStore({ directory: await tempDir() })],
  ['sqlite', async () => new SqliteStore({ path: join(await tempDir(), 'cairn.db') })],
  [`postgres (${target.kind})`, async () => target.openStore(target.freshSchema())],
]

/** The error a call rejects with (or throws), failing the test when it succeeds. */
async function refusal(call: () => unknown): Promise<unknown> {
  try {
    await call()
  } catch (err) {
    return err
  }
  throw new Error('the call succeeded')
}

describe.each(backends)('bad arguments to a %s store are InvalidArgumentErrors, and nothing is written', (_name, open) => {
  async function openStore(): Promise<CheckpointStore> {
    const store = await open()
    stores.push(store)
    return store
  }

  it('a run id that is not an id, to save, createRun and getRun', async () => {
    const store = await openStore()
    for (const call of [
      () => store.save({ runId: '../x', kind: 'test', phase: 'p', payload: 1 }),
      () => store.createRun({ runId: 'a/b' }),
      () => store.getRun('nul\u0000byte'),
    ]) {
      const err = await refusal(call)
      expect(err).toBeInstanceOf(InvalidArgumentError)
      expect(err).toMatchObject({ code: 'invalid_argument' })
      expect((err as Error).message).toMatch(/runId .* is not a valid id/)
    }
    expect(await store.listRuns()).toEqual([])
  })

  it('a negative or fractional limit, to listCheckpoints, listRuns, the event log and a claim', async () => {
    const store = await openStore()
    await store.save({ runId: 'r', kind: 'test', phase: 'p', payload: 1 })
    const calls: [() => unknown, RegExp][] = [
      [() => store.listCheckpoints({ runId: 'r', limit: -1 }), /limit must be a positive integer, got -1/],
      [() => store.listRuns({ limit: 1.5 }), /limit must be a positive integer, got 1.5/],
      [() => store.events!.read('r', { limit: -1 }), /limit must be a positive integer, got -1/],
      [() => store.events!.read('r', { after: 'not-a-cursor' }), /is not a cursor of this run's event log/],
      [() => store.leases!.claim({ owner: 'w', limit: -1, leaseMs: 1000 }), /claim limit must be a positive integer/],
    ]
    for (const [call, message] of calls) {
      const err = await refusal(call)
      expect(err).toBeInstanceOf(InvalidArgumentError)
      expect((err as Error).message).toMatch(message)
    }
  })

  it('a bad option or field names its run: a write of another run, an unknown effect, a bad status, a fractional keepLast', async () => {
    const store = await openStore()
    await store.save({ runId: 'r', kind: 'test', phase: 'p', payload: 1 })
    const foreign = await refusal(() => store.write({ runId: 'r', checkpoints: [{ runId: 'other', kind: 'test', phase: 'p', payload: 2 }] }))
    expect(foreign).toBeInstanceOf(InvalidArgumentError)
    expect(foreign).toMatchObject({ runId: 'r' })
    expect((foreign as Error).message).toContain('holds a checkpoint of run other')
    const unknown = await refusal(() => store.startEffect('r', 'never-recorded'))
    expect(unknown).toBeInstanceOf(InvalidArgumentError)
    expect(unknown).toMatchObject({ runId: 'r' })
    expect((unknown as Error).message).toContain('record the intent before the effect starts')
    expect(await refusal(() => store.updateRun('r', { status: 'exploded' as never }))).toBeInstanceOf(InvalidArgumentError)
    expect(await refusal(() => store.prune({ keepLast: 1.5 }))).toBeInstanceOf(InvalidArgumentError)
    // None of them changed the run.
    expect(await store.getRun('r')).toMatchObject({ status: 'running', lastSeq: 1 })
    expect((await store.listCheckpoints({ runId: 'r' })).map((info) => info.seq)).toEqual([1])
    expect(await store.getRun('other')).toBeUndefined()
  })
})

describe('bad options when opening a store or serving its runs are InvalidArgumentErrors', () => {
  it('a SQLite busy timeout below zero is refused as an argument, not reported as a failure to open the file', async () => {
    const path = join(await tempDir(), 'cairn.db')
    const err = await refusal(() => new SqliteStore({ path, busyTimeoutMs: -1 }))
    expect(err).toBeInstanceOf(InvalidArgumentError)
    expect(err).not.toBeInstanceOf(StoreError)
    expect((err as Error).message).toMatch(/busyTimeoutMs must be a non-negative integer, got -1/)
    expect(await refusal(() => new SqliteStore({ path, synchronous: 'sometimes' as never }))).toBeInstanceOf(InvalidArgumentError)
  })

  it('a store without a place to keep its data, or encryption without keys', async () => {
    expect(await refusal(() => new SqliteStore({} as never))).toBeInstanceOf(InvalidArgumentError)
    expect(await refusal(() => new PostgresStore({} as never))).toBeInstanceOf(InvalidArgumentError)
    expect(await refusal(() => new MemoryStore({ encrypt: true }))).toBeInstanceOf(InvalidArgumentError)
    expect(await refusal(() => new KeyRing([]))).toBeInstanceOf(InvalidArgumentError)
  })

  it('a document that is not a run export, and stream options out of range', async () => {
    const store = new MemoryStore()
    stores.push(store)
    expect(await refusal(() => importRun(store, { format: 'something else' }))).toBeInstanceOf(InvalidArgumentError)
    expect(await store.listRuns()).toEqual([])
    await store.save({ runId: 'r', kind: 'test', phase: 'p', payload: 1 })
    const req = new Request('http://localhost/events?runId=r')
    const heartbeat = await refusal(() => runEventsResponse(req, { store, runId: 'r', heartbeatMs: 0 }))
    expect(heartbeat).toBeInstanceOf(InvalidArgumentError)
    expect((heartbeat as Error).message).toMatch(/heartbeatMs must be a positive number of ms, got 0/)
    const runner = new Runner({ store })
    const idle = await refusal(() => runner.events('r', { idleTimeoutMs: -5 }).next())
    expect(idle).toBeInstanceOf(InvalidArgumentError)
    expect((idle as Error).message).toMatch(/idleTimeoutMs must be a positive number of ms/)
  })
})
