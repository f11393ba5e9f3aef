import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, describe, expect, it } from 'vitest'
import { Agent, CheckpointCorruptionError, Runner, tool } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { BODY_PHRASES, bodyOf, storedBody } from '../../src/store/encoding/compact-body.js'
import { ScriptedModel } from '../../src/testing.js'

const dirs: string[] = []
afterAll(async () => Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true }))))

async function tempPath(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-body-'))
  dirs.push(dir)
  return join(dir, 'cairn.db')
}

function agent(cycles: number): Agent {
  const lookup = tool({
    name: 'lookup',
    description: 'Look a fact up.',
    inputSchema: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
    idempotent: true,
    callback: (input) => `fact about ${(input as { q: string }).q}`,
  })
  const turns = Array.from({ length: cycles }, (_, k) => [{ text: `step ${k}` }, { toolUse: { toolUseId: `call-${k}`, name: 'lookup', input: { q: `q${k}` } } }])
  return new Agent({ name: 'body-agent', model: new ScriptedModel([...turns, [{ text: 'Done.' }]]), tools: [lookup] })
}

describe('compact checkpoint bodies', () => {
  it('stores each phrase in two characters and reads back the same text', () => {
    for (const phrase of BODY_PHRASES) {
      const body = `[${JSON.stringify(phrase)},${phrase}]`
      const stored = storedBody(body)
      expect(stored.length, phrase).toBeLessThan(body.length)
      expect(bodyOf(stored)).toBe(body)
    }
    expect(new Set(BODY_PHRASES).size).toBe(BODY_PHRASES.length)
    expect(BODY_PHRASES.length).toBeLessThanOrEqual(95)
  })

  it('keeps a body without phrases as it is, and one holding the code characters apart', () => {
    for (const body of ['{}', '{"a":[1,2,3]}', '', '"x"']) {
      expect(storedBody(body)).toBe(body)
      expect(bodyOf(body)).toBe(body)
    }
    // Not JSON, but a body the engine SPI may be given: it must read back as it was, not decoded.
    for (const body of ['a\u0001 b', '\u0002{"model":"x"}', '\u0001', '\u0002']) {
      const stored = storedBody(body)
      expect(stored.charCodeAt(0)).toBe(2)
      expect(bodyOf(stored)).toBe(body)
    }
  })

  it('leaves a code that names no phrase in place and passes other values on, for the row checks to reject', () => {
    expect(bodyOf('{\u0001\u007f}')).toBe('{\u0001\u007f}')
    expect(bodyOf('{"a":1}\u0001')).toBe('{"a":1}\u0001')
    expect(bodyOf('\u0001 ')).toBe(BODY_PHRASES[0])
    for (const value of [7, null, undefined, Buffer.from('x')]) expect(bodyOf(value)).toBe(value)
  })

  it('stores a very long body as it is', () => {
    const body = `{"model":"m","pad":"${'x'.repeat(70_000)}"}`
    expect(storedBody(body)).toBe(body)
  })

  it("shrinks a real run's bodies on SQLite, reads them back, resumes, and rejects an edited code", async () => {
    const path = await tempPath()
    const store = new SqliteStore({ path })
    const runner = new Runner({ store, durability: 'sync' })
    const done = await runner.run(agent(3), { input: 'go', runId: 'body-run' })
    expect(done.state).toBe('completed')
    const history = await runner.history('body-run')
    await store.close()

    const db = new Database(path)
    const rows = db.prepare("SELECT id, body FROM checkpoints WHERE run_id = 'body-run' ORDER BY seq").all() as { id: string; body: string }[]
    db.close()
    expect(rows.length).toBe(history.length)
    // Every runner record holds phrases: each is stored compact, and the whole run in far fewer characters.
    expect(rows.every((row) => row.body.includes('\u0001'))).toBe(true)
    const storedChars = rows.reduce((sum, row) => sum + row.body.length, 0)
    const textChars = rows.reduce((sum, row) => sum + (bodyOf(row.body) as string).length, 0)
    expect(storedChars).toBeLessThan(textChars * 0.6)
    for (const row of rows) expect(() => JSON.parse(bodyOf(row.body) as string) as unknown).not.toThrow()

    const reopened = new SqliteStore({ path })
    expect(await new Runner({ store: reopened }).history('body-run')).toEqual(history)
    const again = await new Runner({ store: reopened }).run(agent(2), { input: 'again', runId: 'body-run-2' })
    expect(again.state).toBe('completed')
    await reopened.close()

    // A code changed to another phrase, or to one that names none: the digest no longer matches.
    const target = rows.find((row) => row.body.includes('\u0001!'))!
    for (const edited of [target.body.replace('\u0001!', '\u0001"'), target.body.replace('\u0001!', '\u0001\u007f')]) {
      const edit = new Database(path)
      edit.prepare('UPDATE checkpoints SET body = ? WHERE id = ?').run(edited, target.id)
      edit.close()
      const tampered = new SqliteStore({ path })
      await expect(tampered.load(target.id)).rejects.toBeInstanceOf(CheckpointCorruptionError)
      await tampered.close()
    }
  })
})
