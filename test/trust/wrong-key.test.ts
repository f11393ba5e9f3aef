import { afterAll, describe, expect, it } from 'vitest'
import { CheckpointIntegrityError, WrongKeyError } from '../../src/index.js'
import { crashedRun, KEY_A } from './scenario.js'
import { fileBackend, postgresBackend, removeTempDirs, sqliteBackend, type RawBackend } from './raw-rows.js'

afterAll(removeTempDirs)

/** Key A's id with another secret: what a mistyped or swapped CAIRN_KEYS gives. */
const MISTYPED_A = { id: KEY_A.id, secret: Buffer.alloc(32, 8).toString('base64') }

const BACKENDS: readonly [string, () => Promise<RawBackend>][] = [
  ['sqlite', sqliteBackend],
  ['file', fileBackend],
  ['postgres', postgresBackend],
]

for (const [name, open] of BACKENDS) {
  describe(`a wrong secret on ${name}`, { timeout: 60_000 }, () => {
    it('is reported as the wrong secret for the key id, never as tampering, and writes nothing', async () => {
      const backend = await open()
      const right = backend.open({ keys: [KEY_A], encrypt: true })
      await crashedRun(right, 'keyed')
      await right.close()
      const before = await backend.checkpoints('keyed')

      const wrong = backend.open({ keys: [MISTYPED_A], encrypt: true })
      for (const read of [() => wrong.getLatest({ runId: 'keyed' }), () => wrong.listEffects('keyed'), () => wrong.getRun('keyed')]) {
        const err = await read().catch((e: unknown) => e)
        expect(err).toBeInstanceOf(WrongKeyError)
        expect(err).toMatchObject({ code: 'wrong_key', keyId: 'key-a' })
        expect((err as Error).message).toMatch(/^the secret given for key key-a is not the one this store was written with/)
        expect((err as Error).message).not.toMatch(/edited|forged|tamper/)
      }
      // A write under the wrong secret is refused before anything is written.
      await expect(wrong.createRun({ runId: 'other' })).rejects.toBeInstanceOf(WrongKeyError)
      await wrong.close()
      expect(await backend.checkpoints('keyed')).toEqual(before)
      const reopened = backend.open({ keys: [KEY_A], encrypt: true })
      expect(await reopened.getRun('other')).toBeUndefined()

      // With the right secret, an edited record is still what it is: tampering.
      const victim = before[2]!
      await backend.updateCheckpoint('keyed', victim.id, { metadata: '{"edited":true}' })
      const tampered = await reopened.load(victim.id).catch((e: unknown) => e)
      expect(tampered).toBeInstanceOf(CheckpointIntegrityError)
      expect((tampered as Error).message).toMatch(/does not verify under key key-a: it was edited/)
      await reopened.close()
    })
  })
}
