import { afterAll, describe, expect, it } from 'vitest'
import { CheckpointIntegrityError, MemoryStore, Runner } from '../../src/index.js'
import { fileBackend, postgresBackend, removeTempDirs, sqliteBackend, type RawBackend } from './raw-rows.js'

afterAll(removeTempDirs)
import { KEY_A, scriptedAgent, SECRET, World } from './scenario.js'

const BACKENDS: readonly [string, () => Promise<RawBackend>][] = [
  ['sqlite', sqliteBackend],
  ['file', fileBackend],
  ['postgres', postgresBackend],
]
const encrypted = { keys: [KEY_A], encrypt: true }

for (const [name, open] of BACKENDS) {
  describe(`an encrypted ${name} store`, { timeout: 60_000 }, () => {
    it('keeps a secret a tool was given and returned out of every stored byte, and reads it back', async () => {
      const backend = await open()
      const store = backend.open(encrypted)
      const world = new World()
      const run = await new Runner({ store, durability: 'sync' }).run(scriptedAgent(world).agent, { input: `research ${SECRET}`, runId: 'secret-run' })
      expect(run.state).toBe('completed')
      expect(world.effects).toContain(`note:note with ${SECRET}`)
      // While the store is open (SQLite's WAL still holds the commits) and after it is closed.
      expect(await backend.dump()).not.toContain(SECRET)
      const history = await new Runner({ store }).history('secret-run')
      expect(JSON.stringify(history)).toContain(SECRET)
      expect((await store.listEffects('secret-run')).map((effect) => JSON.stringify(effect.output)).join()).toContain(SECRET)
      await store.close()
      const dump = await backend.dump()
      expect(dump).not.toContain(SECRET)
      // Ids and sizes stay readable: listing works from the stored bytes.
      expect(dump).toContain('secret-run')
      const reopened = backend.open(encrypted)
      expect(JSON.stringify(await new Runner({ store: reopened }).history('secret-run'))).toContain(SECRET)
      await reopened.close()
      // The dump does see what a store without encryption keeps.
      const signedOnly = backend.open({ keys: [KEY_A] })
      await new Runner({ store: signedOnly, durability: 'sync' }).run(scriptedAgent(new World()).agent, { input: 'research', runId: 'plain-run' })
      await signedOnly.close()
      expect(await backend.dump()).toContain(SECRET)
    })

    it('refuses an item ciphertext that was edited or moved to another place', async () => {
      const backend = await open()
      const store = backend.open(encrypted)
      await new Runner({ store, durability: 'sync' }).run(scriptedAgent(new World()).agent, { input: 'research', runId: 'sealed' })
      await store.close()
      const items = await backend.items('sealed')
      expect(items.length).toBeGreaterThan(1)
      const [first, second] = items
      // Put item 1's ciphertext in item 0's place: it decrypts only where it was written.
      await backend.updateItem('sealed', first!.listId, first!.idx, second!.item)
      const reopened = backend.open(encrypted)
      await expect(new Runner({ store: reopened }).history('sealed')).rejects.toBeInstanceOf(CheckpointIntegrityError)
      await reopened.close()
    })
  })
}

describe('encryption options', () => {
  it('encrypt without keys is refused with the fix', () => {
    expect(() => new MemoryStore({ encrypt: true })).toThrow(/encrypt: true needs keys/)
  })
})
