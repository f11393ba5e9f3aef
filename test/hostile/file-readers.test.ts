import { createHash } from 'node:crypto'
import { appendFile, mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { spawn } from 'node:child_process'
import { Agent, FileStore, Runner } from '../../src/index.js'
import { DelegatingStore, type RunLeases } from '../../src/engine.js'
import { ScriptedModel } from '../../src/testing.js'
import { cairn, runNode, type Exit } from '../cli/cli-helpers.js'
import { waitFor } from '../support/wait.js'

// Readers never disturb writers: on a FileStore, other processes reading a run (through the API
// or `cairn show`) while one process executes it change nothing on disk and never break the run.

const CHILD = fileURLToPath(new URL('./fixtures/file-run-child.ts', import.meta.url))

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-file-readers-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  return dir
}

/** Every entry under `dir` with its size and modification time: what a read must leave as it was. */
async function snapshot(dir: string): Promise<string[]> {
  const entries: string[] = []
  for (const name of (await readdir(dir, { recursive: true })).sort()) {
    const info = await stat(join(dir, name))
    entries.push(`${name} ${info.isDirectory() ? 'dir' : info.size} ${info.mtimeMs}`)
  }
  return entries
}

/** A temp file name as an interrupted atomic write of process `pid` on this machine leaves it. */
function tempName(target: string, pid: number): string {
  const host = createHash('sha256').update(hostname()).digest('hex').slice(0, 8)
  return `.${target}.${pid}-${host}-0123456789ab.tmp`
}

/** A run of two checkpoints, written and closed (so the next store opened reads it from disk); its latest id. */
async function seed(directory: string): Promise<string | undefined> {
  const store = new FileStore({ directory })
  await store.save({ runId: 'r', kind: 'demo', phase: 'one', payload: { n: 1 } })
  const latest = await store.save({ runId: 'r', kind: 'demo', phase: 'two', payload: { n: 2 } })
  await store.close()
  return latest
}

describe('FileStore readers', { timeout: 120_000 }, () => {
  it('a run completes while another process reads it in a loop and cairn show reads it', async () => {
    const dir = await tempDir()
    const directory = join(dir, 'store')
    const stop = join(dir, 'stop')
    let writerDone = false
    const writer = runNode(['--import', 'tsx', CHILD, 'write', directory, 'r1', '60']).finally(() => (writerDone = true))
    const reader = runNode(['--import', 'tsx', CHILD, 'read', directory, 'r1', stop])
    const shows: Exit[] = []
    while (!writerDone) shows.push(await cairn(`file:${directory}`, ['show', 'r1']))
    const written = await writer
    await writeFile(stop, '')
    const read = await reader

    expect(written.stderr).toBe('')
    expect(written.stdout.trim()).toBe('completed')
    expect(written.code).toBe(0)
    expect(read.code).toBe(0)
    expect(Number(read.stdout.trim())).toBeGreaterThan(0)
    // Before the run exists `show` reports it missing; once it does, every `show` succeeds.
    expect(shows.map((exit) => exit.code).filter((code) => code !== 0 && code !== 1)).toEqual([])
    const store = new FileStore({ directory })
    cleanups.push(() => store.close())
    expect((await store.getRun('r1'))?.status).toBe('completed')
    expect((await cairn(`file:${directory}`, ['show', 'r1'])).code).toBe(0)
  })

  it('reading a store changes nothing on disk: no temp file, deleted run or directory is touched', async () => {
    const dir = await tempDir()
    const directory = join(dir, 'store')
    const latest = await seed(directory)
    // What another process's writes leave for a moment: temp files, a frame half appended, a run being deleted.
    await writeFile(join(directory, 'runs', 'r', tempName('log.jsonl', process.ppid)), '{}')
    await writeFile(join(directory, 'runs', 'r', tempName('head.json', 999_999_999)), '{}')
    await appendFile(join(directory, 'runs', 'r', 'log.jsonl'), '0123456789abcdef0123456789abcdef 3:c3 {"c":[{"id":"c3"')
    await mkdir(join(directory, 'runs', '.deleted-0011223344556677'), { recursive: true })
    const before = await snapshot(directory)

    const reader = new FileStore({ directory })
    expect((await reader.getRun('r'))?.lastSeq).toBe(2)
    expect((await reader.getLatest({ runId: 'r' }))?.id).toBe(latest)
    expect(await reader.listCheckpoints({ runId: 'r' })).toHaveLength(2)
    expect(await reader.listCheckpoints({})).toHaveLength(2)
    expect(await reader.loadRun('r')).toHaveLength(2)
    expect(await reader.listRuns()).toHaveLength(1)
    expect(await reader.listEffects('r')).toEqual([])
    await reader.close()
    expect(await snapshot(directory)).toEqual(before)

    // A store that does not exist is not created by reading it.
    const missing = new FileStore({ directory: join(dir, 'nothing', 'here') })
    expect(await missing.getRun('r')).toBeUndefined()
    expect(await missing.listRuns()).toEqual([])
    await missing.close()
    expect(await readdir(dir)).toEqual(['store'])
  })

  it('a reader in another process sees what the writer committed since it first read the run', async () => {
    const dir = await tempDir()
    const directory = join(dir, 'store')
    const gate = join(dir, 'gate')
    const writer = new FileStore({ directory })
    cleanups.push(() => writer.close())
    await writer.save({ runId: 'r', kind: 'demo', phase: 'one', payload: { n: 1 } })
    await writer.save({ runId: 'r', kind: 'demo', phase: 'two', payload: { n: 2 } })
    const follower = spawn(process.execPath, ['--import', 'tsx', CHILD, 'follow', directory, 'r', gate], { stdio: ['ignore', 'pipe', 'inherit'] })
    let printed = ''
    follower.stdout.setEncoding('utf8').on('data', (chunk: string) => (printed += chunk))
    const exited = new Promise<number | null>((resolve) => follower.on('close', resolve))
    // The follower has read the run at seq 2 (and keeps its store open) before the writer goes on.
    await waitFor(() => printed.includes('read\n'), 'the follower to read the run', 60_000)
    let newest = ''
    for (let n = 3; n <= 5; n++) newest = await writer.save({ runId: 'r', kind: 'demo', phase: `step ${n}`, payload: { n } })
    await writeFile(gate, newest)
    expect(await exited).toBe(0)
    const seen = JSON.parse(printed.trim().split('\n').pop()!) as unknown
    expect(seen).toEqual({ lastSeq: 5, latest: newest, listed: 5, loads: true })
  })

  it('a write removes the temp files a dead writer left, never one of a live process', async () => {
    const dir = await tempDir()
    const directory = join(dir, 'store')
    await seed(directory)
    const gone = await runNode(['-e', 'process.stdout.write(String(process.pid))'])
    const runDir = join(directory, 'runs', 'r')
    const dead = tempName('log.jsonl', Number(gone.stdout))
    const live = tempName('head.json', process.ppid)
    await writeFile(join(runDir, dead), '{}')
    await writeFile(join(runDir, live), '{}')

    const store = new FileStore({ directory })
    cleanups.push(() => store.close())
    await store.getLatest({ runId: 'r' })
    expect(await readdir(runDir)).toContain(dead)
    await store.save({ runId: 'r', kind: 'demo', phase: 'three', payload: { n: 3 } })
    const after = await readdir(runDir)
    expect(after).not.toContain(dead)
    expect(after).toContain(live)
    expect((await store.listCheckpoints({ runId: 'r' })).map((cp) => cp.seq)).toEqual([3, 2, 1])
  })
})

