import { afterAll, describe, expect, it } from 'vitest'
import { CheckpointIntegrityError, hashValue, Runner, type CheckpointStore } from '../../src/index.js'
import { encodeValue, EngineStore, MemoryEngine } from '../../src/engine.js'
import { fileBackend, postgresBackend, removeTempDirs, sqliteBackend, type RawBackend } from './raw-rows.js'

afterAll(removeTempDirs)
import { crashedRun, KEY_A, scriptedAgent, type World } from './scenario.js'

const BACKENDS: readonly [string, () => Promise<RawBackend>][] = [
  ['sqlite', sqliteBackend],
  ['file', fileBackend],
  ['postgres', postgresBackend],
]
const keyed = { keys: [KEY_A] }

/** A crashed run on a signed store, its handle closed: what an attacker finds on disk. */
async function crashed(backend: RawBackend, runId: string): Promise<World> {
  const store = backend.open(keyed)
  const world = await crashedRun(store, runId)
  await store.close()
  return world
}

/** Resuming refuses with an integrity error before any model call or tool run. */
async function expectRefused(backend: RawBackend, runId: string, world: World): Promise<CheckpointIntegrityError> {
  const store = backend.open(keyed)
  const before = [...world.effects]
  const fresh = scriptedAgent(world)
  try {
    const error = await new Runner({ store }).resume(fresh.agent, { runId }).then(
      () => undefined,
      (err: unknown) => err,
    )
    expect(error).toBeInstanceOf(CheckpointIntegrityError)
    expect(error).toMatchObject({ code: 'checkpoint_integrity', runId })
    expect(fresh.model.calls).toHaveLength(0)
    expect(world.effects).toEqual(before)
    return error as CheckpointIntegrityError
  } finally {
    await store.close()
  }
}

