import { describe, expect, it } from 'vitest'
import { emptyCheckpoint, uuid6, type Checkpoint, type CheckpointTuple, type SerializerProtocol } from '@langchain/langgraph-checkpoint'
import { CheckpointCorruptionError, CheckpointIntegrityError, InvalidArgumentError, type EngineStoreOptions } from 'cairn-agents'
import { CairnSaver } from 'cairn-agents/langgraph'
import { fileWrites, memoryWrites, postgresWrites, sqliteWrites, type RawWrite, type RawWritesBackend } from './fixtures/raw-writes.js'

const KEY = { id: 'writes-key', secret: Buffer.alloc(32, 5).toString('base64') }
const BACKENDS: readonly [string, () => Promise<RawWritesBackend>][] = [
  ['SQLite', sqliteWrites],
  ['Postgres', postgresWrites],
  ['memory', memoryWrites],
  ['file', fileWrites],
]
const meta = { source: 'loop' as const, step: 0, parents: {} }

function checkpoint(values: Record<string, unknown>): Checkpoint {
  return { ...emptyCheckpoint(), id: uuid6(-1), channel_values: values, channel_versions: Object.fromEntries(Object.keys(values).map((k) => [k, 1])) }
}

type Config = { configurable: { thread_id: string; checkpoint_ns: string; checkpoint_id: string } }

/**
 * A thread of two checkpoints with writes: the first written by tasks `task-a` (two writes) and
 * `task-b`, the second by `task-c`. The store is closed afterwards; the caller opens it again.
 */
async function threadWithWrites(backend: RawWritesBackend, options: EngineStoreOptions) {
  const store = backend.open(options)
  const saver = new CairnSaver({ store })
  const first = (await saver.put({ configurable: { thread_id: 'chat-9', checkpoint_ns: '' } }, checkpoint({ n: 1 }), meta, { n: 1 })) as Config
  await saver.putWrites(first, [['animals', 'dog'], ['count', 1]], 'task-a')
  await saver.putWrites(first, [['animals', 'cat']], 'task-b')
  const second = (await saver.put(first, checkpoint({ n: 2 }), { ...meta, step: 1 }, { n: 2 })) as Config
  await saver.putWrites(second, [['animals', 'owl']], 'task-c')
  await store.close()
  return { first, second, runId: await runOf(backend, options) }
}

/** The run of the thread: the only one with writes. */
async function runOf(backend: RawWritesBackend, options: EngineStoreOptions): Promise<string> {
  const store = backend.open(options)
  try {
    const [run] = await store.listRuns({ limit: 1 })
    return run!.runId
  } finally {
    await store.close()
  }
}

/** A fresh saver (a new process) reading a checkpoint and the thread's listing. */
async function reads(backend: RawWritesBackend, options: EngineStoreOptions, config: Config) {
  const store = backend.open(options)
  const saver = new CairnSaver({ store })
  try {
    const tuple = await saver.getTuple(config).then(
      (value) => ({ value, error: undefined }),
      (error: unknown) => ({ value: undefined, error }),
    )
    const listed: CheckpointTuple[] = []
    const listing = await (async () => {
      for await (const item of saver.list({ configurable: { thread_id: config.configurable.thread_id } })) listed.push(item)
    })().then(
      () => undefined,
      (error: unknown) => error,
    )
    return { tuple, listed, listing }
  } finally {
    await store.close()
  }
}

/** Both reads refuse the checkpoint with a typed error naming the thread, the checkpoint and `task` (when given). */
function expectRefused(error: unknown, config: Config, task: string | undefined): void {
  expect(error).toBeInstanceOf(CheckpointCorruptionError)
  const message = (error as Error).message
  expect(message).toContain('"chat-9"')
  expect(message).toContain(config.configurable.checkpoint_id)
  if (task !== undefined) expect(message).toMatch(new RegExp(`"${task}"|task ${task}\\b`))
}

const byKey = (row: RawWrite) => `${row.checkpointId}/${row.taskId}/${row.idx}`
const isTask = (task: string) => (row: RawWrite) => row.taskId === task

