import { spawnSync } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import { afterAll, describe, expect, it } from 'vitest'
import { CheckpointIntegrityError, EncryptionChangeError, KeyRing, Runner, type EngineStoreOptions, type RekeyOptions } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { fileBackend, postgresBackend, removeTempDirs, sqliteBackend, type RawBackend } from './raw-rows.js'

afterAll(removeTempDirs)
import { crashedRun, KEY_A, KEY_B, scriptedAgent, SECRET, World } from './scenario.js'

const child = fileURLToPath(new URL('./rotation-child.ts', import.meta.url))
const dirs: string[] = []
afterAll(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true })
})

function runChild(path: string, action: 'start' | 'rekey', keys: string): string {
  const result = spawnSync(process.execPath, ['--import', 'tsx', child, path, action], { env: { ...process.env, CAIRN_KEYS: keys }, encoding: 'utf8' })
  if (result.status !== 0) throw new Error(`rotation child (${action}) failed: ${result.stderr}`)
  return result.stdout
}

const envOf = (...keys: { id: string; secret: string }[]) => keys.map((key) => `${key.id}:${key.secret}`).join(',')

describe('key rotation', () => {
  it('end to end across processes: write with A, rekey to B in another process, then read and resume with B alone', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-rotation-'))
    dirs.push(dir)
    const path = join(dir, 'cairn.db')
    runChild(path, 'start', envOf(KEY_A))
    const progress = runChild(path, 'rekey', envOf(KEY_B, KEY_A))
    expect(progress).toMatch(/rekeyed 1\/1 rotated \(\d+ records\)/)
    const db = new Database(path, { readonly: true })
    const digests = db.prepare('SELECT digest FROM checkpoints').pluck().all() as string[]
    const hashes = db.prepare('SELECT input_hash || coalesce(output_hash, \'\') FROM effects').pluck().all() as string[]
    db.close()
    // One stored row per step: the light phases ride in the phase log of the rows.
    expect(digests.length).toBeGreaterThan(3)
    for (const digest of digests) expect(digest.startsWith('s1.key-b.')).toBe(true)
    for (const hash of hashes) expect(hash).not.toContain('key-a')

    // Key A is dropped: everything still reads and the run resumes where it stopped.
    const store = new SqliteStore({ path, keys: KeyRing.fromEnv(envOf(KEY_B))!, encrypt: true })
    const world = new World()
    const fresh = scriptedAgent(world)
    const resumed = await new Runner({ store }).resume(fresh.agent, { runId: 'rotated' })
    expect(resumed.state).not.toBe('failed')
    expect(fresh.model.calls).toHaveLength(0)
    const history = await new Runner({ store }).history('rotated')
    expect(history.filter((entry) => !entry.checkpointId.includes('~')).length).toBe((await store.listCheckpoints({ runId: 'rotated' })).length)
    // The run's events were rewritten under key B too: a store holding only B reads them.
    expect((await store.events!.read('rotated')).length).toBeGreaterThan(0)
    await store.close()
    // A store holding only the old key names the key it lacks.
    const old = new SqliteStore({ path, keys: [KEY_A] })
    await expect(old.getLatest({ runId: 'rotated' })).rejects.toMatchObject({ code: 'checkpoint_integrity', keyId: 'key-b' })
    await old.close()
  }, 120_000)
})

const BACKENDS: readonly [string, () => Promise<RawBackend>][] = [
  ['sqlite', sqliteBackend],
  ['file', fileBackend],
  ['postgres', postgresBackend],
]

