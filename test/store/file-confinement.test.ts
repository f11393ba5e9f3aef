import { execFileSync } from 'node:child_process'
import { mkdir, readdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { CairnError, CheckpointCorruptionError, FileStore } from '../../src/index.js'
import { conversation } from '../../src/testing.js'
import { useTempDirs } from '../support/temp-dirs.js'

const tempDir = useTempDirs('cairn-confine-')

async function setup(): Promise<{ directory: string; outside: string; ids: string[] }> {
  const base = await tempDir()
  const directory = join(base, 'store')
  const outside = join(base, 'outside')
  await mkdir(outside)
  await writeFile(join(outside, 'keep.txt'), 'outside data\n')
  const store = new FileStore({ directory })
  const ids: string[] = []
  for (let i = 1; i <= 2; i++) ids.push(await store.save({ runId: 'r', kind: 'agent', phase: 'p', payload: { messages: conversation(i + 1) } }))
  await store.recordEffectIntent({ runId: 'r', callId: 'c1', name: 't', inputHash: 'h', idempotencyKey: 'k' })
  await store.close()
  return { directory, outside, ids }
}

function logFile(directory: string): string {
  return join(directory, 'runs', 'r', 'log.jsonl')
}

async function errorOf(attempt: Promise<unknown>): Promise<unknown> {
  return attempt.then(
    () => undefined,
    (err: unknown) => err,
  )
}

describe('the file store trusts only its own regular files', () => {
  it('a run directory replaced by a symbolic link is refused, and nothing is written outside the store', async () => {
    const { directory, outside } = await setup()
    const runDir = join(directory, 'runs', 'r')
    // The run's files now live outside, and the run directory points there.
    await rename(runDir, join(outside, 'r'))
    await symlink(join(outside, 'r'), runDir)
    const before = await readdir(join(outside, 'r'), { recursive: true })
    const store = new FileStore({ directory })
    // One at a time: each attempt is made only once the one before it has failed.
    for (const attempt of [
      () => store.save({ runId: 'r', kind: 'agent', phase: 'p', payload: { messages: conversation(4) } }),
      () => store.recordEffectIntent({ runId: 'r', callId: 'c2', name: 't', inputHash: 'h', idempotencyKey: 'k2' }),
      () => store.getLatest({ runId: 'r' }),
    ]) {
      const error = await errorOf(attempt())
      expect(error).toBeInstanceOf(CairnError)
      expect((error as Error).message).toContain('symbolic link')
    }
    expect(await readdir(join(outside, 'r'), { recursive: true })).toEqual(before)
    await store.close()
  })

  it('a log replaced by a symbolic link to an outside file is never appended to, nor read', async () => {
    const { directory, outside } = await setup()
    const log = logFile(directory)
    await writeFile(join(outside, 'target.jsonl'), await readFile(log))
    await rm(log)
    await symlink(join(outside, 'target.jsonl'), log)
    const before = await readFile(join(outside, 'target.jsonl'), 'utf8')
    const store = new FileStore({ directory })
    for (const attempt of [
      () => store.save({ runId: 'r', kind: 'agent', phase: 'p', payload: { messages: conversation(4) } }),
      () => store.getLatest({ runId: 'r' }),
      () => store.getRun('r'),
    ]) {
      const error = await errorOf(attempt())
      expect(error).toBeInstanceOf(CairnError)
      expect((error as Error).message).toContain('symbolic link')
    }
    expect(await readFile(join(outside, 'target.jsonl'), 'utf8')).toBe(before)
    expect(await readFile(join(outside, 'keep.txt'), 'utf8')).toBe('outside data\n')
    await store.close()
  })

  it('a log that is a symbolic link to /dev/zero is refused, read without following it', async () => {
    const { directory } = await setup()
    await rm(logFile(directory))
    await symlink('/dev/zero', logFile(directory))
    const store = new FileStore({ directory })
    await expect(store.getLatest({ runId: 'r' })).rejects.toThrow(/symbolic link/)
    await store.close()
  })

  it.skipIf(process.platform === 'win32')('a log that is a FIFO never blocks a read', async () => {
    const { directory, ids } = await setup()
    await rm(logFile(directory))
    execFileSync('mkfifo', [logFile(directory)])
    const store = new FileStore({ directory })
    const error = await errorOf(store.load(ids[0]!))
    expect(error).toBeInstanceOf(CairnError)
    expect((error as Error).message).toContain('not a regular file')
    await store.close()
  })

  it('a head file that is a symbolic link is refused as corrupt', async () => {
    const { directory, outside } = await setup()
    const head = join(directory, 'runs', 'r', 'head.json')
    await writeFile(join(outside, 'head.json'), await readFile(head))
    await rm(head)
    await symlink(join(outside, 'head.json'), head)
    const store = new FileStore({ directory })
    const error = await errorOf(store.getRun('r'))
    expect(error).toBeInstanceOf(CheckpointCorruptionError)
    expect((error as Error).message).toContain('symbolic link')
    await store.close()
  })
})
