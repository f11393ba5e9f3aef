import { randomBytes } from 'node:crypto'
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { Agent, CheckpointCorruptionError, configureLimits, limits, Runner, tool, type CheckpointStore } from '../../src/index.js'
import { exportRun, importRun } from '../../src/store/portable-run.js'
import { ScriptedModel } from '../../src/testing.js'
import { postgresTarget } from '../fixtures/postgres-target.js'
import { fileBackend, postgresBackend, removeTempDirs, sqliteBackend, type RawBackend } from '../trust/raw-rows.js'

afterAll(removeTempDirs)

/** ~5 MB of text that does not compress (Postgres compresses large values). */
const BIG = randomBytes(3_750_000).toString('base64')

/** Bytes the backend keeps: the database file (closed), the store's files, or the schema's tables. */
const backends: [string, () => Promise<RawBackend>, (backend: RawBackend) => Promise<number>][] = [
  ['sqlite', sqliteBackend, async (backend) => (await backend.dump()).length],
  ['file', fileBackend, async (backend) => (await backend.dump()).length],
  ['postgres', postgresBackend, async (backend) => postgresBytes(backend.schema!)],
]

function agent(): Agent {
  const fetchPage = tool({
    name: 'fetch_page',
    description: 'fetch a large page',
    inputSchema: z.object({ url: z.string() }),
    idempotent: true,
    callback: () => BIG,
  })
  const model = new ScriptedModel(
    [[{ text: 'fetching' }, { toolUse: { toolUseId: 'page-1', name: 'fetch_page', input: { url: 'https://example.com' } } }], [{ text: 'read it' }]],
    { select: 'conversation' },
  )
  return new Agent({ model, tools: [fetchPage] })
}

/** The tool result's text as the latest runtime snapshot of the run holds it. */
async function resultInConversation(store: CheckpointStore, runId: string): Promise<string | undefined> {
  const history = await new Runner({ store }).history(runId)
  const withRuntime = history.filter((c) => (c.payload.runtime as { messages?: unknown } | null | undefined)?.messages).at(-1)
  const messages = (withRuntime!.payload.runtime as { messages: { content: Record<string, unknown>[] }[] }).messages
  for (const message of messages) {
    for (const block of message.content) {
      const result = block.toolResult as { content: { text?: string }[] } | undefined
      if (result) return result.content[0]?.text
    }
  }
  return undefined
}

let saved: number
beforeEach(() => {
  saved = limits().maxToolResultChars
  configureLimits({ maxToolResultChars: 8 * 1024 * 1024 })
})
afterEach(() => {
  configureLimits({ maxToolResultChars: saved })
})

describe.each(backends)('a large tool result on %s is stored once', (_name, make, bytesOf) => {
  it('a ~5 MB tool result leaves ~5 MB stored, not ~10, and reads back whole from the conversation and the journal', async () => {
    const backend = await make()
    const store = backend.open({})
    const result = await new Runner({ store }).run(agent(), { input: 'read the page', runId: 'big' })
    expect(result.state).toBe('completed')
    await store.close()
    const bytes = await bytesOf(backend)
    expect(bytes).toBeGreaterThan(BIG.length)
    expect(bytes).toBeLessThan(BIG.length * 1.4)

    const reopened = backend.open({})
    expect(await resultInConversation(reopened, 'big')).toBe(BIG)
    const effect = await reopened.getEffect('big', 'page-1')
    expect((effect?.output as { content: { text: string }[] }).content[0]!.text).toBe(BIG)
    await reopened.close()
  })

  it('an edited shared output is a CheckpointCorruptionError when the conversation is loaded', async () => {
    const backend = await make()
    const store = backend.open({})
    await new Runner({ store }).run(agent(), { input: 'read the page', runId: 'edited' })
    await store.close()
    const field = (await backend.fields('edited')).find((f) => f.table === 'effects' && f.id === 'page-1' && f.column === 'output')!
    await backend.writeField('edited', field, String(field.value).replace(BIG.slice(0, 40), 'x'.repeat(40)))
    const reopened = backend.open({})
    const snapshot = (await reopened.listCheckpoints({ runId: 'edited', verify: false })).find((c) => c.metadata.snapshot === true)!
    const error = await reopened.load(snapshot.id).then(
      () => undefined,
      (err: unknown) => err,
    )
    expect(error).toBeInstanceOf(CheckpointCorruptionError)
    expect((error as Error).message).toContain('page-1')
    await reopened.close()
  })

  it('pruning the finished run keeps the effect whose output the conversation holds; fork and export/import read it whole', async () => {
    const backend = await make()
    const store = backend.open({})
    await new Runner({ store }).run(agent(), { input: 'read the page', runId: 'kept' })
    // The two newest: the terminal checkpoint and the snapshot before it, whose conversation holds the result.
    expect(await store.prune({ runId: 'kept', keepLast: 2 })).toMatchObject({ effectsDeleted: 0 })
    expect(await store.getEffect('kept', 'page-1')).toMatchObject({ status: 'succeeded' })
    expect(await resultInConversation(store, 'kept')).toBe(BIG)

    const snapshot = (await store.listCheckpoints({ runId: 'kept' })).find((c) => c.metadata.snapshot === true)!
    const forked = await store.fork({ checkpointId: snapshot.id, runId: 'kept-fork' })
    expect(JSON.stringify(forked.payload)).toContain(BIG.slice(0, 100))

    const document = await exportRun(store, 'kept')
    await store.deleteRun('kept')
    await importRun(store, JSON.parse(JSON.stringify(document)))
    expect(await resultInConversation(store, 'kept')).toBe(BIG)
    await store.close()
  })
})

async function postgresBytes(schema: string): Promise<number> {
  const target = await postgresTarget()
  const rows = await target.sql(
    `SELECT sum(pg_total_relation_size(c.oid))::bigint AS bytes FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = $1 AND c.relkind = 'r'`,
    [schema],
  )
  return Number(rows[0]?.bytes ?? 0)
}
