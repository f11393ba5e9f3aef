import { randomBytes } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { mkdtemp, rename, rm, symlink, unlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Agent, CairnError, CheckpointCorruptionError, FileStore, Runner, tool } from '../../src/index.js'
import { ScriptedModel } from '../../src/testing.js'
import { runLogOf } from '../support/file-log.js'

// A file store's history hides nothing: a log that is not a regular file is refused, and a frame
// removed behind the store's back (from the middle, or the newest ones) is reported as corruption
// by history, listing and resume, on a signed and encrypted store too. A removal through the
// store (delete, prune) is not.

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
  /** A finished run; the store closed, its log read back. */
  async function finishedRun() {
    const directory = await mkdtemp(join(tmpdir(), 'cairn-file-history-'))
    cleanups.push(() => rm(directory, { recursive: true, force: true }))
    const store = new FileStore({ directory, ...options })
    await new Runner({ store, durability: 'sync' }).run(agent(), { input: 'go', runId: 'r' })
    await store.close()
    const log = await runLogOf(directory, 'r')
    expect(log.checkpointFrames().length).toBeGreaterThan(4)
    return { directory, log }
  }

  function open(directory: string): FileStore {
    const store = new FileStore({ directory, ...options })
    cleanups.push(() => store.close())
    return store
  }

  it('a log replaced by a symbolic link is refused, not followed', async () => {
    const { directory, log } = await finishedRun()
    await rename(log.path, `${log.path}.real`)
    await symlink(`${log.path}.real`, log.path)
    const store = open(directory)
    await expect(new Runner({ store }).history('r')).rejects.toThrow(/symbolic link/)
    await expect(store.getLatest({ runId: 'r' })).rejects.toBeInstanceOf(CairnError)
  })

  it.skipIf(process.platform === 'win32')('a log replaced by a FIFO is refused without blocking', async () => {
    const { directory, log } = await finishedRun()
    await unlink(log.path)
    execFileSync('mkfifo', [log.path])
    const store = open(directory)
    await expect(new Runner({ store }).history('r')).rejects.toThrow(/not a regular file/)
  })

  it('a middle frame removed behind the store is corruption in history and listing', async () => {
    const { directory, log } = await finishedRun()
    const frames = log.checkpointFrames()
    const next = log.lines[frames[3]!]!
    log.lines.splice(frames[2]!, 1)
    await log.write(false)
    // The head file tells the log is a frame short: the run is refused as a whole.
    const store = open(directory)
    await expect(new Runner({ store }).history('r')).rejects.toBeInstanceOf(CheckpointCorruptionError)
    await expect(store.listCheckpoints({ runId: 'r' })).rejects.toMatchObject({ runId: 'r' })
    await store.close()
    // Without it, the frame after the gap fails its check and names its checkpoint.
    await unlink(join(directory, 'runs', 'r', 'head.json'))
    const reopened = open(directory)
    const id = next.split(' ')[1]!.split(',')[0]!.split(':')[1]!
    await expect(new Runner({ store: reopened }).history('r')).rejects.toBeInstanceOf(CheckpointCorruptionError)
    await expect(reopened.listCheckpoints({ runId: 'r' })).rejects.toMatchObject({ runId: 'r', checkpointId: id })
  })

  it('the frame before the newest removed behind the store stops a resume', async () => {
    const { directory, log } = await finishedRun()
    log.lines.splice(log.checkpointFrames().at(-2)!, 1)
    await log.write(false)
    const store = open(directory)
    await expect(store.getLatest({ runId: 'r' })).rejects.toBeInstanceOf(CheckpointCorruptionError)
    await expect(new Runner({ store }).resume(agent(), { runId: 'r' })).rejects.toBeInstanceOf(CheckpointCorruptionError)
  })

  it('the newest frames removed, checks and all (a rollback), stop a resume: the head file remembers the log', async () => {
    const { directory, log } = await finishedRun()
    log.lines.splice(log.checkpointFrames().at(-2)!)
    await writeFile(log.path, log.lines.map((line) => `${line}\n`).join(''))
    const store = open(directory)
    await expect(store.getLatest({ runId: 'r' })).rejects.toThrow(/rollback/)
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
