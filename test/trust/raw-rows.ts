import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { FileStore, type EngineStoreOptions } from '../../src/index.js'
import { type EngineStore } from '../../src/engine.js'
import { SqliteStore } from '../../src/sqlite.js'
import { postgresTarget } from '../fixtures/postgres-target.js'
import { editRunLog, foldRunLog, type RawRunLog } from '../support/file-log.js'

/** A checkpoint as stored, read around the store (what someone with write access sees). */
export interface RawCheckpoint {
  id: string
  seq: number
  phase: string
  body: string
  lists: string
  digest: string
  metadata: string
}

/**
 * One backend's data edited directly, the way an attacker with write access to the database or
 * the directory would: no Cairn code between the test and the bytes.
 */
export interface RawBackend {
  name: string
  /** The Postgres schema the store lives in (Postgres only). */
  schema?: string
  /** A new handle on the same data, as a fresh process opens it. */
  open(options: EngineStoreOptions): EngineStore
  /** A run's checkpoints, oldest first. */
  checkpoints(runId: string): Promise<RawCheckpoint[]>
  updateCheckpoint(runId: string, id: string, fields: Partial<Omit<RawCheckpoint, 'id' | 'seq'>>): Promise<void>
  deleteCheckpoint(runId: string, id: string): Promise<void>
  /** Every item of the lists a run's checkpoints refer to (not the run's log of transitions). */
  items(runId: string): Promise<{ listId: string; idx: number; item: string }[]>
  updateItem(runId: string, listId: string, idx: number, item: string): Promise<void>
  updateEffect(runId: string, callId: string, fields: { status: string; output: string | null; outputHash: string | null }): Promise<void>
  deleteEffect(runId: string, callId: string): Promise<void>
  /** A run row's progress fields as stored. */
  runRow(runId: string): Promise<RawRun>
  /** Overwrite fields of a run row (named as `RunRow` names them; nothing else of the row changes). */
  writeRunRow(runId: string, fields: Partial<RawRun> | Record<string, unknown>): Promise<void>
  /** Every column of a run row as stored, named as `RunRow` names them (lease columns too). */
  runColumns(runId: string): Promise<Record<string, unknown>>
  /** Every byte the backend keeps, as text (database file and WAL, files, or a dump). */
  dump(): Promise<string>
  /** Every stored field of a run that a resume trusts, with its stored value. */
  fields(runId: string): Promise<RawField[]>
  /** Overwrite one field (any JSON-able value: a text column may be given a number or null). */
  writeField(runId: string, field: RawField, value: unknown): Promise<void>
}

/** The progress fields of a stored run row: its last seq and the keyed store's signature of it. */
export interface RawRun {
  lastSeq: number
  seal: string | null
}

/** One stored field: a checkpoint row's column, a list item, or an effect row's column. */
export interface RawField {
  table: 'checkpoints' | 'list_items' | 'effects'
  /** The checkpoint id, `listId#idx`, or the call id. */
  id: string
  column: string
  value: unknown
}

const CHECKPOINT_COLUMNS = ['body', 'lists', 'digest', 'metadata', 'phase', 'kind'] as const
const EFFECT_COLUMNS = ['status', 'output', 'output_hash', 'input_hash', 'name', 'idempotency_key'] as const
const camel = (column: string) => column.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())
const snake = (field: string) => (field === 'runId' ? 'run_id' : field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`))
const camelRow = (row: Record<string, unknown>) => Object.fromEntries(Object.entries(row).map(([column, value]) => [camel(column), value]))

/** The fields of rows read with SQL (columns as named in the schema). */
function sqlFields(checkpoints: Record<string, unknown>[], items: Record<string, unknown>[], effects: Record<string, unknown>[]): RawField[] {
  return [
    ...checkpoints.flatMap((row) => CHECKPOINT_COLUMNS.map((column) => ({ table: 'checkpoints' as const, id: String(row.id), column, value: row[column] }))),
    ...items.map((row) => ({ table: 'list_items' as const, id: `${String(row.list_id)}#${String(row.idx)}`, column: 'item', value: row.item })),
    ...effects.flatMap((row) => EFFECT_COLUMNS.map((column) => ({ table: 'effects' as const, id: String(row.call_id), column, value: row[column] }))),
  ]
}

