import { join } from 'node:path'
import Database from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { CheckpointCorruptionError, hashValue } from '../../src/index.js'
import { sha256 } from '../../src/engine.js'
import { STORED_DIGEST_CHARS } from '../../src/core/hash.js'
import { SqliteStore } from '../../src/sqlite.js'
import { useTempDirs } from '../support/temp-dirs.js'

const tempDir = useTempDirs('cairn-output-hashes-')

const OUTPUT = { toolUseId: 'c1', status: 'success', content: [{ text: 'the tool said so' }] }

/** A SQLite store holding one finished effect, and its file for raw edits. */
async function storeWithEffect(): Promise<{ path: string; store: SqliteStore }> {
  const dir = await tempDir()
  const path = join(dir, 'cairn.db')
  const store = new SqliteStore({ path })
  await store.write({
    runId: 'r',
    intents: [{ runId: 'r', callId: 'c1', name: 'lookup', inputHash: 'a'.repeat(64), idempotencyKey: 'r:c1' }],
    completions: [{ runId: 'r', callId: 'c1', status: 'succeeded', output: OUTPUT }],
  })
  return { path, store }
}

/** The outcome digest the store writes after an output hash (`|d1.`). */
function withOutcomeDigest(outputHash: string): string {
  return `${outputHash}|d1.${sha256(JSON.stringify(['effect-outcome', 'r', 'c1', 'succeeded', outputHash])).slice(0, STORED_DIGEST_CHARS)}`
}

describe('effect output hashes', () => {
  it('are the SHA-256 of the output as stored, checked without parsing it', async () => {
    const { path, store } = await storeWithEffect()
    const raw = new Database(path)
    const row = raw.prepare('SELECT output, output_hash AS outputHash FROM effects').get() as { output: string; outputHash: string }
    expect(row.outputHash.split('|')[0]).toBe(`t1.${sha256(row.output)}`)
    // A reader sees the SHA-256 alone, as before.
    expect((await store.getEffect('r', 'c1'))?.outputHash).toBe(sha256(row.output))
    // Text that is not JSON under a hash that matches it would parse-fail; one that does not match is refused first.
    raw.prepare('UPDATE effects SET output = ?').run(row.output.replace('said', 'sad'))
    raw.close()
    await expect(store.getEffect('r', 'c1')).rejects.toThrow(CheckpointCorruptionError)
    await expect(store.getEffect('r', 'c1')).rejects.toThrow(/does not match its hash/)
    await store.close()
  })

  it('written before (the SHA-256 of the canonical JSON) still verify, and an edited output under one is refused', async () => {
    const { path, store } = await storeWithEffect()
    const raw = new Database(path)
    const { output } = raw.prepare('SELECT output FROM effects').get() as { output: string }
    raw.prepare('UPDATE effects SET output_hash = ?').run(withOutcomeDigest(hashValue(OUTPUT)))
    expect((await store.getEffect('r', 'c1'))?.output).toEqual(OUTPUT)
    raw.prepare('UPDATE effects SET output = ?').run(output.replace('said', 'sad'))
    raw.close()
    await expect(store.getEffect('r', 'c1')).rejects.toThrow(/does not match its hash/)
    await store.close()
  })
})
