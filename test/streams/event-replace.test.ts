import { spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { FileStore, MemoryStore, type CheckpointStore, type JsonObject } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { postgresTarget } from '../fixtures/postgres-target.js'
import { ROOT } from '../support/child.js'
import { openTarget } from './fixtures/stream-agent.js'

/**
 * `RunEventLog.replace`, what `rekey` re-seals a run's events with: the whole log written again in
 * one atomic step, so a process killed in the middle leaves the old log or the new one, whole.
 */
const CHILD = join(ROOT, 'test/streams/fixtures/replace-child.ts')
const pg = await postgresTarget()
const dirs: string[] = []
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true })
  await pg.dropSchemas()
  await pg.close()
})

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-event-replace-'))
  dirs.push(dir)
  return dir
}

const event = (version: string, i: number): JsonObject => ({ type: 'text_delta', version, i, text: version === 'new' ? 're-sealed text of another length' : 'text' })

const backends: [string, () => Promise<CheckpointStore>, boolean][] = [
  ['memory', async () => new MemoryStore(), true],
  ['file', async () => new FileStore({ directory: await tempDir() }), false],
  ['sqlite', async () => new SqliteStore({ path: join(await tempDir(), 'cairn.db') }), true],
  ['postgres', async () => pg.openStore(pg.freshSchema()), true],
]

describe.each(backends)('replacing a run event log on %s', (_name, open, keepsCursors) => {
  it('puts the new events in place of the old, in order, and the log goes on from there', async () => {
    const store = await open()
    const log = store.events!
    try {
      const before = await log.append('r1', [event('old', 0), event('old', 1), event('old', 2)])
      await log.append('other', [event('other', 0)])
      await log.replace('r1', [event('new', 0), event('new', 1), event('new', 2)])
      const after = await log.read('r1')
      expect(after.map((s) => s.event)).toEqual([event('new', 0), event('new', 1), event('new', 2)])
      if (keepsCursors) expect(after.map((s) => s.cursor)).toEqual(before)
      else {
        // Byte-offset cursors of the old lines that no longer end a line are refused by name.
        const stale = before.filter((cursor) => !after.some((s) => s.cursor === cursor))
        expect(stale.length).toBeGreaterThan(0)
        for (const cursor of stale) await expect(log.read('r1', { after: cursor })).rejects.toThrow(/the log was rewritten since that cursor was read/)
      }
      expect((await log.read('other')).map((s) => s.event)).toEqual([event('other', 0)])
      // Nothing after the last event until something is appended; the append follows on.
      const last = after[2]!.cursor
      expect(await log.waitForMore('r1', last, { timeoutMs: 20 })).toBe(false)
      const [next] = await log.append('r1', [event('new', 3)])
      expect((await log.read('r1', { after: last })).map((s) => [s.cursor, s.event])).toEqual([[next, event('new', 3)]])
      await log.replace('r1', [])
      expect(await log.read('r1')).toEqual([])
    } finally {
      await store.close()
    }
  })
})

function killedMidway(target: string, runId: string, count: number, afterRewrites: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, target, runId, String(count)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      const done = [...chunk.matchAll(/replaced (\d+)/g)].map((m) => Number(m[1]))
      // Kill at a moment that varies with the run: a few milliseconds into the next rewrite.
      if (done.some((n) => n >= afterRewrites)) setTimeout(() => child.kill('SIGKILL'), Math.floor(Math.random() * 15))
    })
    child.on('error', reject)
    child.on('close', (_code, signal) => (signal === 'SIGKILL' ? resolve() : reject(new Error(`the rewriting process ended without being killed: ${stderr}`))))
  })
}

async function killAndCheck(target: string, store: CheckpointStore): Promise<void> {
  const count = 3000
  for (let round = 0; round < 4; round++) {
    const runId = `r${round}`
    await killedMidway(target, runId, count, 1 + round)
    const read = []
    for (let after: string | undefined; ; ) {
      const page = await store.events!.read(runId, { after, limit: 10_000 })
      if (page.length === 0) break
      read.push(...page.map((s) => s.event))
      after = page[page.length - 1]!.cursor
    }
    // One whole version, never a mix, never a missing or torn event.
    expect(read).toHaveLength(count)
    const versions = new Set(read.map((e) => e.version))
    expect(versions.size).toBe(1)
    expect(read.map((e) => e.i)).toEqual(Array.from({ length: count }, (_, i) => i))
  }
}

describe('a process killed while it replaces a run event log', { timeout: 120_000 }, () => {
  it('on SQLite leaves one whole log', async () => {
    const path = join(await tempDir(), 'cairn.db')
    const store = new SqliteStore({ path })
    try {
      await killAndCheck(`sqlite:${path}`, store)
    } finally {
      await store.close()
    }
  })

  it('on a file store leaves one whole log', async () => {
    const dir = await tempDir()
    const store = new FileStore({ directory: dir })
    try {
      await killAndCheck(`file:${dir}`, store)
    } finally {
      await store.close()
    }
  })

  it('on Postgres leaves one whole log', async (ctx) => {
    if (pg.skipChildProcesses) ctx.skip()
    const schema = pg.freshSchema()
    const store = openTarget(`postgres:${schema}`)
    try {
      await killAndCheck(`postgres:${schema}`, store)
    } finally {
      await store.close()
    }
  })
})
