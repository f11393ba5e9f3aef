import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

// The built package (`npm test` builds before running this): each entry point is a bundle, with
// the code entry points share in chunks of its own.
const ENTRIES = ['index', 'sqlite', 'postgres', 'engine', 'testing', 'openai', 'anthropic', 'ai-sdk', 'langgraph', 'mcp', 'http'] as const
const dist = (entry: string) => import(new URL(`../../dist/${entry}.js`, import.meta.url).href) as Promise<Record<string, unknown>>
const sources = (entry: string) => import(new URL(`../../src/${entry}.ts`, import.meta.url).href) as Promise<Record<string, unknown>>

let dir = ''
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-bundle-'))
})
afterEach(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('the built package', () => {
  it('exports the same names from every entry point as the sources, functions and classes keeping their names', async () => {
    for (const entry of ENTRIES) {
      const [built, source] = await Promise.all([dist(entry), sources(entry)])
      expect(Object.keys(built).sort(), entry).toEqual(Object.keys(source).sort())
      for (const [name, value] of Object.entries(source)) {
        if (typeof value === 'function') expect((built[name] as { name: string }).name, `${entry}: ${name}`).toBe(value.name)
      }
    }
  })

  it('an error thrown by cairn/sqlite is an instance of the classes cairn exports, named after its class', async () => {
    const { CairnError, StoreError, SchemaVersionError } = (await dist('index')) as Record<string, abstract new (...args: never[]) => Error>
    const { SqliteStore } = (await dist('sqlite')) as { SqliteStore: new (options: { path: string }) => { close(): Promise<void> } }

    const notADatabase = join(dir, 'not-a-database.db')
    await writeFile(notADatabase, 'x'.repeat(4096))
    const notOpened = captured(() => new SqliteStore({ path: notADatabase }))
    expect(notOpened).toBeInstanceOf(StoreError!)
    expect(notOpened).toBeInstanceOf(CairnError!)
    expect(notOpened.name).toBe('StoreError')

    const newer = join(dir, 'newer.db')
    await new SqliteStore({ path: newer }).close()
    const db = new Database(newer)
    db.prepare('INSERT INTO cairn_migrations (version, name, applied_at) VALUES (999, ?, ?)').run('from a newer Cairn', Date.now())
    db.close()
    const tooNew = captured(() => new SqliteStore({ path: newer }))
    expect(tooNew).toBeInstanceOf(SchemaVersionError!)
    expect(tooNew).toBeInstanceOf(CairnError!)
    expect(tooNew.name).toBe('SchemaVersionError')
  })
})

function captured(open: () => unknown): Error {
  try {
    open()
  } catch (err) {
    return err as Error
  }
  throw new Error('expected the store not to open')
}
