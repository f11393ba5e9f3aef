import { randomBytes } from 'node:crypto'
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { AGENTS, cairn, runNode } from './cli-helpers.js'

// `cairn rekey` on an encrypted SQLite store: a rotation keeps the store encrypted or is refused;
// only --decrypt writes it in plaintext, and the output says what it did.

const TIMEOUT_MS = 120_000
const key = (id: string) => `${id}:${randomBytes(32).toString('base64')}`
const K1 = key('k1')
const K2 = key('k2')
/** What a lookup returns at its end: it must appear in no byte of the store while it is encrypted. */
const SECRET = `tok_${randomBytes(12).toString('hex')}`
let dir = ''
let url = ''

/** Every byte of the database, its WAL and shared memory, as text. */
async function storeBytes(): Promise<string> {
  const names = (await readdir(dir)).filter((name) => name.startsWith('cairn.db'))
  return (await Promise.all(names.map((name) => readFile(join(dir, name), 'latin1')))).join('\n')
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-cli-rekey-'))
  url = `sqlite:${join(dir, 'cairn.db')}`
  const run = await runNode([AGENTS, url, 'sealed'], { env: { CAIRN_KEYS: K1, CAIRN_ENCRYPT: '1', CAIRN_TEST_SECRET: SECRET } })
  expect(run.code, run.stderr).toBe(0)
}, TIMEOUT_MS)

afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('cairn rekey on an encrypted store', () => {
  test(
    'a plain rekey is refused and names the flags; --encrypt keeps it encrypted; only --decrypt decrypts',
    async () => {
      // The secret really is in a tool result: the store shows it with the key.
      const effects = await cairn(url, ['effects', 'sealed', '--json'], { env: { CAIRN_KEYS: K1 } })
      expect(effects.stdout).toContain(SECRET)
      expect(await storeBytes()).not.toContain(SECRET)

      const plain = await cairn(url, ['rekey'], { env: { CAIRN_KEYS: `${K2},${K1}` } })
      expect(plain.code).toBe(1)
      expect(plain.stderr).toMatch(/^cairn: run sealed holds encrypted records, and a rekey without --encrypt would write them in plaintext; nothing of it was changed\. Pass --encrypt .* or --decrypt /)
      expect(await storeBytes()).not.toContain(SECRET)

      const kept = await cairn(url, ['rekey', '--encrypt'], { env: { CAIRN_KEYS: `${K2},${K1}` } })
      expect(kept.code, kept.stderr).toBe(0)
      expect(kept.stdout).toMatch(/^rekeyed 1 runs under key k2: \d+ checkpoints, \d+ list items and \d+ effects rewritten \(encrypted before: yes, after: yes\)\n$/)
      expect(await storeBytes()).not.toContain(SECRET)

      // CAIRN_ENCRYPT in the environment keeps an encrypted store encrypted, as --encrypt does.
      const again = await cairn(url, ['rekey', '--json'], { env: { CAIRN_KEYS: K2, CAIRN_ENCRYPT: '1' } })
      expect(JSON.parse(again.stdout)).toMatchObject({ keyId: 'k2', checkpoints: 0, encrypted: { before: 'yes', after: 'yes' } })

      const both = await cairn(url, ['rekey', '--encrypt', '--decrypt'], { env: { CAIRN_KEYS: K2 } })
      expect(both.stderr).toBe('cairn: rekey takes --encrypt or --decrypt, not both\n')
      expect(await storeBytes()).not.toContain(SECRET)

      const decrypted = await cairn(url, ['rekey', '--decrypt'], { env: { CAIRN_KEYS: K2 } })
      expect(decrypted.code, decrypted.stderr).toBe(0)
      expect(decrypted.stdout).toMatch(/\(encrypted before: yes, after: no\)\n$/)
      expect(await storeBytes()).toContain(SECRET)

      // Encrypting it again takes --encrypt as well: CAIRN_ENCRYPT alone is refused.
      const unasked = await cairn(url, ['rekey'], { env: { CAIRN_KEYS: K2, CAIRN_ENCRYPT: '1' } })
      expect(unasked.code).toBe(1)
      expect(unasked.stderr).toMatch(/holds records in plaintext, .* Pass --encrypt to encrypt them/)
      const encrypted = await cairn(url, ['rekey', '--encrypt', '--json'], { env: { CAIRN_KEYS: K2 } })
      expect(JSON.parse(encrypted.stdout)).toMatchObject({ encrypted: { before: 'no', after: 'yes' } })
      expect((await cairn(url, ['verify'], { env: { CAIRN_KEYS: K2 } })).stdout).toMatch(/ok {3}sealed: \d+ stored checkpoints/)
    },
    TIMEOUT_MS,
  )
})
