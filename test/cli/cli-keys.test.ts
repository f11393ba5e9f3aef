import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { postgresTarget, type PostgresTarget } from '../fixtures/postgres-target.js'
import { cairn, cairnJson, ROOT, sqliteStore } from './cli-helpers.js'

// The cairn binary with CAIRN_KEYS (and CAIRN_ENCRYPT): signed and encrypted imports, reads that
// fail closed without the key, `cairn rekey` for a rotation and for signing an unsigned store.

const TIMEOUT_MS = 120_000
const key = (id: string) => `${id}:${randomBytes(32).toString('base64')}`
const K1 = key('k1')
const K2 = key('k2')
let dir = ''
let runDocument = ''
/** A string of the demo's conversation, to look for in the stores' bytes. */
let secretText = ''
let target: PostgresTarget

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-cli-keys-'))
  const demo = spawn(process.execPath, ['--import', 'tsx', 'examples/research-demo.ts', '--dir', dir], { cwd: ROOT, stdio: 'ignore' })
  expect(await new Promise((resolve) => demo.on('close', resolve))).toBe(0)
  const exported = await cairn(sqliteStore(join(dir, 'demo.db')).url, ['export', 'research-demo'])
  expect(exported.code, exported.stderr).toBe(0)
  runDocument = exported.stdout
  const note = /"(Revenue[^"]{20,60})"/.exec(runDocument) ?? /"text":"([^"]{40,80})"/.exec(runDocument)
  secretText = note![1]!
  target = await postgresTarget()
}, TIMEOUT_MS)

afterAll(async () => {
  await target?.close()
  await rm(dir, { recursive: true, force: true })
})

const urls: Record<'sqlite' | 'file' | 'postgres', (name: string) => string | undefined> = {
  sqlite: (name) => `sqlite:${join(dir, `${name}.db`)}`,
  file: (name) => `file:${join(dir, name)}`,
  postgres: () => {
    if (target.skipChildProcesses !== undefined) return undefined
    const url = new URL(target.connectionString!)
    url.searchParams.set('schema', target.freshSchema())
    return url.toString()
  },
}

describe.each(['sqlite', 'file', 'postgres'] as const)('the cairn binary with CAIRN_KEYS on a %s store', (backend) => {
  test(
    'imports signed and encrypted, reads only with the key, and rekey rotates to a new key so the old one can go',
    async () => {
      const url = urls[backend]('keyed')
      if (url === undefined) return console.info(`skipped: ${target.skipChildProcesses}`)
      const imported = await cairn(url, ['import'], { input: runDocument, env: { CAIRN_KEYS: K1, CAIRN_ENCRYPT: '1' } })
      expect(imported.code, imported.stderr).toBe(0)
      expect((await cairn(url, ['verify'], { env: { CAIRN_KEYS: K1 } })).stdout).toMatch(/ok {3}research-demo: 6 stored checkpoints/)
      if (backend === 'sqlite') expect((await readFile(join(dir, 'keyed.db'))).includes(secretText)).toBe(false)
      if (backend === 'file') for (const file of await filesUnder(join(dir, 'keyed'))) expect((await readFile(file)).includes(secretText), file).toBe(false)

      // Listing works without keys; contents need them, and the error is one line.
      expect(await cairnJson<unknown[]>(url, ['runs'])).toMatchObject([{ runId: 'research-demo', status: 'completed', checkpoints: 27, toolCalls: null, tokens: null }])
      expect((await cairnJson<unknown[]>(url, ['runs'], { env: { CAIRN_KEYS: K1 } }))[0]).toMatchObject({ toolCalls: 8, steps: 5 })
      const withoutKeys = await cairn(url, ['show', 'research-demo'])
      expect(withoutKeys.code).toBe(1)
      expect(withoutKeys.stderr).toMatch(/^cairn: .*signed with key k1, but this store has no keys.*\n$/)
      const wrongKey = await cairn(url, ['show', 'research-demo'], { env: { CAIRN_KEYS: K2 } })
      expect(wrongKey.code).toBe(1)
      expect(wrongKey.stderr).toMatch(/^cairn: .*k1.*\n$/)

      // Rotation: the new key first, the old one after it; rekey; then the old key can go.
      const rekeyed = await cairnJson<{ keyId: string; runs: number; checkpoints: number }>(url, ['rekey'], { env: { CAIRN_KEYS: `${K2},${K1}`, CAIRN_ENCRYPT: '1' } })
      expect(rekeyed).toMatchObject({ keyId: 'k2', runs: 1, checkpoints: 6 })
      expect((await cairn(url, ['verify'], { env: { CAIRN_KEYS: K2 } })).stdout).toMatch(/ok {3}research-demo: 6 stored checkpoints/)
      const oldOnly = await cairn(url, ['show', 'research-demo'], { env: { CAIRN_KEYS: K1 } })
      expect(oldOnly.code).toBe(1)
      expect(oldOnly.stderr).toContain('k2')
    },
    TIMEOUT_MS,
  )

  test(
    'rekey --sign-unsigned turns signing on for a store written without keys; rekey without keys is refused',
    async () => {
      const url = urls[backend]('unsigned')
      if (url === undefined) return
      expect((await cairn(url, ['import'], { input: runDocument })).code).toBe(0)
      // The probe string is there in the clear when nothing is encrypted.
      if (backend === 'sqlite') expect((await readFile(join(dir, 'unsigned.db'))).includes(secretText)).toBe(true)
      const noKeys = await cairn(url, ['rekey'])
      expect(noKeys).toMatchObject({ code: 1 })
      expect(noKeys.stderr).toMatch(/^cairn: rekey needs keys: set CAIRN_KEYS=/)
      const refused = await cairn(url, ['show', 'research-demo'], { env: { CAIRN_KEYS: K1 } })
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain('not signed')
      const signed = await cairnJson<{ runs: number; checkpoints: number }>(url, ['rekey', '--sign-unsigned'], { env: { CAIRN_KEYS: K1 } })
      expect(signed).toMatchObject({ runs: 1, checkpoints: 6 })
      expect((await cairn(url, ['verify'], { env: { CAIRN_KEYS: K1 } })).stdout).toMatch(/ok {3}research-demo: 6 stored checkpoints/)
    },
    TIMEOUT_MS,
  )
})

describe('CAIRN_KEYS errors', () => {
  test('a malformed CAIRN_KEYS, or --encrypt without keys, is one line and exit 1', async () => {
    const url = `sqlite:${join(dir, 'demo.db')}`
    const malformed = await cairn(url, ['runs'], { env: { CAIRN_KEYS: 'no-colon-here' } })
    expect(malformed.code).toBe(1)
    expect(malformed.stderr).toMatch(/^cairn: CAIRN_KEYS: key entry 1 has no id: expected id:base64secret\n$/)
    const encryptOnly = await cairn(url, ['runs', '--encrypt'])
    expect(encryptOnly.code).toBe(1)
    expect(encryptOnly.stderr).toMatch(/^cairn: encryption needs keys: set CAIRN_KEYS=/)
  })
})

async function filesUnder(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true })
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath ?? (e as unknown as { path: string }).path, e.name))
}
