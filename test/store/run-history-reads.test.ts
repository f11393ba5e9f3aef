import { afterAll, describe, expect, it } from 'vitest'
import { CheckpointCorruptionError, CheckpointIntegrityError, Runner, type CheckpointStore, type EngineStoreOptions } from '../../src/index.js'
import { EngineStore, MemoryEngine } from '../../src/engine.js'
import { fileBackend, postgresBackend, removeTempDirs, sqliteBackend, type RawBackend } from '../trust/raw-rows.js'
import { KEY_A, scriptedAgent, World } from '../trust/scenario.js'

afterAll(removeTempDirs)

const BACKENDS: readonly [string, () => Promise<RawBackend>][] = [
  ['sqlite', sqliteBackend],
  ['file', fileBackend],
  ['postgres', postgresBackend],
]
const MODES: readonly [string, EngineStoreOptions, typeof CheckpointCorruptionError][] = [
  ['without keys', {}, CheckpointCorruptionError],
  ['signed', { keys: [KEY_A] }, CheckpointIntegrityError],
]

/** A finished runner run, plus checkpoints of another kind in the same run, its handle closed. */
async function finishedRun(backend: RawBackend, options: EngineStoreOptions, runId: string): Promise<void> {
  const store = backend.open(options)
  const result = await new Runner({ store, durability: 'sync' }).run(scriptedAgent(new World()).agent, { input: 'research', runId })
  expect(result.state).toBe('completed')
  await store.close()
}

/** The store as seen through a wrapper that does not have `loadRun`. */
async function historyError(store: CheckpointStore, runId: string): Promise<unknown> {
  return new Runner({ store }).history(runId).then(
    () => undefined,
    (err: unknown) => err,
  )
}

for (const [name, open] of BACKENDS) {
  for (const [mode, options, Refusal] of MODES) {
    describe(`a run's whole history on ${name} (${mode})`, { timeout: 60_000 }, () => {
      it('runner.history holds every runner checkpoint oldest first, each as load reads it', async () => {
        const backend = await open()
        await finishedRun(backend, options, 'whole')
        const store = backend.open(options)
        try {
          const history = await new Runner({ store }).history('whole')
          const raw = await backend.checkpoints('whole')
          // Every stored row, in order, and between them the light phases of their phase logs (`<stored id>~<n>`).
          const stored = history.filter((entry) => !entry.checkpointId.includes('~'))
          expect(stored.map((entry) => entry.checkpointId)).toEqual(raw.map((row) => row.id))
          expect(history.length).toBeGreaterThan(stored.length)
          for (const entry of history) expect(raw.map((row) => row.id)).toContain(entry.checkpointId.split('~')[0])
          expect(history.at(-1)?.phase).toBe('run_terminal')
          for (const entry of stored) expect(entry.payload).toEqual((await store.load(entry.checkpointId)).payload)
        } finally {
          await store.close()
        }
      })

      it('loadRun reads only the checkpoints of the kind asked for', async () => {
        const backend = await open()
        const store = backend.open(options)
        try {
          await store.save({ runId: 'kinds', kind: 'a', phase: 'one', payload: { n: 1 } })
          await store.save({ runId: 'kinds', kind: 'b', phase: 'two', payload: { n: 2 } })
          await store.save({ runId: 'kinds', kind: 'a', phase: 'three', payload: { n: 3 } })
          const all = await store.loadRun('kinds')
          expect(all.map((record) => record.phase)).toEqual(['one', 'two', 'three'])
          const onlyA = await store.loadRun('kinds', { kind: 'a' })
          expect(onlyA.map((record) => record.payload)).toEqual([{ n: 1 }, { n: 3 }])
          expect(await store.loadRun('no-such-run')).toEqual([])
        } finally {
          await store.close()
        }
      })

      for (const field of ['body', 'metadata', 'phase'] as const) {
        it(`an edited ${field} of one checkpoint in the middle of the run fails the whole history, naming that checkpoint`, async () => {
          const backend = await open()
          await finishedRun(backend, options, 'edited')
          const raw = await backend.checkpoints('edited')
          const target = raw[Math.floor(raw.length / 2)]!
          const edited = field === 'phase' ? 'post_tool_batch_' : target[field].replace(/\d/, (d) => String((Number(d) + 1) % 10))
          expect(edited).not.toBe(target[field])
          await backend.updateCheckpoint('edited', target.id, { [field]: edited })
          const store = backend.open(options)
          try {
            const error = await historyError(store, 'edited')
            expect(error).toBeInstanceOf(Refusal)
            expect(error).toMatchObject({ runId: 'edited', checkpointId: target.id })
          } finally {
            await store.close()
          }
        })
      }

      it('an edited message in the conversation list fails the whole history', async () => {
        const backend = await open()
        await finishedRun(backend, options, 'item')
        const [item] = await backend.items('item')
        await backend.updateItem('item', item!.listId, item!.idx, item!.item.replace('research', 'rEsearch'))
        const store = backend.open(options)
        try {
          const error = await historyError(store, 'item')
          expect(error).toBeInstanceOf(Refusal)
          expect(error).toMatchObject({ runId: 'item' })
        } finally {
          await store.close()
        }
      })

      it('a run whose newest checkpoint was removed behind the store is refused as rolled back', async () => {
        const backend = await open()
        await finishedRun(backend, options, 'rolled')
        const raw = await backend.checkpoints('rolled')
        await backend.deleteCheckpoint('rolled', raw.at(-1)!.id)
        const store = backend.open(options)
        try {
          const error = await historyError(store, 'rolled')
          expect(error).toBeInstanceOf(CheckpointCorruptionError)
          expect((error as Error).message).toMatch(/rolled back/)
          await expect(store.loadRun('rolled')).rejects.toThrow(/rolled back/)
        } finally {
          await store.close()
        }
      })
    })
  }
}

describe('getLatest on a signed store', () => {
  it('reads the run row, the newest checkpoint and its lists in one engine call, and still refuses an edited run row', async () => {
    const engine = new MemoryEngine()
    const calls: string[] = []
    const counted = new Proxy(engine, {
      get(target, property) {
        const value = Reflect.get(target, property) as unknown
        if (typeof value !== 'function') return value
        return (...args: unknown[]) => {
          calls.push(String(property))
          return (value as (...a: unknown[]) => unknown).apply(target, args)
        }
      },
    })
    const store = new EngineStore(counted, { keys: [KEY_A] })
    await store.save({ runId: 'r', kind: 'k', phase: 'one', payload: { n: 1, list: ['a'] } })
    await store.save({ runId: 'r', kind: 'k', phase: 'two', payload: { n: 2, list: ['a', 'b'] } })
    calls.length = 0
    expect((await store.getLatest({ runId: 'r' }))?.payload).toEqual({ n: 2, list: ['a', 'b'] })
    expect(calls).toEqual(['loadRun'])
    const row = (await engine.getRun('r'))!
    await engine.updateRun('r', { seal: `${row.seal!.slice(0, -4)}AAAA`, updatedAt: Date.now() })
    await expect(store.getLatest({ runId: 'r' })).rejects.toBeInstanceOf(CheckpointIntegrityError)
  })
})
