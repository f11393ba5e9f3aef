import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import Database from 'better-sqlite3'
import fc from 'fast-check'
import pg from 'pg'
import { Agent, FileStore, Runner, tool, type CheckpointStore } from '../src/index.js'
import { PostgresStore } from '../src/postgres.js'
import { SqliteStore } from '../src/sqlite.js'
import { ScriptedModel } from '../src/testing.js'
import { mutations } from './mutate.js'
import { outcomeOfError } from './outcomes.js'

/** One stored record edited in place, then put back. */
export interface Edit {
  where: string
  apply(): Promise<boolean>
  restore(): Promise<void>
}

/** A store backend whose rows or files the fuzzer edits directly. */
export interface StoreSurface {
  name: string
  /** The edits to try, drawn from this arbitrary. */
  edits: fc.Arbitrary<Edit>
  /** Read everything a resume or an audit would, through a fresh store handle. */
  open(): Promise<CheckpointStore>
  close(): Promise<void>
}

const RUN_ID = 'fuzzed-run'

/** Write the run every store surface starts from: tool calls (effects), lists, a terminal checkpoint. */
async function seedRun(store: CheckpointStore): Promise<void> {
  const lookup = tool({ name: 'lookup', description: 'Look a key up.', idempotent: true, inputSchema: { type: 'object', properties: { key: { type: 'string' } } }, callback: async (input) => ({ found: (input as { key: string }).key, at: new Date(0), n: 12n }) })
  const note = tool({ name: 'save_note', description: 'Save a note.', inputSchema: { type: 'object', properties: { text: { type: 'string' } } }, callback: async () => 'saved' })
  const model = new ScriptedModel([
    [{ toolUse: { toolUseId: 'lookup-a', name: 'lookup', input: { key: 'a' } } }, { toolUse: { toolUseId: 'lookup-b', name: 'lookup', input: { key: 'b' } } }],
    [{ toolUse: { toolUseId: 'note-1', name: 'save_note', input: { text: 'a and b' } } }],
    [{ text: 'Done.' }],
  ])
  await new Runner({ store, durability: 'sync' }).run(new Agent({ model, tools: [lookup, note], systemPrompt: 'Research.' }), { input: 'research', runId: RUN_ID, threadId: 'fuzz-thread' })
}

/** Every read of the run, each as its value or its error. */
export async function readAll(store: CheckpointStore, ids: readonly string[]): Promise<unknown[]> {
  const reads: (() => Promise<unknown>)[] = [
    () => store.getRun(RUN_ID),
    () => store.listCheckpoints({ runId: RUN_ID }),
    () => store.getLatest({ runId: RUN_ID }),
    ...ids.map((id) => () => store.load(id)),
    () => store.listEffects(RUN_ID),
    () => new Runner({ store }).history(RUN_ID),
  ]
  const out: unknown[] = []
  for (const read of reads) out.push(await read().then((value) => ({ value }), (error: unknown) => ({ error })))
  return out
}

/** Classify the reads after an edit against the pristine reads. */
export function classifyReads(reads: readonly unknown[], pristine: readonly unknown[]): 'accepted' | 'changed' | { error: unknown } {
  let typed: unknown
  let changed = false
  for (const [i, read] of reads.entries()) {
    if ('error' in (read as object)) {
      const error = (read as { error: unknown }).error
      if (outcomeOfError(error) === 'untyped') return { error }
      typed ??= error
    } else if (!isDeepStrictEqual((read as { value: unknown }).value, (pristine[i] as { value: unknown }).value)) {
      changed = true
    }
  }
  if (changed) return 'changed'
  return typed === undefined ? 'accepted' : { error: typed }
}

// --- SQL backends -------------------------------------------------------------------------

interface Cell {
  table: string
  column: string
  keys: Record<string, unknown>
  value: unknown
}

const SQL_INJECTION = "x'; DROP TABLE runs; --"