/** The UPDATE of one field, with `?` placeholders: value, run id, then the key columns. */
function updateOf(field: RawField): { sql: string; keys: unknown[] } {
  if (field.table === 'checkpoints') return { sql: `UPDATE checkpoints SET ${field.column} = ? WHERE run_id = ? AND id = ?`, keys: [field.id] }
  if (field.table === 'effects') return { sql: `UPDATE effects SET ${field.column} = ? WHERE run_id = ? AND call_id = ?`, keys: [field.id] }
  const hash = field.id.lastIndexOf('#')
  return { sql: 'UPDATE list_items SET item = ? WHERE run_id = ? AND list_id = ? AND idx = ?', keys: [field.id.slice(0, hash), Number(field.id.slice(hash + 1))] }
}

const dirs: string[] = []

/** Remove the temp directories made so far (call from `afterAll`). */
export async function removeTempDirs(): Promise<void> {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true })
}

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-trust-'))
  dirs.push(dir)
  return dir
}

/** A SQLite database file edited with better-sqlite3. */
export async function sqliteBackend(): Promise<RawBackend> {
  const path = join(await tempDir(), 'cairn.db')
  const edit = <T>(fn: (db: Database.Database) => T): T => {
    const db = new Database(path)
    try {
      return fn(db)
    } finally {
      db.close()
    }
  }
  return {
    name: 'sqlite',
    open: (options) => new SqliteStore({ path, ...options }),
    checkpoints: async (runId) =>
      edit((db) => db.prepare('SELECT id, seq, phase, body, lists, digest, metadata FROM checkpoints WHERE run_id = ? ORDER BY seq').all(runId) as RawCheckpoint[]),
    updateCheckpoint: async (runId, id, fields) =>
      edit((db) => {
        for (const [column, value] of Object.entries(fields)) db.prepare(`UPDATE checkpoints SET ${column} = ? WHERE run_id = ? AND id = ?`).run(value, runId, id)
      }),
    deleteCheckpoint: async (runId, id) => void edit((db) => db.prepare('DELETE FROM checkpoints WHERE run_id = ? AND id = ?').run(runId, id)),
    runRow: async (runId) => edit((db) => db.prepare('SELECT last_seq AS lastSeq, seal FROM runs WHERE run_id = ?').get(runId) as RawRun),
    writeRunRow: async (runId, fields) =>
      edit((db) => {
        for (const [key, value] of Object.entries(fields)) db.prepare(`UPDATE runs SET ${snake(key)} = ? WHERE run_id = ?`).run(value, runId)
      }),
    runColumns: async (runId) => edit((db) => camelRow(db.prepare('SELECT * FROM runs WHERE run_id = ?').get(runId) as Record<string, unknown>)),
    items: async (runId) =>
      edit((db) => db.prepare("SELECT list_id AS listId, idx, item FROM list_items WHERE run_id = ? AND list_id <> 'run-log' ORDER BY list_id, idx").all(runId) as { listId: string; idx: number; item: string }[]),
    updateItem: async (runId, listId, idx, item) =>
      void edit((db) => db.prepare('UPDATE list_items SET item = ? WHERE run_id = ? AND list_id = ? AND idx = ?').run(item, runId, listId, idx)),
    updateEffect: async (runId, callId, fields) =>
      void edit((db) =>
        db.prepare('UPDATE effects SET status = ?, output = ?, output_hash = ? WHERE run_id = ? AND call_id = ?').run(fields.status, fields.output, fields.outputHash, runId, callId),
      ),
    deleteEffect: async (runId, callId) => void edit((db) => db.prepare('DELETE FROM effects WHERE run_id = ? AND call_id = ?').run(runId, callId)),
    fields: async (runId) =>
      edit((db) =>
        sqlFields(
          db.prepare(`SELECT id, ${CHECKPOINT_COLUMNS.join(', ')} FROM checkpoints WHERE run_id = ?`).all(runId) as Record<string, unknown>[],
          db.prepare('SELECT list_id, idx, item FROM list_items WHERE run_id = ?').all(runId) as Record<string, unknown>[],
          db.prepare(`SELECT call_id, ${EFFECT_COLUMNS.join(', ')} FROM effects WHERE run_id = ?`).all(runId) as Record<string, unknown>[],
        ),
      ),
    writeField: async (runId, field, value) => {
      const { sql, keys } = updateOf(field)
      const stored = typeof value === 'object' && value !== null ? JSON.stringify(value) : typeof value === 'boolean' ? Number(value) : value
      edit((db) => db.prepare(sql).run(stored, runId, ...keys))
    },
    dump: async () => {
      const files = (await readdir(join(path, '..'))).filter((name) => name.startsWith('cairn.db'))
      const texts = await Promise.all(files.map((name) => readFile(join(path, '..', name), 'latin1')))
      return texts.join('\n')
    },
  }
}