for (const [name, open] of BACKENDS) {
  for (const keyed of [false, true]) {
    const options: EngineStoreOptions = keyed ? { keys: [KEY] } : {}
    describe(`CairnSaver's pending writes on a ${keyed ? 'signed' : 'unkeyed'} ${name} store`, { timeout: 60_000 }, () => {
      it('reads back every write of a checkpoint, and nothing of its ledger, in a fresh process', async () => {
        const backend = await open()
        try {
          const { first, second } = await threadWithWrites(backend, options)
          const { tuple, listed, listing } = await reads(backend, options, first)
          expect(tuple.error).toBeUndefined()
          expect(tuple.value?.pendingWrites).toEqual([
            ['task-a', 'animals', 'dog'],
            ['task-a', 'count', 1],
            ['task-b', 'animals', 'cat'],
          ])
          expect(listing).toBeUndefined()
          expect(listed.map((item) => item.pendingWrites?.map((write) => write[2]))).toEqual([['owl'], ['dog', 1, 'cat']])
          // Writes added by a fresh saver extend the ledger the first one wrote.
          const store = backend.open(options)
          await new CairnSaver({ store }).putWrites(second, [['animals', 'emu']], 'task-d')
          await store.close()
          expect((await reads(backend, options, second)).tuple.value?.pendingWrites).toEqual([
            ['task-c', 'animals', 'owl'],
            ['task-d', 'animals', 'emu'],
          ])
        } finally {
          await backend.cleanup()
        }
      })

      it('a deleted pending write is a CheckpointCorruptionError naming thread, checkpoint and task', async () => {
        const backend = await open()
        try {
          const { first, runId } = await threadWithWrites(backend, options)
          const rows = await backend.rows(runId)
          await backend.replace(runId, rows.filter((row) => !(row.taskId === 'task-b')))
          const { tuple, listing } = await reads(backend, options, first)
          expectRefused(tuple.error, first, 'task-b')
          expectRefused(listing, first, 'task-b')
        } finally {
          await backend.cleanup()
        }
      })

      it('two writes whose values were swapped are refused', async () => {
        const backend = await open()
        try {
          const { first, runId } = await threadWithWrites(backend, options)
          const rows = await backend.rows(runId)
          const a = rows.find((row) => row.taskId === 'task-a' && row.channel === 'animals')!
          const b = rows.find(isTask('task-b'))!
          await backend.replace(
            runId,
            rows.map((row) => (byKey(row) === byKey(a) ? { ...row, value: b.value } : byKey(row) === byKey(b) ? { ...row, value: a.value } : row)),
          )
          const { tuple, listing } = await reads(backend, options, first)
          expectRefused(tuple.error, first, 'task-a')
          expectRefused(listing, first, 'task-a')
          // A signed store refuses each swapped row itself: its signature covers its key.
          if (keyed) expect(tuple.error).toBeInstanceOf(CheckpointIntegrityError)
        } finally {
          await backend.cleanup()
        }
      })

      it('a write moved to another checkpoint is refused at both checkpoints', async () => {
        const backend = await open()
        try {
          const { first, second, runId } = await threadWithWrites(backend, options)
          const rows = await backend.rows(runId)
          const target = rows.find(isTask('task-c'))!.checkpointId
          await backend.replace(
            runId,
            rows.map((row) => (row.taskId === 'task-b' ? { ...row, checkpointId: target } : row)),
          )
          const { tuple, listing } = await reads(backend, options, second)
          expectRefused(tuple.error, second, 'task-b')
          expect(listing).toBeInstanceOf(CheckpointCorruptionError)
          expectRefused((await reads(backend, options, first)).tuple.error, first, 'task-b')
        } finally {
          await backend.cleanup()
        }
      })

      it('a garbage value is a CheckpointCorruptionError, not an untyped error', async () => {
        const backend = await open()
        try {
          const { first, runId } = await threadWithWrites(backend, options)
          const rows = await backend.rows(runId)
          const garbage = JSON.stringify({ t: 'json', s: '{not json' })
          await backend.replace(
            runId,
            rows.map((row) => (row.taskId === 'task-b' ? { ...row, value: garbage } : row)),
          )
          const { tuple, listing } = await reads(backend, options, first)
          expectRefused(tuple.error, first, 'task-b')
          expectRefused(listing, first, 'task-b')
          if (keyed) expect(tuple.error).toBeInstanceOf(CheckpointIntegrityError)
        } finally {
          await backend.cleanup()
        }
      })

      it('writes whose ledger was deleted are refused', async () => {
        const backend = await open()
        try {
          const { first, runId } = await threadWithWrites(backend, options)
          const rows = await backend.rows(runId)
          const ledgerOfFirst = rows.find((row) => row.checkpointId !== rows.find(isTask('task-c'))!.checkpointId && !row.taskId.startsWith('task-'))!
          await backend.replace(
            runId,
            rows.filter((row) => byKey(row) !== byKey(ledgerOfFirst)),
          )
          const { tuple, listing } = await reads(backend, options, first)
          expectRefused(tuple.error, first, 'task-a')
          expect(listing).toBeInstanceOf(CheckpointCorruptionError)
        } finally {
          await backend.cleanup()
        }
      })
    })
  }
}

