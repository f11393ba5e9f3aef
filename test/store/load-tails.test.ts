import { afterAll, describe, expect, it } from 'vitest'
import { CheckpointCorruptionError, CheckpointIntegrityError, type CheckpointStore, type EngineStoreOptions } from '../../src/index.js'
import { fileBackend, postgresBackend, removeTempDirs, sqliteBackend, type RawBackend } from '../trust/raw-rows.js'
import { KEY_A } from '../trust/scenario.js'

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

const item = (k: number) => ({ k, text: `message ${k} ${'x'.repeat(200)}` })
const items = (n: number) => Array.from({ length: n }, (_, k) => item(k))

/** Checkpoints 1..4 of one run whose `log` array (a stored list) holds 10, 20, 30 and 40 items. */
async function growingRun(store: CheckpointStore, runId: string): Promise<string[]> {
  const ids: string[] = []
  for (const n of [10, 20, 30, 40]) ids.push(await store.save({ runId, kind: 'demo', phase: 'step', payload: { n, log: items(n) } }))
  return ids
}

describe.each(BACKENDS)('loadTails on %s', (_name, makeBackend) => {
  describe.each(MODES)('%s', (_mode, options, Refused) => {
    it('reads a list only past the items the base checkpoint holds, and says how many it left out', async () => {
      const backend = await makeBackend()
      const store = backend.open(options)
      try {
        const [, second, third, fourth] = await growingRun(store, 'tails')
        const tails = await store.loadTails<{ n: number; log: unknown[] }>([third!, fourth!], { after: second! })
        expect(tails.map((tail) => tail.record.payload.n)).toEqual([30, 40])
        expect(tails[0]!.record.payload.log).toEqual(items(30).slice(20))
        expect(tails[1]!.record.payload.log).toEqual(items(40).slice(20))
        expect(tails.map((tail) => tail.lists)).toEqual([[{ path: ['log'], skipped: 20, length: 30 }], [{ path: ['log'], skipped: 20, length: 40 }]])
        // After itself: no item at all; a record older than the base is read whole.
        const [self] = await store.loadTails<{ log: unknown[] }>([fourth!], { after: fourth! })
        expect(self!.record.payload.log).toEqual([])
        expect(self!.lists).toEqual([{ path: ['log'], skipped: 40, length: 40 }])
        const [older] = await store.loadTails<{ log: unknown[] }>([second!], { after: fourth! })
        expect(older!.record.payload.log).toEqual(items(20))
      } finally {
        await store.close()
      }
    })

    it('refuses a tail whose items were edited, checked from the base chain hash on', async () => {
      const backend = await makeBackend()
      const store = backend.open(options)
      try {
        const [, second, , fourth] = await growingRun(store, 'edited')
        const stored = (await backend.items('edited')).filter((row) => row.idx === 25)
        expect(stored).toHaveLength(1)
        await backend.updateItem('edited', stored[0]!.listId, 25, JSON.stringify(item(99)))
        const fresh = backend.open(options)
        try {
          await expect(fresh.loadTails([fourth!], { after: second! })).rejects.toBeInstanceOf(Refused)
        } finally {
          await fresh.close()
        }
      } finally {
        await store.close()
      }
    })
  })
})