/** A file store's directory edited with fs: each run's log folded into rows, edited, and written back as a valid log. */
export async function fileBackend(): Promise<RawBackend> {
  const directory = await tempDir()
  const edit = (runId: string, fn: (folded: RawRunLog) => void) => editRunLog(directory, runId, fn)
  const checkpoint = (folded: RawRunLog, id: string) => {
    const row = folded.checkpoints.find((cp) => cp.id === id)
    if (!row) throw new Error(`no checkpoint ${id}`)
    return row
  }
  return {
    name: 'file',
    open: (options) => new FileStore({ directory, ...options }),
    checkpoints: async (runId) => (await foldRunLog(directory, runId)).checkpoints as unknown as RawCheckpoint[],
    updateCheckpoint: (runId, id, fields) => edit(runId, (folded) => void Object.assign(checkpoint(folded, id), fields)),
    deleteCheckpoint: (runId, id) => edit(runId, (folded) => void (folded.checkpoints = folded.checkpoints.filter((cp) => cp.id !== id))),
    runRow: async (runId) => {
      const row = (await foldRunLog(directory, runId)).run as unknown as RawRun
      return { lastSeq: row.lastSeq, seal: row.seal ?? null }
    },
    writeRunRow: (runId, fields) => edit(runId, (folded) => void (folded.run = { ...folded.run, ...fields })),
    runColumns: async (runId) => ({ ...(await foldRunLog(directory, runId)).run }),
    items: async (runId) => {
      const out: { listId: string; idx: number; item: string }[] = []
      for (const [listId, items] of [...(await foldRunLog(directory, runId)).lists].sort(([a], [b]) => (a < b ? -1 : 1))) {
        if (listId !== 'run-log') items.forEach((item, idx) => out.push({ listId, idx, item }))
      }
      return out
    },
    updateItem: (runId, listId, idx, item) => edit(runId, (folded) => void (folded.lists.get(listId)![idx] = item)),
    updateEffect: (runId, callId, fields) => edit(runId, (folded) => void Object.assign(folded.effects.get(callId)!, fields)),
    deleteEffect: (runId, callId) => edit(runId, (folded) => void folded.effects.delete(callId)),
    fields: async (runId) => {
      const folded = await foldRunLog(directory, runId)
      const out: RawField[] = []
      for (const row of folded.checkpoints) for (const column of CHECKPOINT_COLUMNS) out.push({ table: 'checkpoints', id: String(row.id), column, value: row[column] })
      for (const [listId, items] of folded.lists) items.forEach((item, idx) => out.push({ table: 'list_items', id: `${listId}#${idx}`, column: 'item', value: item }))
      for (const row of folded.effects.values()) for (const column of EFFECT_COLUMNS) out.push({ table: 'effects', id: String(row.callId), column, value: row[camel(column)] })
      return out
    },
    writeField: (runId, field, value) =>
      edit(runId, (folded) => {
        if (field.table === 'list_items') {
          const hash = field.id.lastIndexOf('#')
          folded.lists.get(field.id.slice(0, hash))![Number(field.id.slice(hash + 1))] = typeof value === 'string' ? value : JSON.stringify(value)
        } else if (field.table === 'checkpoints') checkpoint(folded, field.id)[field.column] = value
        else folded.effects.get(field.id)![camel(field.column)] = value
      }),
    dump: async () => {
      const texts: string[] = []
      for (const entry of await readdir(directory, { recursive: true, withFileTypes: true })) {
        if (!entry.isFile()) continue
        // A store still open may rename a temporary file into place between the listing and the read.
        const text = await readFile(join(entry.parentPath ?? (entry as { path: string }).path, entry.name), 'latin1').catch((err: NodeJS.ErrnoException) => {
          if (err.code === 'ENOENT' && entry.name.endsWith('.tmp')) return ''
          throw err
        })
        texts.push(text)
      }
      return texts.join('\n')
    },
  }
}