describe('waitForOwner on a FileStore', { timeout: 120_000 }, () => {
  it('waits while another process holds the store, then takes the run it finished', async () => {
    const dir = await tempDir()
    const directory = join(dir, 'store')
    const gate = join(dir, 'gate')
    const holder = spawn(process.execPath, ['--import', 'tsx', CHILD, 'hold', directory, 'held', gate], { stdio: ['ignore', 'pipe', 'inherit'] })
    let printed = ''
    holder.stdout.setEncoding('utf8').on('data', (chunk: string) => (printed += chunk))
    const exited = new Promise<number | null>((resolve) => holder.on('close', resolve))
    await waitFor(() => printed.includes('holding'), 'the holder to hold the store', 60_000)

    // Count the waiter's tries: the gate opens only once it has been refused at least once.
    let tries = 0
    let refusedOnce: () => void = () => {}
    const refused = new Promise<void>((resolve) => (refusedOnce = resolve))
    class CountingStore extends DelegatingStore {
      override get leases(): RunLeases | undefined {
        const inner = this.inner.leases
        if (!inner) return undefined
        const acquire: RunLeases['acquire'] = (input) => {
          tries += 1
          if (tries === 2) refusedOnce()
          return inner.acquire(input)
        }
        return new Proxy(inner, {
          get: (target, key) => {
            if (key === 'acquire') return acquire
            const value: unknown = Reflect.get(target, key)
            return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value
          },
        })
      }
    }
    const store = new CountingStore(new FileStore({ directory }))
    cleanups.push(() => store.close())
    const agent = new Agent({ name: 'holder', model: new ScriptedModel([[{ text: 'again' }]]) })
    const waiter = new Runner({ store, durability: 'sync' }).resume(agent, { runId: 'held', waitForOwner: { timeoutMs: 60_000 } })
    await Promise.race([refused, waiter.then(() => undefined, () => undefined)])
    await writeFile(gate, '')
    expect(await exited).toBe(0)
    expect(printed).toContain('completed')
    const result = await waiter
    expect(result.state).toBe('completed')
    expect(result.fromTerminalCheckpoint).toBe(true)
    expect(tries).toBeGreaterThanOrEqual(2)
  })
})