describe("CairnSaver's pending writes", () => {
  it('writes of parallel tasks put at once are all in the ledger', async () => {
    const backend = await sqliteWrites()
    try {
      const store = backend.open({})
      const saver = new CairnSaver({ store })
      const config = (await saver.put({ configurable: { thread_id: 'chat-9', checkpoint_ns: '' } }, checkpoint({ n: 1 }), meta, { n: 1 })) as Config
      await Promise.all(Array.from({ length: 12 }, (_, k) => saver.putWrites(config, [['animals', `animal ${k}`]], `task-${String(k).padStart(2, '0')}`)))
      await store.close()
      const { tuple } = await reads(backend, {}, config)
      expect(tuple.error).toBeUndefined()
      expect(tuple.value?.pendingWrites?.map((write) => write[2])).toEqual(Array.from({ length: 12 }, (_, k) => `animal ${k}`))
    } finally {
      await backend.cleanup()
    }
  })

  it('writes put while their checkpoint is still being put (LangGraph does not wait) are all in the ledger, with no read of the store', async () => {
    const backend = await sqliteWrites()
    try {
      const store = backend.open({})
      let storeReads = 0
      const listPendingWrites = store.listPendingWrites.bind(store)
      store.listPendingWrites = (...args) => {
        storeReads++
        return listPendingWrites(...args)
      }
      const saver = new CairnSaver({ store })
      const parent = (await saver.put({ configurable: { thread_id: 'chat-9', checkpoint_ns: '' } }, checkpoint({ n: 1 }), meta, { n: 1 })) as Config
      // The next checkpoint, with the writes of its first task put before the put is done, and of a second task after.
      const next = checkpoint({ n: 2 })
      const config: Config = { configurable: { ...parent.configurable, checkpoint_id: next.id } }
      const putting = saver.put(parent, next, { ...meta, step: 1 }, { n: 2 })
      const early = saver.putWrites(config, [['animals', 'dog']], 'task-a')
      await putting
      await early
      await saver.putWrites(config, [['animals', 'cat']], 'task-b')
      expect(storeReads).toBe(0)
      await store.close()
      const { tuple } = await reads(backend, {}, config)
      expect(tuple.error).toBeUndefined()
      expect(tuple.value?.pendingWrites?.map((write) => write[2])).toEqual(['dog', 'cat'])
    } finally {
      await backend.cleanup()
    }
  })

  it('writes put before their checkpoint is (LangGraph puts it once the put before is done) stay in the ledger with a late task’s writes', async () => {
    const backend = await sqliteWrites()
    try {
      const store = backend.open({})
      const saver = new CairnSaver({ store })
      const parent = (await saver.put({ configurable: { thread_id: 'chat-9', checkpoint_ns: '' } }, checkpoint({ n: 1 }), meta, { n: 1 })) as Config
      const next = checkpoint({ n: 2 })
      const config: Config = { configurable: { ...parent.configurable, checkpoint_id: next.id } }
      // Two quick tasks finish before the checkpoint is put, a slow one after.
      await saver.putWrites(config, [['animals', 'dog']], 'task-a')
      await saver.putWrites(config, [['animals', 'cat']], 'task-b')
      await saver.put(parent, next, { ...meta, step: 1 }, { n: 2 })
      await saver.putWrites(config, [['animals', 'owl']], 'task-c')
      await store.close()
      const { tuple } = await reads(backend, {}, config)
      expect(tuple.error).toBeUndefined()
      expect(tuple.value?.pendingWrites?.map((write) => write[2])).toEqual(['dog', 'cat', 'owl'])
    } finally {
      await backend.cleanup()
    }
  })

  it('a value the serde cannot read back is a CheckpointCorruptionError naming the task', async () => {
    const backend = await memoryWrites()
    const store = backend.open({})
    const config = (await new CairnSaver({ store }).put({ configurable: { thread_id: 'chat-9', checkpoint_ns: '' } }, checkpoint({ n: 1 }), meta, { n: 1 })) as Config
    const writer = new CairnSaver({ store })
    await writer.putWrites(config, [['animals', 'dog']], 'task-a')
    const failing: SerializerProtocol = {
      dumpsTyped: (value) => (writer as unknown as { serde: SerializerProtocol }).serde.dumpsTyped(value),
      loadsTyped: async (type, data) => {
        if (type === 'json' && String(data).includes('dog')) throw new SyntaxError('unexpected token')
        return (await (writer as unknown as { serde: SerializerProtocol }).serde.loadsTyped(type, data)) as unknown
      },
    }
    const error = await new CairnSaver({ store, serde: failing }).getTuple(config).catch((err: unknown) => err)
    expectRefused(error, config, 'task-a')
    expect((error as Error).cause).toBeInstanceOf(SyntaxError)
  })

  it('the ledger task id is refused as a task id', async () => {
    const backend = await memoryWrites()
    const saver = new CairnSaver({ store: backend.open({}) })
    const config = await saver.put({ configurable: { thread_id: 'chat-9', checkpoint_ns: '' } }, checkpoint({ n: 1 }), meta, { n: 1 })
    await expect(saver.putWrites(config, [['animals', 'dog']], 'cairn:writes')).rejects.toBeInstanceOf(InvalidArgumentError)
  })
})