/** A Postgres schema (server or PGlite) edited with SQL. */
export async function postgresBackend(): Promise<RawBackend> {
  const target = await postgresTarget()
  const schema = target.freshSchema()
  const q = (text: string) => text.replaceAll('$S', `"${schema}"`)
  return {
    name: `postgres (${target.kind})`,
    schema,
    open: (options) => target.openStore(schema, options),
    checkpoints: async (runId) =>
      (await target.sql(q('SELECT id, seq::int AS seq, phase, body, lists, digest, metadata FROM $S.checkpoints WHERE run_id = $1 ORDER BY seq'), [runId])) as unknown as RawCheckpoint[],
    updateCheckpoint: async (runId, id, fields) => {
      for (const [column, value] of Object.entries(fields)) await target.sql(q(`UPDATE $S.checkpoints SET ${column} = $1 WHERE run_id = $2 AND id = $3`), [value, runId, id])
    },
    deleteCheckpoint: async (runId, id) => void (await target.sql(q('DELETE FROM $S.checkpoints WHERE run_id = $1 AND id = $2'), [runId, id])),
    runRow: async (runId) => {
      const rows = (await target.sql(q('SELECT last_seq AS "lastSeq", seal FROM $S.runs WHERE run_id = $1'), [runId])) as unknown as RawRun[]
      return { lastSeq: Number(rows[0]!.lastSeq), seal: rows[0]!.seal }
    },
    writeRunRow: async (runId, fields) => {
      for (const [key, value] of Object.entries(fields)) await target.sql(q(`UPDATE $S.runs SET ${snake(key)} = $1 WHERE run_id = $2`), [value, runId])
    },
    runColumns: async (runId) => camelRow((await target.sql(q('SELECT * FROM $S.runs WHERE run_id = $1'), [runId]))[0] as Record<string, unknown>),
    items: async (runId) =>
      (await target.sql(q(`SELECT list_id AS "listId", idx, item FROM $S.list_items WHERE run_id = $1 AND list_id <> 'run-log' ORDER BY list_id, idx`), [runId])) as unknown as {
        listId: string
        idx: number
        item: string
      }[],
    updateItem: async (runId, listId, idx, item) =>
      void (await target.sql(q('UPDATE $S.list_items SET item = $1 WHERE run_id = $2 AND list_id = $3 AND idx = $4'), [item, runId, listId, idx])),
    updateEffect: async (runId, callId, fields) =>
      void (await target.sql(q('UPDATE $S.effects SET status = $1, output = $2, output_hash = $3 WHERE run_id = $4 AND call_id = $5'), [
        fields.status,
        fields.output,
        fields.outputHash,
        runId,
        callId,
      ])),
    deleteEffect: async (runId, callId) => void (await target.sql(q('DELETE FROM $S.effects WHERE run_id = $1 AND call_id = $2'), [runId, callId])),
    fields: async (runId) =>
      sqlFields(
        await target.sql(q(`SELECT id, ${CHECKPOINT_COLUMNS.join(', ')} FROM $S.checkpoints WHERE run_id = $1`), [runId]),
        await target.sql(q('SELECT list_id, idx, item FROM $S.list_items WHERE run_id = $1'), [runId]),
        await target.sql(q(`SELECT call_id, ${EFFECT_COLUMNS.join(', ')} FROM $S.effects WHERE run_id = $1`), [runId]),
      ),
    writeField: async (runId, field, value) => {
      const { sql, keys } = updateOf(field)
      let n = 0
      const stored = typeof value === 'string' || value === null ? value : JSON.stringify(value)
      await target.sql(q(sql.replace(/UPDATE (\w+)/, 'UPDATE $$S.$1').replace(/\?/g, () => `$${++n}`)), [stored, runId, ...keys])
    },
    dump: async () => {
      if (target.kind !== 'server') {
        const rows = await target.sql(
          q(`SELECT (SELECT coalesce(string_agg(t::text, E'\\n'), '') FROM $S.checkpoints t) || (SELECT coalesce(string_agg(t::text, E'\\n'), '') FROM $S.list_items t)
             || (SELECT coalesce(string_agg(t::text, E'\\n'), '') FROM $S.effects t) || (SELECT coalesce(string_agg(t::text, E'\\n'), '') FROM $S.runs t) AS text`),
        )
        return typeof rows[0]?.text === 'string' ? rows[0].text : ''
      }
      const { execFileSync } = await import('node:child_process')
      return execFileSync('pg_dump', ['--schema', schema, '--data-only', target.connectionString!], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 })
    },
  }
}
