import { afterAll, describe, expect, it } from 'vitest'
import { CheckpointIntegrityError, Runner, type CheckpointStore } from '../../src/index.js'
import { EngineStore, MemoryEngine } from '../../src/engine.js'
import { runDigest, runProgressDigest, type RunRow } from '../../src/engine.js'
import { fileBackend, postgresBackend, removeTempDirs, sqliteBackend, type RawBackend } from './raw-rows.js'
import { crashedRun, KEY_A, scriptedAgent } from './scenario.js'

afterAll(removeTempDirs)

const BACKENDS: readonly [string, () => Promise<RawBackend>][] = [
  ['sqlite', sqliteBackend],
  ['file', fileBackend],
  ['postgres', postgresBackend],
]
const keyed = { keys: [KEY_A] }

/** Each field a run row's signature covers, and an edit of its stored value. */
const FIELD_EDITS: readonly [string, (value: unknown) => unknown][] = [
  ['status', () => 'completed'],
  ['name', (value) => `${String(value)}X`],
  ['threadId', () => 'someone-elses-thread'],
  ['workflowName', () => 'another-workflow'],
  ['configSignature', () => 'sig-forged'],
  ['metadata', () => '{"owner":"mallory","responses":{"approve":true}}'],
  ['createdAt', (value) => Number(value) + 1000],
]

async function writeRun(store: CheckpointStore, runId = 'r'): Promise<void> {
  await store.createRun({ runId, name: 'agent', threadId: 'thread-1', workflowName: 'flow', configSignature: 'sig-1', metadata: { owner: 'me' } })
  await store.save({ runId, kind: 'test', phase: 'p', payload: 1 })
  await store.save({ runId, kind: 'test', phase: 'p', payload: 2 })
}

/** Every read of the run a resume or a listing makes is refused as an integrity failure. */
async function expectRefused(store: CheckpointStore, runId = 'r'): Promise<void> {
  const reads = [() => store.getRun(runId), () => store.listRuns(), () => store.getLatest({ runId })]
  for (const read of reads) {
    const error = await read().then(
      () => undefined,
      (err: unknown) => err,
    )
    expect(error).toBeInstanceOf(CheckpointIntegrityError)
    expect(error).toMatchObject({ code: 'checkpoint_integrity', runId })
  }
}

/** The stored row with its numeric columns as numbers (Postgres hands some back as strings). */
function asRunRow(stored: Record<string, unknown>): RunRow {
  return { ...(stored as unknown as RunRow), createdAt: Number(stored.createdAt), lastSeq: Number(stored.lastSeq) }
}