/** New values for one cell: JSON mutations of JSON text, odd scalars for the rest. */
function cellValues(value: unknown): fc.Arbitrary<unknown> {
  const scalars = fc.constantFrom<unknown>(null, 0, -1, 1.5, 2 ** 53 + 2, -(2 ** 62), 1e308, '', 'x', '{}', '[]', 'null', SQL_INJECTION, 'x'.repeat(1_000_000))
  if (typeof value === 'string' && /^[[{"]/.test(value)) {
    try {
      JSON.parse(value)
      return fc.oneof({ weight: 4, arbitrary: mutations(value).map((m) => m.text) }, { weight: 1, arbitrary: scalars })
    } catch {
      // Not JSON after all: edited as a plain string.
    }
  }
  if (typeof value === 'string' && value.length > 0) {
    const flipped = fc.tuple(fc.nat({ max: value.length - 1 }), fc.nat({ max: 6 })).map(([at, bit]) => value.slice(0, at) + String.fromCharCode(value.charCodeAt(at) ^ (1 << bit)) + value.slice(at + 1))
    return fc.oneof(flipped, fc.nat({ max: value.length - 1 }).map((n) => value.slice(0, n)), scalars)
  }
  if (typeof value === 'number' || typeof value === 'bigint') return fc.oneof(fc.constantFrom<unknown>(Number(value) + 1, Number(value) - 1, -Number(value)), scalars)
  return scalars
}

const TABLES: Record<string, string[]> = { runs: ['run_id'], checkpoints: ['id'], list_items: ['run_id', 'list_id', 'idx'], effects: ['run_id', 'call_id'] }

function cellEdits(cells: readonly Cell[], update: (cell: Cell, value: unknown, keys: Record<string, unknown>) => Promise<boolean>): fc.Arbitrary<Edit> {
  return fc.constantFrom(...cells).chain((cell) =>
    cellValues(cell.value).map((value): Edit => {
      const movedKeys = cell.column in cell.keys ? { ...cell.keys, [cell.column]: value } : cell.keys
      return {
        where: `${cell.table}.${cell.column}`,
        apply: () => update(cell, value, cell.keys),
        restore: async () => {
          await update(cell, cell.value, movedKeys)
        },
      }
    }),
  )
}

/** SQLite: cells of a real database file edited with better-sqlite3. */
export async function sqliteSurface(): Promise<StoreSurface> {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-fuzz-sqlite-'))
  const path = join(dir, 'cairn.db')
  const seed = new SqliteStore({ path })
  await seedRun(seed)
  await seed.close()
  const db = new Database(path)
  const cells: Cell[] = []
  for (const [table, keyColumns] of Object.entries(TABLES)) {
    for (const row of db.prepare(`SELECT * FROM ${table}`).all() as Record<string, unknown>[]) {
      const keys = Object.fromEntries(keyColumns.map((k) => [k, row[k]]))
      for (const [column, value] of Object.entries(row)) cells.push({ table, column, keys, value })
    }
  }
  const update = async (cell: Cell, value: unknown, keys: Record<string, unknown>): Promise<boolean> => {
    const where = Object.keys(keys).map((k) => `${k} = ?`).join(' AND ')
    try {
      return db.prepare(`UPDATE ${cell.table} SET ${cell.column} = ? WHERE ${where}`).run(value, ...Object.values(keys)).changes === 1
    } catch {
      return false
    }
  }
  return {
    name: 'SQLite rows',
    edits: cellEdits(cells, update),
    open: async () => new SqliteStore({ path }),
    close: async () => {
      db.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** Postgres: cells of a fresh schema on the test server edited with pg. */
export async function postgresSurface(connectionString: string): Promise<StoreSurface> {
  const schema = `cairn_fuzz_${process.pid}_${Date.now().toString(36)}`
  const pool = new pg.Pool({ connectionString, max: 2 })
  const seed = new PostgresStore({ pool }, { schema })
  await seedRun(seed)
  await seed.close()
  const cells: Cell[] = []
  for (const [table, keyColumns] of Object.entries(TABLES)) {
    const { rows } = await pool.query(`SELECT * FROM ${schema}.${table}`)
    for (const row of rows as Record<string, unknown>[]) {
      const keys = Object.fromEntries(keyColumns.map((k) => [k, row[k]]))
      for (const [column, value] of Object.entries(row)) if (column !== 'ord') cells.push({ table, column, keys, value: value instanceof Date ? value.toISOString() : value })
    }
  }
  const update = async (cell: Cell, value: unknown, keys: Record<string, unknown>): Promise<boolean> => {
    const where = Object.keys(keys).map((k, i) => `${k} = $${i + 2}`).join(' AND ')
    try {
      const result = await pool.query(`UPDATE ${schema}.${cell.table} SET ${cell.column} = $1 WHERE ${where}`, [value, ...Object.values(keys)])
      return result.rowCount === 1
    } catch {
      return false
    }
  }
  return {
    name: 'Postgres rows',
    edits: cellEdits(cells, update),
    open: async () => new PostgresStore({ pool }, { schema }),
    close: async () => {
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      await pool.end()
    },
  }
}

// --- File store -----------------------------------------------------------------------------

/** FileStore: every file of the store directory edited in place (a JSON file, or one line of a list file). */
export async function fileSurface(): Promise<StoreSurface> {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-fuzz-file-'))
  const directory = join(dir, 'store')
  const seed = new FileStore({ directory })
  await seedRun(seed)
  await seed.close()
  cpSync(directory, join(dir, 'pristine'), { recursive: true })
  const files = listFiles(directory).filter((f) => statSync(f).size > 0)
  const edits = fc.constantFrom(...files).chain((file) => {
    const original = readFileSync(file, 'utf8')
    const lines = original.split('\n')
    const jsonLines = lines.map((line, i) => ({ line, i })).filter(({ line }) => line.startsWith('{') || line.startsWith('[') || line.startsWith('"'))
    const whole = isJson(original) ? mutations(original).map((m) => m.text) : undefined
    const oneLine =
      jsonLines.length > 0 && !isJson(original)
        ? fc.constantFrom(...jsonLines).chain(({ line, i }) => (isJson(line) ? mutations(line) : mutations(JSON.stringify(line))).map((m) => lines.map((l, k) => (k === i ? m.text.replace(/\n/g, ' ') : l)).join('\n')))
        : undefined
    const truncated = fc.nat({ max: Math.max(0, original.length - 1) }).map((n) => original.slice(0, n))
    const arbitrary = whole ?? oneLine ?? truncated
    return arbitrary.map(
      (text): Edit => ({
        where: file.slice(directory.length + 1).replace(/[0-9a-f-]{20,}/g, '<id>'),
        apply: async () => {
          writeFileSync(file, text)
          return true
        },
        restore: async () => {
          writeFileSync(file, original)
        },
      }),
    )
  })
  return {
    name: 'file store files',
    edits,
    open: async () => new FileStore({ directory }),
    close: async () => {
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

function listFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name)
    return entry.isDirectory() ? listFiles(path) : entry.isFile() ? [path] : []
  })
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

/** The ids of the run's checkpoints, read once from the pristine store. */
export async function checkpointIds(store: CheckpointStore): Promise<string[]> {
  return (await store.listCheckpoints({ runId: RUN_ID })).map((c) => c.id)
}