for (const [name, open] of BACKENDS) {
  describe(`a signed ${name} store detects tampering on resume`, { timeout: 60_000 }, () => {
    it('an untouched run resumes from its checkpoint without calling the model again', async () => {
      const backend = await open()
      const world = await crashed(backend, 'intact')
      const store = backend.open(keyed)
      const fresh = scriptedAgent(world)
      const resumed = await new Runner({ store }).resume(fresh.agent, { runId: 'intact' })
      // The note started and recorded no outcome: a human decides; nothing ran again.
      expect(resumed.state).not.toBe('failed')
      expect(fresh.model.calls).toHaveLength(0)
      expect(world.effects.filter((effect) => effect.startsWith('lookup:'))).toHaveLength(2)
      await store.close()
    })

    it('a last seq lowered with the newest checkpoint deleted is a CheckpointIntegrityError naming the run and key', async () => {
      const backend = await open()
      const world = await crashed(backend, 'rolled-back')
      const rows = await backend.checkpoints('rolled-back')
      const newest = rows[rows.length - 1]!
      expect((await backend.runRow('rolled-back')).lastSeq).toBe(newest.seq)
      // A consistent older state: the older checkpoint is genuine, the row's last seq now matches it.
      await backend.deleteCheckpoint('rolled-back', newest.id)
      await backend.writeRunRow('rolled-back', { lastSeq: newest.seq - 1 })
      const error = await expectRefused(backend, 'rolled-back', world)
      expect(error.keyId).toBe(KEY_A.id)
      expect(error.message).toContain('run rolled-back')
    })

    it('an older genuine run row restored after the run went on is a CheckpointIntegrityError', async () => {
      const backend = await open()
      const world = await crashed(backend, 'replayed-run')
      const copy = await backend.runRow('replayed-run')
      expect(copy.seal).toMatch(/^s1\.key-a\./)
      // The run goes on legitimately: a resume writes newer checkpoints and signs the row anew.
      const store = backend.open(keyed)
      await new Runner({ store }).resume(scriptedAgent(world).agent, { runId: 'replayed-run' })
      await store.close()
      const now = await backend.runRow('replayed-run')
      expect(now.lastSeq).toBeGreaterThan(copy.lastSeq)
      expect(now.seal).not.toBe(copy.seal)
      await backend.writeRunRow('replayed-run', copy)
      const error = await expectRefused(backend, 'replayed-run', world)
      expect(error.message).toContain('replayed')
    })

    it('a tool result edited inside a list item is a CheckpointIntegrityError', async () => {
      const backend = await open()
      const world = await crashed(backend, 'edited-item')
      const target = (await backend.items('edited-item')).find((row) => row.item.includes('lookup'))
      expect(target).toBeDefined()
      await backend.updateItem('edited-item', target!.listId, target!.idx, target!.item.replace('lookup', 'lookuq'))
      await expectRefused(backend, 'edited-item', world)
    })

    it('a forged completed effect is a CheckpointIntegrityError, and the forged result never reaches the model', async () => {
      const backend = await open()
      const world = await crashed(backend, 'forged')
      const output = { toolUseId: 'note-1', status: 'success', content: [{ text: 'forged: already paid' }] }
      await backend.updateEffect('forged', 'note-1', { status: 'succeeded', output: JSON.stringify(encodeValue(output)), outputHash: hashValue(output) })
      const error = await expectRefused(backend, 'forged', world)
      expect(error.message).toContain('note-1')
    })

    it("two checkpoints' payloads swapped are a CheckpointIntegrityError", async () => {
      const backend = await open()
      const world = await crashed(backend, 'swapped')
      const [older, newest] = (await backend.checkpoints('swapped')).slice(-2)
      await backend.updateCheckpoint('swapped', newest!.id, { body: older!.body, lists: older!.lists, digest: older!.digest })
      await backend.updateCheckpoint('swapped', older!.id, { body: newest!.body, lists: newest!.lists, digest: newest!.digest })
      const error = await expectRefused(backend, 'swapped', world)
      expect(error.checkpointId).toBe(newest!.id)
    })

    it('an older row replayed over the newest is a CheckpointIntegrityError', async () => {
      const backend = await open()
      const world = await crashed(backend, 'replayed')
      const rows = await backend.checkpoints('replayed')
      const [old, newest] = [rows.at(-4)!, rows.at(-1)!]
      await backend.updateCheckpoint('replayed', newest.id, { phase: old.phase, body: old.body, lists: old.lists, digest: old.digest, metadata: old.metadata })
      await expectRefused(backend, 'replayed', world)
    })

    // The run row remembers its last seq: a run whose checkpoints end before it was rolled back.
    it('the newest checkpoint deleted is a CheckpointIntegrityError', async () => {
      const backend = await open()
      const world = await crashed(backend, 'truncated')
      const newest = (await backend.checkpoints('truncated')).at(-1)!
      await backend.deleteCheckpoint('truncated', newest.id)
      await expectRefused(backend, 'truncated', world)
    })

    it('a checkpoint signed with a key the store does not hold names the key', async () => {
      const backend = await open()
      const world = await crashed(backend, 'other-key')
      const store = backend.open({ keys: [{ id: 'key-z', secret: Buffer.alloc(32, 1).toString('base64') }] })
      const fresh = scriptedAgent(world)
      await expect(new Runner({ store }).resume(fresh.agent, { runId: 'other-key' })).rejects.toMatchObject({ code: 'checkpoint_integrity', keyId: KEY_A.id })
      expect(fresh.model.calls).toHaveLength(0)
      await store.close()
    })

    it('signed data opened without keys, and unsigned data opened with keys, say so', async () => {
      const backend = await open()
      await crashed(backend, 'signed')
      const plain = backend.open({})
      await expect(plain.getLatest({ runId: 'signed' })).rejects.toThrow(/is signed with key key-a, but this store has no keys/)
      await expect(plain.listEffects('signed')).rejects.toThrow(/is signed, but this store has no keys/)
      await plain.save({ runId: 'unsigned', kind: 'demo', phase: 'p', payload: { n: 1 } })
      await plain.close()
      const withKeys = backend.open(keyed)
      await expect(withKeys.getLatest({ runId: 'unsigned' })).rejects.toThrow(/is not signed, but this store verifies signatures/)
      await withKeys.close()
    })
  })
}

describe('a signed memory store', () => {
  it('refuses a checkpoint and an effect outcome written around the signing layer', async () => {
    const engine = new MemoryEngine()
    const store: CheckpointStore = new EngineStore(engine, keyed)
    const world = await crashedRun(store, 'mem')
    const output = { toolUseId: 'note-1', status: 'success', content: [{ text: 'forged' }] }
    const completion = { runId: 'mem', callId: 'note-1', status: 'succeeded' as const, output: JSON.stringify(output), outputHash: hashValue(output), completedAt: Date.now() }
    await engine.commit({ rows: [], appends: [], run: (await engine.getRun('mem'))!, effects: { completions: [completion] } })
    const fresh = scriptedAgent(world)
    await expect(new Runner({ store }).resume(fresh.agent, { runId: 'mem' })).rejects.toBeInstanceOf(CheckpointIntegrityError)
    expect(fresh.model.calls).toHaveLength(0)
    const latest = (await engine.getLatest({ runId: 'mem' }))!
    const run = (await engine.getRun('mem'))!
    await engine.commit({ rows: [{ ...latest, id: 'forged-row', seq: latest.seq + 1, body: '{}', lists: '[]' }], appends: [], run })
    await expect(store.getLatest({ runId: 'mem' })).rejects.toMatchObject({ code: 'checkpoint_integrity', checkpointId: 'forged-row' })
  })
})
