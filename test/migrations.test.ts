import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest'
import { FileStore, SchemaVersionError, type CheckpointStore, type EngineStoreOptions } from '../src/index.js'
import { EngineStore, MemoryEngine, SchemaRegistry } from '../src/engine.js'
import { SqliteStore } from '../src/sqlite.js'
import { postgresTarget, schemaForLocation } from './fixtures/postgres-target.js'

/**
 * A real format change: version 1 of the `note` record kept a conversation as one `transcript`
 * string with lines "role: text"; version 2 keeps `messages` as a list of { role, content }.
 */
const v1 = () => new SchemaRegistry().define('note', 1)
const v2 = () =>
  new SchemaRegistry().define('note', 2).register({
    kind: 'note',
    from: 1,
    description: 'transcript string became a messages list',
    up: (payload) => {
      const { transcript, ...rest } = payload as { transcript: string }
      const messages = transcript.split('\n').map((line) => {
        const at = line.indexOf(': ')
        return { role: line.slice(0, at), content: [{ text: line.slice(at + 2) }] }
      })
      return { ...rest, messages }
    },
  })
const v3 = () => v2().define('note', 3).register({ kind: 'note', from: 2, description: 'adds tags', up: (p) => ({ ...(p as object), tags: [] }) })

type Open = (location: string, options: EngineStoreOptions) => CheckpointStore

const memoryEngine = new MemoryEngine()
const backends: [string, Open][] = [
  // One engine shared by every open: "reopening" a memory store with new code sees the old rows.
  ['memory', (_location, options) => new EngineStore(memoryEngine, options)],
  ['file', (location, options) => new FileStore({ directory: join(location, 'store'), ...options })],
  ['sqlite', (location, options) => new SqliteStore({ path: join(location, 'cairn.db'), ...options })],
]
// Postgres: the local server when it answers, else embedded PGlite; one schema per test location.
const pg = await postgresTarget()
afterAll(() => pg.close())
backends.push(['postgres', (location, options) => pg.openStore(pg.track(schemaForLocation(location)), options)])

describe.each(backends)('schema migrations on %s', (_name, open) => {
  let location = ''
  beforeEach(async () => {
    location = await mkdtemp(join(tmpdir(), 'cairn-migrations-'))
  })
  afterEach(async () => {
    await rm(location, { recursive: true, force: true })
  })

  it('upgrades a record written by v1 code when v2 code loads it', async () => {
    const old = open(location, { schemas: v1() })
    const runId = `mig-${Math.random().toString(36).slice(2)}`
    const id = await old.save({ runId, kind: 'note', phase: 'p', payload: { transcript: 'user: hi\nassistant: hello', n: 1 } })
    expect((await old.load(id)).schemaVersion).toBe(1)
    await old.close()

    const upgraded = open(location, { schemas: v2() })
    const record = await upgraded.load(id)
    expect(record.schemaVersion).toBe(2)
    expect(record.payload).toEqual({
      n: 1,
      messages: [
        { role: 'user', content: [{ text: 'hi' }] },
        { role: 'assistant', content: [{ text: 'hello' }] },
      ],
    })
    expect((await upgraded.getLatest({ runId }))?.payload).toEqual(record.payload)
    const next = await upgraded.save({ runId, kind: 'note', phase: 'p', payload: record.payload })
    expect((await upgraded.load(next)).schemaVersion).toBe(2)
    await upgraded.close()
  })

  it('refuses a record written by newer code, naming both versions', async () => {
    const newer = open(location, { schemas: v3() })
    const runId = `mig-${Math.random().toString(36).slice(2)}`
    const id = await newer.save({ runId, kind: 'note', phase: 'p', payload: { messages: [], tags: ['x'] } })
    await newer.close()
    const current = open(location, { schemas: v2() })
    const error = await current.load(id).catch((err: unknown) => err)
    expect(error).toBeInstanceOf(SchemaVersionError)
    expect(error).toMatchObject({ found: 3, supported: 2 })
    expect((error as Error).message).toContain('schema version 3')
    expect((error as Error).message).toContain('up to 2')
    await current.close()
  })
})
