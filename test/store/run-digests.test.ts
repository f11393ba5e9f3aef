import { afterAll, describe, expect, it } from 'vitest'
import { CheckpointCorruptionError, Runner, type CheckpointStore } from '../../src/index.js'
import { EngineStore, MemoryEngine } from '../../src/engine.js'
import { runDigest, runProgressDigest, type RunRow } from '../../src/engine.js'
import { fileBackend, postgresBackend, removeTempDirs, sqliteBackend, type RawBackend } from '../trust/raw-rows.js'
import { crashedRun, scriptedAgent } from '../trust/scenario.js'

afterAll(removeTempDirs)

const BACKENDS: readonly [string, () => Promise<RawBackend>][] = [
  ['sqlite', sqliteBackend],
  ['file', fileBackend],
  ['postgres', postgresBackend],
]

/** Each field a run row's digest covers, and an edit of its stored value. */
const FIELD_EDITS: readonly [string, (value: unknown) => unknown][] = [
  ['status', () => 'completed'],
  ['name', (value) => `${String(value)}X`],
  ['threadId', () => 'someone-elses-thread'],
  ['workflowName', () => 'another-workflow'],
  ['configSignature', () => 'sig-forged'],
  ['metadata', () => '{"owner":"mallory","responses":{"approve":true}}'],
  ['createdAt', (value) => Number(value) + 1000],
]

/** A run with every field set and two checkpoints, its handle closed. */
async function writeRun(store: CheckpointStore): Promise<void> {
  await store.createRun({ runId: 'r', name: 'agent', threadId: 'thread-1', workflowName: 'flow', configSignature: 'sig-1', metadata: { owner: 'me' } })
  await store.save({ runId: 'r', kind: 'test', phase: 'p', payload: 1 })
  await store.save({ runId: 'r', kind: 'test', phase: 'p', payload: 2 })
  await store.close()
}

/** What each read a resume or a listing makes throws (undefined where it did not). */
async function readErrors(store: CheckpointStore): Promise<Record<string, unknown>> {
  const reads = { getRun: () => store.getRun('r'), listRuns: () => store.listRuns(), getLatest: () => store.getLatest({ runId: 'r' }) }
  const errors: Record<string, unknown> = {}
  for (const [name, read] of Object.entries(reads)) {
    errors[name] = await read().then(
      () => undefined,
      (err: unknown) => err,
    )
  }
  return errors
}

/** Every read refused as corrupt; those named by `naming` (all by default) name `field`. */
function expectCorruption(errors: Record<string, unknown>, field: string, naming: readonly string[] = Object.keys(errors)): void {
  for (const [read, error] of Object.entries(errors)) {
    expect(error).toBeInstanceOf(CheckpointCorruptionError)
    expect(error).toMatchObject({ runId: 'r', code: 'checkpoint_corrupt' })
    if (naming.includes(read)) expect((error as Error).message).toContain(field)
  }
}

