import { randomBytes } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { mkdtemp, readdir, rm, symlink, unlink } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Agent, CheckpointCorruptionError, FileStore, Runner, tool } from '../../src/index.js'
import { ScriptedModel } from '../../src/testing.js'

// A file store's history hides nothing: a checkpoint file that is not a regular file, or one
// removed behind the store's back, is reported as corruption by history, listing and resume,
// on a signed and encrypted store too. A removal through the store (delete, prune) is not.

const TRUST = [
  { name: 'a plain file store', options: {} },
  { name: 'a signed and encrypted file store', options: { keys: [{ id: 'k1', secret: randomBytes(32) }], encrypt: true } },
]
const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

function agent(): Agent {
  const turns = Array.from({ length: 4 }, (_, i) => [{ toolUse: { toolUseId: `t${i}`, name: 'step', input: { i } } }])
  return new Agent({
    name: 'stepper',
    model: new ScriptedModel([...turns, [{ text: 'done' }]]),
    tools: [tool({ name: 'step', description: 'One step.', idempotent: true, inputSchema: { type: 'object' }, callback: () => 'ok' })],
  })
}

describe.each(TRUST)('$name: history hides no record', ({ options }) => {
  /** A finished run; the store closed, its checkpoint files by seq. */
  async function finishedRun(): Promise<{ directory: string; dir: string; files: string[] }> {
    const directory = await mkdtemp(join(tmpdir(), 'cairn-file-history-'))
    cleanups.push(() => rm(directory, { recursive: true, force: true }))
    const store = new FileStore({ directory, ...options })
    await new Runner({ store, durability: 'sync' }).run(agent(), { input: 'go', runId: 'r' })
    await store.close()
    const dir = join(directory, 'runs', 'r', 'checkpoints')
    const files = (await readdir(dir)).filter((name) => name.endsWith('.json')).sort()
    expect(files.length).toBeGreaterThan(4)
    return { directory, dir, files }
  }

  function open(directory: string): FileStore {
    const store = new FileStore({ directory, ...options })
    cleanups.push(() => store.close())
    return store
  }

    it('a newest checkpoint replaced by a symbolic link is corruption in history, not left out', async () => {
      const { directory, dir, files } = await finishedRun()
      const newest = files.at(-1)!
      await unlink(join(dir, newest))
      await symlink(join(dir, files[0]!), join(dir, newest))
      const store = open(directory)
      await expect(new Runner({ store }).history('r')).rejects.toBeInstanceOf(CheckpointCorruptionError)
      await expect(store.getLatest({ runId: 'r' })).rejects.toBeInstanceOf(CheckpointCorruptionError)
    })

    it('a newest checkpoint replaced by a FIFO is corruption in history, not left out', async () => {
      const { directory, dir, files } = await finishedRun()
      const newest = files.at(-1)!
      await unlink(join(dir, newest))
      execFileSync('mkfifo', [join(dir, newest)])
      const store = open(directory)
      await expect(new Runner({ store }).history('r')).rejects.toBeInstanceOf(CheckpointCorruptionError)
    })

    it('a middle checkpoint removed behind the store is corruption in history, listing and loadRun', async () => {
      const { directory, dir, files } = await finishedRun()
      await unlink(join(dir, files[2]!))
      const store = open(directory)
      await expect(new Runner({ store }).history('r')).rejects.toThrow(/continues checkpoint .* whose file is missing/)
      await expect(store.listCheckpoints({ runId: 'r' })).rejects.toBeInstanceOf(CheckpointCorruptionError)
      await expect(store.loadRun('r')).rejects.toBeInstanceOf(CheckpointCorruptionError)
    })

    it('the checkpoint before the newest removed behind the store stops a resume', async () => {
      const { directory, dir, files } = await finishedRun()
      await unlink(join(dir, files.at(-2)!))
      const store = open(directory)
      await expect(store.getLatest({ runId: 'r' })).rejects.toThrow(/whose file is missing/)
      await expect(new Runner({ store }).resume(agent(), { runId: 'r' })).rejects.toBeInstanceOf(CheckpointCorruptionError)
    })

    it('checkpoints deleted through the store leave a history that reads', async () => {
      const { directory } = await finishedRun()
      const writer = open(directory)
      const all = await writer.listCheckpoints({ runId: 'r' })
      expect(await writer.delete(all[2]!.checkpointId)).toBe(true)
      expect(await writer.delete(all[4]!.checkpointId)).toBe(true)
      await writer.close()
      const store = open(directory)
      // History also shows the light phases of each stored row's phase log (`<stored id>~<n>`).
      expect((await new Runner({ store }).history('r')).filter((entry) => !entry.checkpointId.includes('~'))).toHaveLength(all.length - 2)
      expect(await store.listCheckpoints({ runId: 'r' })).toHaveLength(all.length - 2)
    })
})
