import { spawn } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { Runner } from '../../src/index.js'
import { postgresTarget } from '../fixtures/postgres-target.js'
import { ROOT } from '../support/child.js'
import { openRaceStore, readUntil, steppingAgent, stopFile, type RaceTarget, type ReadTally } from './read-race.js'

/**
 * A keyed store read while a runner writes: readers in the writer's process and in another
 * process poll the run the whole time. A read that meets a commit half-way must see the run
 * before or after it, never report it rolled back or replayed.
 */

const STEPS = 40
const dirs: string[] = []
afterAll(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true })
  await (await postgresTarget()).close()
})

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-read-race-'))
  dirs.push(dir)
  return dir
}

/** Start a reader process; resolves once it reads, with a promise of its tally (in an object: a promise of a promise would wait for both). */
async function childReader(target: RaceTarget, runId: string, dir: string): Promise<{ tally: Promise<ReadTally> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/trust/read-race-child.ts', JSON.stringify(target), runId, dir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on('error', reject)
    child.on('close', resolve)
  })
  await new Promise<void>((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk
      if (stdout.includes('reading\n')) resolve()
    })
    void exited.then(() => reject(new Error(`reader process exited before reading: ${stderr}`)))
  })
  const tally = exited.then((code) => {
    if (code !== 0) throw new Error(`reader process exited with ${String(code)}: ${stderr}`)
    return JSON.parse(stdout.trim().split('\n').pop()!) as ReadTally
  })
  return { tally }
}

async function race(target: RaceTarget, dir: string): Promise<{ writer: string; here: ReadTally; there: ReadTally }> {
  const runId = 'raced'
  const writerStore = openRaceStore(target)
  const readerStore = openRaceStore(target)
  let done = false
  let reading: Promise<ReadTally> | undefined
  let there: Promise<ReadTally> | undefined
  // The readers start once the run has a few steps stored (the store exists and holds it), and
  // read until it is finished; the run waits for the other process to be reading.
  const beforeStep = async (n: number) => {
    if (n !== 3) return
    reading = readUntil(readerStore, runId, () => done)
    there = (await childReader(target, runId, dir)).tally
  }
  try {
    const result = await new Runner({ store: writerStore, durability: 'sync' }).run(steppingAgent(STEPS, beforeStep), { input: 'go', runId })
    return { writer: result.state, here: await stopReaders(), there: await there! }
  } finally {
    await stopReaders().catch(() => undefined)
    await there?.catch(() => undefined)
    await readerStore.close()
    await writerStore.close()
  }

  async function stopReaders(): Promise<ReadTally> {
    done = true
    await writeFile(stopFile(dir), '')
    return reading!
  }
}

function expectClean(tally: ReadTally): void {
  expect(tally.errors.slice(0, 3)).toEqual([])
  expect(tally.errors.length).toBe(0)
  expect(tally.reads).toBeGreaterThan(0)
}

describe.each([
  { kind: 'file', encrypt: false },
  { kind: 'file', encrypt: true },
  { kind: 'sqlite', encrypt: true },
  { kind: 'postgres', encrypt: true },
] as const)('a keyed $kind store (encrypt: $encrypt) read while a runner writes', ({ kind, encrypt }) => {
  it('gives every reader, in the process and in another one, the run as it stands, never a rollback', async () => {
    const dir = await tempDir()
    let location = kind === 'file' ? join(dir, 'store') : join(dir, 'cairn.db')
    if (kind === 'postgres') {
      const pg = await postgresTarget()
      if (pg.skipChildProcesses) return console.warn(`skipped: ${pg.skipChildProcesses}`)
      location = pg.freshSchema()
    }
    const { writer, here, there } = await race({ kind, location, encrypt }, dir)
    console.log(`${kind} (encrypt ${encrypt}): this process ${here.reads} reads, ${here.seqsSeen} seqs seen, ${here.errors.length} errors; other process ${there.reads} reads, ${there.seqsSeen} seqs seen, ${there.errors.length} errors`)
    expect(writer).toBe('completed')
    expectClean(here)
    expectClean(there)
    // Both readers watched the run move: a file store in another process reads what the writer
    // commits since it first read the run, as SQL stores do.
    expect(here.seqsSeen).toBeGreaterThan(2)
    expect(there.seqsSeen).toBeGreaterThan(2)
  }, 120_000)
})
