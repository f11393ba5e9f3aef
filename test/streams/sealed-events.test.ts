import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { deflateRawSync, inflateRawSync } from 'node:zlib'
import Database from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { Agent, CheckpointIntegrityError, FileStore, Runner, type CheckpointStore, type RunEvent } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel } from '../../src/testing.js'
import { useTempDirs } from '../support/temp-dirs.js'

const tempDir = useTempDirs('cairn-sealed-events-')

const KEY = { id: 'k1', secret: 'a'.repeat(64) }
const OTHER_KEY = { id: 'k1', secret: 'b'.repeat(64) }
const SECRET_WORD = 'subscriptions'
const ANSWER = `The fourth quarter grew by twelve percent, led by ${SECRET_WORD} and the new enterprise tier.`

function agent(): Agent {
  return new Agent({ model: new ScriptedModel([[{ reasoning: { text: 'Think about Q4.' } }, { text: ANSWER }]]), name: 'analyst' })
}

async function collect(store: CheckpointStore, runId: string): Promise<{ cursor: string; event: RunEvent }[]> {
  const out: { cursor: string; event: RunEvent }[] = []
  for await (const item of new Runner({ store }).events(runId)) out.push(item)
  return out
}

/** Every byte of every file under `dir`, as latin1 text to search. */
async function allBytes(dir: string): Promise<string> {
  let text = ''
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) text += (await readFile(join(entry.parentPath, entry.name))).toString('latin1')
  }
  return text
}

const backends: [string, (dir: string, keys?: (typeof KEY)[]) => CheckpointStore][] = [
  ['sqlite', (dir, keys) => new SqliteStore({ path: join(dir, 'cairn.db'), ...(keys ? { keys, encrypt: true } : {}) })],
  ['file', (dir, keys) => new FileStore({ directory: dir, ...(keys ? { keys, encrypt: true } : {}) })],
]

describe.each(backends)('an encrypted %s store', (_name, open) => {
  it('streams a run through its event log, and no streamed text lies in the clear', async () => {
    const dir = await tempDir()
    const store = open(dir, [KEY])
    expect(store.events).toBeDefined()
    const live: RunEvent[] = []
    const result = await new Runner({ store, onEvent: (event) => void live.push(event) }).run(agent(), { input: 'Analyze Q4', runId: 'sealed' })
    expect(result.state).toBe('completed')
    const streamed = await collect(store, 'sealed')
    expect(streamed.map((item) => item.event.type)).toContain('text_delta')
    expect(streamed.filter((item) => item.event.type === 'text_delta').map((item) => (item.event as { text: string }).text).join('')).toBe(ANSWER)
    expect(streamed.at(-1)!.event).toMatchObject({ type: 'run_finished', state: 'completed' })
    await store.close()

    // Another store on the same files with the same key reads the same stream.
    const again = open(dir, [KEY])
    expect(await collect(again, 'sealed')).toEqual(streamed)
    await again.close()
    // Neither the log nor anything else on disk holds the answer's words.
    expect(await allBytes(dir)).not.toContain(SECRET_WORD)
  })

  it('refuses to stream with another key, and a store without keys sees only ciphertext', async () => {
    const dir = await tempDir()
    const store = open(dir, [KEY])
    await new Runner({ store }).run(agent(), { input: 'Analyze Q4', runId: 'sealed' })
    await store.close()

    const wrong = open(dir, [OTHER_KEY])
    await expect(wrong.events!.read('sealed')).rejects.toBeInstanceOf(CheckpointIntegrityError)
    await wrong.close()

    const plain = open(dir)
    const raw = await plain.events!.read('sealed')
    expect(raw.length).toBeGreaterThan(0)
    for (const { event } of raw) expect(Object.keys(event)).toEqual(['sealed'])
    await plain.close()
  })
})

describe('an encrypted SQLite store\'s event log', () => {
  it('refuses an event edited, moved from another run, or written in the clear', async () => {
    const dir = await tempDir()
    const path = join(dir, 'cairn.db')
    const store = new SqliteStore({ path, keys: [KEY], encrypt: true })
    await new Runner({ store }).run(agent(), { input: 'Analyze Q4', runId: 'a' })
    await new Runner({ store }).run(agent(), { input: 'Analyze Q4', runId: 'b' })
    const first = (await store.events!.read('a'))[0]!
    await store.close()

    expect(first.cursor).toBe('1')
    const db = new Database(path)
    // The row holding event 1 (an append's row holds its events as a JSON array, deflated).
    const firstRow = (runId: string) => db.prepare('SELECT seq, body FROM run_events WHERE run_id = ? ORDER BY seq LIMIT 1').raw().get(runId) as [number, Buffer]
    const eventsOf = (body: Buffer) => JSON.parse(inflateRawSync(body).toString('utf8')) as unknown[]
    const [seqA, bodyA] = firstRow('a')
    const eventsA = eventsOf(bodyA)
    const eventB = eventsOf(firstRow('b')[1])[0]
    const setFirst = (event: unknown) => db.prepare('UPDATE run_events SET body = ? WHERE run_id = ? AND seq = ?').run(deflateRawSync(JSON.stringify([event, ...eventsA.slice(1)])), 'a', seqA)
    const reopen = () => new SqliteStore({ path, keys: [KEY], encrypt: true })

    // Moved from run b into run a.
    setFirst(eventB)
    let check = reopen()
    await expect(check.events!.read('a')).rejects.toThrow(/event 1 of run a does not decrypt/)
    await check.close()
    // One character of the ciphertext changed.
    const sealed = (eventsA[0] as { sealed: string }).sealed
    const flipped = `${sealed.slice(0, -3)}${sealed.at(-3) === 'A' ? 'B' : 'A'}${sealed.slice(-2)}`
    setFirst({ sealed: flipped })
    check = reopen()
    await expect(check.events!.read('a')).rejects.toBeInstanceOf(CheckpointIntegrityError)
    await check.close()
    // Written in the clear.
    setFirst({ type: 'text_delta', runId: 'a', step: 0, text: 'forged' })
    check = reopen()
    await expect(check.events!.read('a')).rejects.toThrow(/is not encrypted/)
    // Run b is untouched.
    expect((await check.events!.read('b')).length).toBeGreaterThan(0)
    await check.close()
    db.close()
  })
})