for (const [name, open] of BACKENDS) {
  describe(`a signed ${name} store signs every trusted field of a run row`, { timeout: 60_000 }, () => {
    it('a row as written carries signatures, not digests, and reads back', async () => {
      const backend = await open()
      const store = backend.open(keyed)
      await writeRun(store)
      await store.close()
      const stored = await backend.runColumns('r')
      expect(stored.digest).toMatch(/^s1\.key-a\./)
      expect(stored.seal).toMatch(/^s1\.key-a\./)
      const reopened = backend.open(keyed)
      expect(await reopened.getRun('r')).toMatchObject({ status: 'running', name: 'agent', metadata: { owner: 'me' } })
      await reopened.close()
    })

    for (const [field, change] of FIELD_EDITS) {
      it(`its ${field} edited, with the unkeyed digest recomputed over the edit, is a CheckpointIntegrityError`, async () => {
        const backend = await open()
        const store = backend.open(keyed)
        await writeRun(store)
        await store.close()
        const stored = await backend.runColumns('r')
        const edited = { ...asRunRow(stored), [field]: change(stored[field]) }
        await backend.writeRunRow('r', { [field]: edited[field as keyof RunRow], digest: runDigest(edited) })
        const reopened = backend.open(keyed)
        await expectRefused(reopened)
        await reopened.close()
      })
    }

    it('a status change over an edited row is refused: it never signs the edit', async () => {
      const backend = await open()
      const store = backend.open(keyed)
      await writeRun(store)
      await store.close()
      await backend.writeRunRow('r', { metadata: '{"owner":"mallory"}' })
      const reopened = backend.open(keyed)
      await expect(reopened.updateRun('r', { status: 'completed' })).rejects.toBeInstanceOf(CheckpointIntegrityError)
      await expectRefused(reopened)
      await reopened.close()
    })

    it('its last seq raised, with the unkeyed progress digest put in its seal, is a CheckpointIntegrityError', async () => {
      const backend = await open()
      const store = backend.open(keyed)
      await writeRun(store)
      await store.close()
      await backend.writeRunRow('r', { lastSeq: 4, seal: runProgressDigest('r', 4) })
      const reopened = backend.open(keyed)
      await expectRefused(reopened)
      await reopened.close()
    })

    it('a row whose seal lags its newest checkpoint by a commit cut short reads back; the same seal from another run is refused', async () => {
      const backend = await open()
      const store = backend.open(keyed)
      await store.createRun({ runId: 'r', name: 'agent', metadata: {} })
      await store.createRun({ runId: 'twin', name: 'agent', metadata: {} })
      await store.save({ runId: 'r', kind: 'test', phase: 'p', payload: 1 })
      await store.save({ runId: 'twin', kind: 'test', phase: 'p', payload: 1 })
      const sealAtFirst = (await backend.runRow('r')).seal
      const twinSealAtFirst = (await backend.runRow('twin')).seal
      await store.save({ runId: 'r', kind: 'test', phase: 'p', payload: 2 })
      await store.close()
      const { lastSeq } = await backend.runRow('r')
      // The checkpoint and the row's seq are durable, its seal is still the previous commit's.
      await backend.writeRunRow('r', { lastSeq, seal: sealAtFirst })
      const reopened = backend.open(keyed)
      expect(await reopened.getRun('r')).toMatchObject({ runId: 'r', status: 'running' })
      expect(await reopened.getLatest({ runId: 'r' })).toMatchObject({ payload: 2 })
      await reopened.close()
      await backend.writeRunRow('r', { lastSeq, seal: twinSealAtFirst })
      const again = backend.open(keyed)
      await expectRefused(again)
      await again.close()
    })

    it("another run's signature copied onto a row with the same fields is a CheckpointIntegrityError", async () => {
      const backend = await open()
      const store = backend.open(keyed)
      await writeRun(store, 'r')
      await writeRun(store, 'twin')
      await store.close()
      const twin = await backend.runColumns('twin')
      await backend.writeRunRow('r', { digest: twin.digest, createdAt: twin.createdAt })
      const reopened = backend.open(keyed)
      await expectRefused(reopened)
      await reopened.close()
    })

    it('a row written before run rows were signed whole is refused until store.rekey() signs it, then reads back', async () => {
      const backend = await open()
      const store = backend.open(keyed)
      await writeRun(store)
      await store.close()
      // As a keyed store of the previous release left it: the progress signed, the fields not.
      await backend.writeRunRow('r', { digest: null })
      const reopened = backend.open(keyed)
      await expect(reopened.getRun('r')).rejects.toThrow(/store\.rekey\(\)/)
      await expectRefused(reopened)
      await reopened.rekey()
      expect(await reopened.getRun('r')).toMatchObject({ status: 'running', metadata: { owner: 'me' } })
      expect(await reopened.getLatest({ runId: 'r' })).toMatchObject({ payload: 2 })
      await reopened.close()
      expect((await backend.runColumns('r')).digest).toMatch(/^s1\.key-a\./)
    })

    it('a crashed run marked completed, its digest recomputed, is refused on resume before any model call or tool run', async () => {
      const backend = await open()
      const store = backend.open(keyed)
      const world = await crashedRun(store, 'crashed')
      await store.close()
      const edited = { ...asRunRow(await backend.runColumns('crashed')), status: 'completed' as const }
      await backend.writeRunRow('crashed', { status: 'completed', digest: runDigest(edited) })
      const reopened = backend.open(keyed)
      const fresh = scriptedAgent(world)
      const before = [...world.effects]
      const error = await new Runner({ store: reopened }).resume(fresh.agent, { runId: 'crashed' }).then(
        () => undefined,
        (err: unknown) => err,
      )
      expect(error).toBeInstanceOf(CheckpointIntegrityError)
      expect(fresh.model.calls).toHaveLength(0)
      expect(world.effects).toEqual(before)
      await reopened.close()
    })
  })
}

describe('a signed memory store signs every trusted field of a run row', () => {
  for (const [field, change] of FIELD_EDITS.filter(([field]) => field !== 'createdAt')) {
    it(`its ${field} changed behind the store with the unkeyed digest recomputed is a CheckpointIntegrityError`, async () => {
      const engine = new MemoryEngine()
      await writeRun(new EngineStore(engine, keyed))
      const row = (await engine.getRun('r'))! as unknown as Record<string, unknown>
      const edited = { ...(row as unknown as RunRow), [field]: change(row[field]) }
      await engine.updateRun('r', { [field]: change(row[field]), updatedAt: Date.now(), swap: { ifDigest: (row.digest as string | null) ?? null, digest: runDigest(edited) } })
      await expectRefused(new EngineStore(engine, keyed))
    })
  }
})