for (const [name, open] of BACKENDS) {
  describe(`rekey on ${name}`, { timeout: 60_000 }, () => {
    it('signs a store written without keys, then moves it from key A to key B with encryption turned on', async () => {
      const backend = await open()
      const plain = backend.open({})
      const world = await crashedRun(plain, 'legacy')
      await plain.close()
      await expectRekeyed(backend, { keys: [KEY_A] }, { signUnsigned: true })
      // Turning encryption on takes encrypt: true; a store merely opened with encrypt is refused.
      const unasked = backend.open({ keys: [KEY_B, KEY_A], encrypt: true })
      await expect(unasked.rekey()).rejects.toMatchObject({ name: 'EncryptionChangeError', change: 'encrypt', runId: 'legacy' })
      await unasked.close()
      await expectRekeyed(backend, { keys: [KEY_B, KEY_A], encrypt: true }, { encrypt: true })
      const store = backend.open({ keys: [KEY_B], encrypt: true })
      const fresh = scriptedAgent(world)
      expect((await new Runner({ store }).resume(fresh.agent, { runId: 'legacy' })).state).not.toBe('failed')
      expect(fresh.model.calls).toHaveLength(0)
      expect((await store.rekey()).checkpoints).toBe(0) // nothing left to re-seal
      await store.close()
      const onlyA = backend.open({ keys: [KEY_A] })
      await expect(onlyA.listEffects('legacy')).rejects.toBeInstanceOf(CheckpointIntegrityError)
      await onlyA.close()
    })

    it('a rekey never decrypts unasked: refused without decrypt (nothing written), reported, and done with decrypt: true', async () => {
      const backend = await open()
      const encrypted = backend.open({ keys: [KEY_A], encrypt: true })
      const world = await crashedRun(encrypted, 'sealed')
      await encrypted.close()
      expect(await backend.dump()).not.toContain(SECRET)

      // A rotation opened without encrypt: refused before anything is written.
      const rotating = backend.open({ keys: [KEY_B, KEY_A] })
      const refused = await rotating.rekey().catch((err: unknown) => err)
      expect(refused).toBeInstanceOf(EncryptionChangeError)
      expect(refused).toMatchObject({ code: 'encryption_change', change: 'decrypt', runId: 'sealed' })
      expect((refused as Error).message).toMatch(/would write them in plaintext; open the store with encrypt: true to keep them encrypted, or pass decrypt: true/)
      await expect(rotating.rekey({ encrypt: true })).rejects.toThrow(/needs a store opened with encrypt: true/)
      await rotating.close()
      expect(await backend.dump()).not.toContain(SECRET)
      for (const row of await backend.checkpoints('sealed')) expect(row.digest).toMatch(/^s1\.key-a\./)

      // The same rotation opened with encrypt keeps the store encrypted, and says so.
      const kept = backend.open({ keys: [KEY_B, KEY_A], encrypt: true })
      expect((await kept.rekey()).encrypted).toEqual({ before: 'yes', after: 'yes' })
      await kept.close()
      expect(await backend.dump()).not.toContain(SECRET)

      // Decrypting is asked for by name.
      const plain = backend.open({ keys: [KEY_B] })
      const decrypted = await plain.rekey({ decrypt: true })
      expect(decrypted).toMatchObject({ runs: 1, encrypted: { before: 'yes', after: 'no' } })
      expect(decrypted.checkpoints).toBeGreaterThan(3)
      const fresh = scriptedAgent(world)
      expect((await new Runner({ store: plain }).resume(fresh.agent, { runId: 'sealed' })).state).not.toBe('failed')
      expect(fresh.model.calls).toHaveLength(0)
      await plain.close()
      expect(await backend.dump()).toContain(SECRET)
    })

    it('refuses a run row signed before run rows were, until rekey signs it under the ring', async () => {
      const backend = await open()
      const signed = backend.open({ keys: [KEY_A] })
      const world = await crashedRun(signed, 'older')
      await signed.close()
      // What a store signed before run rows carried a signature looks like.
      await backend.writeRunRow('older', { seal: null })
      const store = backend.open({ keys: [KEY_A] })
      await expect(store.getRun('older')).rejects.toBeInstanceOf(CheckpointIntegrityError)
      expect((await store.rekey()).runs).toBe(1)
      expect((await backend.runRow('older')).seal).toMatch(/^s1\.key-a\./)
      expect((await store.getRun('older'))?.runId).toBe('older')
      const fresh = scriptedAgent(world)
      expect((await new Runner({ store }).resume(fresh.agent, { runId: 'older' })).state).not.toBe('failed')
      expect(fresh.model.calls).toHaveLength(0)
      await store.close()
    })
  })
}

async function expectRekeyed(backend: RawBackend, options: EngineStoreOptions, rekey: RekeyOptions): Promise<void> {
  const store = backend.open(options)
  if (rekey.signUnsigned !== true) await expect(store.getLatest({ runId: 'legacy' })).resolves.toBeDefined()
  else await expect(store.getLatest({ runId: 'legacy' })).rejects.toBeInstanceOf(CheckpointIntegrityError)
  const result = await store.rekey(rekey)
  expect(result.runs).toBe(1)
  expect(result.checkpoints).toBeGreaterThan(3)
  expect(result.effects).toBe(3)
  expect((await new Runner({ store }).history('legacy')).length).toBeGreaterThan(5)
  await store.close()
}
