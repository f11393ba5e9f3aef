import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { exportRun, FileStore, importRun, type RunDocument } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { cairn, cairnJson, ROOT } from '../cli/cli-helpers.js'

// `cairn import` of hostile input: a document that never ends, a file that is a FIFO, and a
// document whose effect journal was altered are refused with an error that names the problem,
// and nothing of them is written. What verifies is imported with its start time.

const TIMEOUT_MS = 120_000
const K1 = `k1:${randomBytes(32).toString('base64')}`
let dir = ''
let doc: RunDocument

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-import-hostile-'))
  const store = new FileStore({ directory: join(dir, 'source') })
  await store.createRun({ runId: 'r', name: 'imported' })
  await store.write({
    runId: 'r',
    intents: [
      { runId: 'r', callId: 'c1', name: 'lookup', inputHash: 'a'.repeat(64), idempotencyKey: 'k-c1' },
      { runId: 'r', callId: 'c2', name: 'send', inputHash: 'b'.repeat(64), idempotencyKey: 'k-c2' },
    ],
    completions: [{ runId: 'r', callId: 'c1', status: 'succeeded', output: { rows: [1, 2, 3], at: new Date(5) } }],
    checkpoints: [{ runId: 'r', kind: 'demo', phase: 'one', payload: { step: 1 } }],
  })
  await store.write({ runId: 'r', checkpoints: [{ runId: 'r', kind: 'demo', phase: 'two', payload: { step: 2 } }] })
  doc = await exportRun(store, 'r')
  await store.close()
  // The run started a while before it is imported.
  expect(doc.run.createdAt).toBeLessThan(Date.now())
}, TIMEOUT_MS)

afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** The document with effect `callId` changed by `edit`. */
function withEffect(callId: string, edit: (effect: Record<string, unknown>) => void): RunDocument {
  const copy = JSON.parse(JSON.stringify(doc)) as RunDocument
  edit(copy.effects.find((e) => e.callId === callId) as unknown as Record<string, unknown>)
  return copy
}

const ALTERED: { name: string; document: () => RunDocument; message: RegExp }[] = [
  {
    name: 'an unknown effect status',
    document: () => withEffect('c2', (e) => (e.status = 'teleported')),
    message: /effects\[\d\] \(call "c2"\) has an unknown status "teleported"/,
  },
  {
    name: 'an output that does not match its outputHash',
    document: () => withEffect('c1', (e) => ((e.output as { rows: number[] }).rows[2] = 4)),
    message: /effects\[\d\] \(call "c1"\) has an output that does not match its outputHash/,
  },
  {
    name: 'a succeeded effect without its output',
    document: () => withEffect('c1', (e) => delete e.output),
    message: /effects\[\d\] \(call "c1"\) is succeeded but has no output/,
  },
  {
    name: 'a pending effect that holds an outcome',
    document: () => withEffect('c2', (e) => ((e.output = 'sent'), (e.outputHash = 'f'.repeat(64)))),
    message: /effects\[\d\] \(call "c2"\) is pending but holds an outcome/,
  },
]

describe('importRun refuses a document that does not verify, before writing anything', () => {
  for (const altered of ALTERED) {
    it(`refuses ${altered.name}`, async () => {
      const store = new SqliteStore({ path: join(dir, `${altered.name.replaceAll(' ', '-')}.db`) })
      try {
        await expect(importRun(store, altered.document())).rejects.toThrow(altered.message)
        expect(await store.getRun('r')).toBeUndefined()
      } finally {
        await store.close()
      }
    })
  }

  it('imports the document as exported, with the run start time it was exported with', async () => {
    const store = new SqliteStore({ path: join(dir, 'good.db') })
    try {
      const run = await importRun(store, JSON.parse(JSON.stringify(doc)))
      expect(run.createdAt).toBe(doc.run.createdAt)
      expect((await store.getRun('r'))?.createdAt).toBe(doc.run.createdAt)
      expect((await exportRun(store, 'r')).effects).toEqual(doc.effects.map((e) => ({ ...e, startedAt: expect.any(Number) as number, completedAt: e.completedAt === null ? null : (expect.any(Number) as number) })))
    } finally {
      await store.close()
    }
  })
})

describe('cairn import of hostile input', () => {
  it(
    'refuses an input past --max-bytes (cairn import < /dev/zero ends with an error)',
    async () => {
      const url = `sqlite:${join(dir, 'zero.db')}`
      const bounded = await cairn(url, ['import', '--max-bytes', '100000', '--file', '/dev/zero'])
      expect(bounded.code).toBe(1)
      expect(bounded.stderr).toContain('/dev/zero is not a regular file')
      const fromStdin = execFileSync('sh', ['-c', `node dist/cli/main.js --store ${url} import --max-bytes 100000 < /dev/zero; echo "exit $?"`], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
      expect(fromStdin.trim()).toBe('exit 1')
      const env = await cairn(url, ['import'], { input: JSON.stringify(doc), env: { CAIRN_IMPORT_MAX_BYTES: '100' } })
      expect(env).toMatchObject({ code: 1, stdout: '' })
      expect(env.stderr).toContain('the input is larger than 100 bytes')
      expect(env.stderr).toContain('--max-bytes')
    },
    TIMEOUT_MS,
  )

  it(
    'refuses --file on a FIFO at once instead of waiting for a writer',
    async () => {
      const fifo = join(dir, 'doc.fifo')
      execFileSync('mkfifo', [fifo])
      const exit = await cairn(`sqlite:${join(dir, 'fifo.db')}`, ['import', '--file', fifo])
      expect(exit.code).toBe(1)
      expect(exit.stderr).toContain(`${fifo} is not a regular file (a FIFO, device or directory)`)
    },
    TIMEOUT_MS,
  )

  it(
    'refuses an altered output on a keyed store (it is never signed) and imports the unaltered document with its start time',
    async () => {
      const url = `sqlite:${join(dir, 'keyed.db')}`
      const altered = join(dir, 'altered.json')
      await writeFile(altered, JSON.stringify(ALTERED[1]!.document()))
      const refused = await cairn(url, ['import', '--file', altered], { env: { CAIRN_KEYS: K1 } })
      expect(refused).toMatchObject({ code: 1, stdout: '' })
      expect(refused.stderr).toMatch(ALTERED[1]!.message)
      const good = join(dir, 'good.json')
      await writeFile(good, JSON.stringify(doc))
      const imported = await cairn(url, ['import', '--file', good], { env: { CAIRN_KEYS: K1 } })
      expect(imported.code, imported.stderr).toBe(0)
      const runs = await cairnJson<{ runId: string; startedAt: number }[]>(url, ['runs'], { env: { CAIRN_KEYS: K1 } })
      expect(runs.map((run) => [run.runId, run.startedAt])).toEqual([['r', doc.run.createdAt]])
    },
    TIMEOUT_MS,
  )
})