for (const [name, open] of BACKENDS) {
  describe(`run rows on ${name} carry digests checked on every read`, { timeout: 60_000 }, () => {
    it('a row as written reads back, with its digest and progress digest stored beside it', async () => {
      const backend = await open()
      await writeRun(backend.open({}))
      const stored = await backend.runColumns('r')
      expect(stored.digest).toBe(runDigest({ ...(stored as unknown as RunRow), createdAt: Number(stored.createdAt) }))
      expect(stored.seal).toBe(runProgressDigest('r', 2))
      const store = backend.open({})
      expect(await readErrors(store)).toEqual({ getRun: undefined, listRuns: undefined, getLatest: undefined })
      await store.close()
    })

    for (const [field, change] of FIELD_EDITS) {
      it(`its ${field} edited in the stored row is a CheckpointCorruptionError naming the run and the field, from getRun, listRuns and getLatest`, async () => {
        const backend = await open()
        await writeRun(backend.open({}))
        const stored = await backend.runColumns('r')
        await backend.writeRunRow('r', { [field]: change(stored[field]) })
        const store = backend.open({})
        expectCorruption(await readErrors(store), field)
        await store.close()
      })
    }

    it('its last seq raised is a CheckpointCorruptionError naming the last seq, from getRun and listRuns', async () => {
      const backend = await open()
      await writeRun(backend.open({}))
      await backend.writeRunRow('r', { lastSeq: 4 })
      const store = backend.open({})
      // getLatest finds the row ahead of every checkpoint: a rollback, refused as such.
      expectCorruption(await readErrors(store), 'last seq', ['getRun', 'listRuns'])
      await store.close()
    })

    it('a write of a status or metadata over an edited row is refused, and leaves it refused: it never re-digests the edit', async () => {
      const backend = await open()
      await writeRun(backend.open({}))
      const store = backend.open({})
      await store.leases!.enqueue({ runId: 'job' })
      await store.close()
      await backend.writeRunRow('r', { name: 'renamed' })
      await backend.writeRunRow('job', { metadata: '{"forged":true}' })
      const reopened = backend.open({})
      await expect(reopened.updateRun('r', { status: 'completed' })).rejects.toBeInstanceOf(CheckpointCorruptionError)
      await expect(reopened.write({ runId: 'r', checkpoints: [{ runId: 'r', kind: 'test', phase: 'p', payload: 3 }], run: { status: 'completed' } })).rejects.toBeInstanceOf(CheckpointCorruptionError)
      await expect(reopened.leases!.cancel('job')).rejects.toBeInstanceOf(CheckpointCorruptionError)
      await expect(reopened.getRun('r')).rejects.toThrow(/\(name\)/)
      await expect(reopened.getRun('job')).rejects.toThrow(/\(metadata\)/)
      await expect(reopened.listRuns()).rejects.toBeInstanceOf(CheckpointCorruptionError)
      expect(await backend.runColumns('r')).toMatchObject({ status: 'running', name: 'renamed', lastSeq: expect.anything() as unknown })
      await reopened.close()
    })

    it('metadata forged into a crashed run stops its resume before any model call or tool run', async () => {
      const backend = await open()
      const store = backend.open({})
      const world = await crashedRun(store, 'crashed')
      await store.close()
      await backend.writeRunRow('crashed', { metadata: '{"forged":true}' })
      const reopened = backend.open({})
      const fresh = scriptedAgent(world)
      const before = [...world.effects]
      const error = await new Runner({ store: reopened }).resume(fresh.agent, { runId: 'crashed' }).then(
        () => undefined,
        (err: unknown) => err,
      )
      expect(error).toBeInstanceOf(CheckpointCorruptionError)
      expect(error).toMatchObject({ runId: 'crashed' })
      expect(fresh.model.calls).toHaveLength(0)
      expect(world.effects).toEqual(before)
      await reopened.close()
    })

    it('a row written before run rows had digests reads, resumes, and gets its digests at its next writes', async () => {
      const backend = await open()
      const store = backend.open({})
      const world = await crashedRun(store, 'old')
      await store.close()
      // As the previous release left it: neither digest.
      await backend.writeRunRow('old', { digest: null, seal: null })
      const reopened = backend.open({})
      expect(await reopened.getRun('old')).toMatchObject({ runId: 'old', status: 'running' })
      const fresh = scriptedAgent(world)
      const resumed = await new Runner({ store: reopened }).resume(fresh.agent, { runId: 'old' })
      expect(resumed.state).not.toBe('failed')
      expect(fresh.model.calls).toHaveLength(0)
      expect(world.count('lookup:')).toBe(2)
      await reopened.close()
      const stored = await backend.runColumns('old')
      expect(stored.digest).toMatch(/^r1\./)
      expect(stored.seal).toBe(runProgressDigest('old', Number(stored.lastSeq)))
    })
  })
}

describe('run rows in memory carry digests checked on every read', () => {
  for (const [field, change] of FIELD_EDITS.filter(([field]) => field !== 'createdAt')) {
    it(`its ${field} changed behind the store (a patch that does not recompute the digest) is a CheckpointCorruptionError naming the field`, async () => {
      const engine = new MemoryEngine()
      await writeRun(new EngineStore(engine))
      const row = (await engine.getRun('r'))! as unknown as Record<string, unknown>
      await engine.updateRun('r', { [field]: change(row[field]), updatedAt: Date.now() })
      expectCorruption(await readErrors(new EngineStore(engine)), field)
    })
  }

  it('a patch that recomputes the digest (as the store writes one) reads back', async () => {
    const engine = new MemoryEngine()
    await writeRun(new EngineStore(engine))
    const before = (await engine.getRun('r'))!
    await engine.updateRun('r', { status: 'paused', updatedAt: Date.now(), swap: { ifDigest: before.digest ?? null, digest: runDigest({ ...before, status: 'paused' }) } })
    expect(await new EngineStore(engine).getRun('r')).toMatchObject({ status: 'paused' })
  })
})
