/**
 * Direct edits of stored rows and files (`npm run torture:edits`): what does a store do with
 * records changed behind its back? (A file store's run log is folded into rows, edited, and
 * written back with every frame check and its head file valid, so only the store's own digests
 * and seals can tell.) One reference run is written to a SQLite store and to a file store: checkpoints whose conversation lives in append-only lists, and an effect journal. Then
 * each edit of a fixed list — effect rows, run rows, deleted or moved checkpoints, edited
 * checkpoint headers — is applied to a fresh copy of each store, and the copy is read the way a
 * resume and an audit read it (run, latest checkpoint, history, effects). Each edit's outcome is
 * counted:
 *
 * - `typed error`: a read refused it with a Cairn error, and no read returned something else;
 * - `silent change`: a read returned something other than the reference, without an error;
 * - `raw error`: a read threw something that is not a Cairn error;
 * - `no effect`: every read returned the reference (the edit touched nothing a read returns).
 *
 *   npx tsx torture/store-edits.ts            # the table
 *   npx tsx torture/store-edits.ts --verbose  # and every edit's outcome
 */
import { cp, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import Database from 'better-sqlite3'
import { CairnError, FileStore, type CheckpointStore } from '../src/index.js'
import { SqliteStore } from '../src/sqlite.js'
import { editRunLog } from '../test/support/file-log.js'

type Outcome = 'typed error' | 'silent change' | 'raw error' | 'no effect'
type Group = 'effects' | 'runs' | 'rollbacks' | 'history'

/** One edit, described once and applied to either backend. */
interface Edit {
  group: Group
  name: string
  sqlite: (db: Database.Database) => void
  file: (dir: string) => Promise<void>
}

const RUN = 'r'
const OTHER = 'other'
const CHECKPOINTS = 6
const CALLS = ['call-1', 'call-2', 'call-3'] as const

async function main(): Promise<void> {
  const verbose = process.argv.includes('--verbose')
  const root = await mkdtemp(join(tmpdir(), 'cairn-edits-'))
  try {
    const tables: string[] = []
    for (const backend of ['sqlite', 'file'] as const) {
      const base = join(root, `${backend}-base`)
      await writeReference(await open(backend, base))
      const reference = await observe(await open(backend, base))
      const counts = new Map<Group, Map<Outcome, number>>()
      let n = 0
      for (const edit of edits()) {
        const copy = join(root, `${backend}-${n++}`)
        await cp(base, copy, { recursive: true })
        if (backend === 'sqlite') {
          const db = new Database(join(copy, 'cairn.db'))
          edit.sqlite(db)
          db.close()
        } else await edit.file(copy)
        const outcome = classify(reference, await observe(await open(backend, copy)))
        if (verbose) console.log(`${backend.padEnd(6)} ${edit.group.padEnd(9)} ${edit.name.padEnd(48)} ${outcome}`)
        const group = counts.get(edit.group) ?? new Map<Outcome, number>()
        group.set(outcome, (group.get(outcome) ?? 0) + 1)
        counts.set(edit.group, group)
        await rm(copy, { recursive: true, force: true })
      }
      tables.push(table(backend, counts))
    }
    console.log(tables.join('\n\n'))
  } finally {
    await rm(root, { recursive: true, force: true })
  }
}

async function open(backend: 'sqlite' | 'file', dir: string): Promise<CheckpointStore> {
  const warnings = { onWarning: () => undefined }
  return backend === 'sqlite' ? new SqliteStore({ path: join(dir, 'cairn.db'), ...warnings }) : new FileStore({ directory: dir, ...warnings })
}

/** A run with a growing conversation and three journaled tool calls (two finished, one started), and a second run. */
async function writeReference(store: CheckpointStore): Promise<void> {
  await store.createRun({ runId: RUN, name: 'agent', threadId: 'thread-1', configSignature: 'sig-1', metadata: { owner: 'me' } })
  const messages: { role: string; text: string }[] = []
  for (let i = 1; i <= CHECKPOINTS; i++) {
    messages.push({ role: i % 2 === 0 ? 'assistant' : 'user', text: `message number ${i}` })
    await store.save({ runId: RUN, kind: 'agent', phase: i % 2 === 0 ? 'after_model' : 'after_tools', metadata: { step: i }, payload: { messages, step: i } })
  }
  for (const callId of CALLS) {
    await store.recordEffectIntent({ runId: RUN, callId, name: 'send_email', inputHash: `hash-of-${callId}`, idempotencyKey: `${RUN}:${callId}` })
    // Marked started before it runs, as a non-idempotent call is: call-3 started and recorded no outcome.
    await store.startEffect(RUN, callId)
    const output = { toolUseId: callId, status: 'success', content: [{ text: `sent ${callId}` }] }
    if (callId !== 'call-3') await store.completeEffect({ runId: RUN, callId, status: 'succeeded', output })
  }
  await store.save({ runId: OTHER, kind: 'agent', phase: 'after_model', payload: { messages: [] } })
  await store.close()
}

/** What a resume and an audit read; each read's value, or the error it threw. */
async function observe(store: CheckpointStore): Promise<Map<string, unknown>> {
  const reads: Record<string, () => Promise<unknown>> = {
    run: () => store.getRun(RUN),
    latest: () => store.getLatest({ runId: RUN }),
    history: async () => {
      const infos = await store.listCheckpoints({ runId: RUN })
      return { infos, records: await Promise.all(infos.map((info) => store.load(info.id))) }
    },
    effects: () => store.listEffects(RUN),
    ...Object.fromEntries(CALLS.map((callId) => [`effect ${callId}`, () => store.getEffect(RUN, callId)])),
  }
  const seen = new Map<string, unknown>()
  for (const [name, read] of Object.entries(reads)) {
    try {
      seen.set(name, await read())
    } catch (err) {
      seen.set(name, { thrown: err instanceof CairnError ? 'typed' : 'raw', error: err })
    }
  }
  await store.close().catch(() => undefined)
  return seen
}

function classify(reference: Map<string, unknown>, seen: Map<string, unknown>): Outcome {
  let typed = false
  let silent = false
  for (const [name, value] of seen) {
    const thrown = (value as { thrown?: string } | undefined)?.thrown
    if (thrown === 'raw') return 'raw error'
    if (thrown === 'typed') typed = true
    else if (!isDeepStrictEqual(value, reference.get(name))) silent = true
  }
  return silent ? 'silent change' : typed ? 'typed error' : 'no effect'
}

function table(backend: string, counts: Map<Group, Map<Outcome, number>>): string {
  const outcomes: Outcome[] = ['silent change', 'typed error', 'raw error', 'no effect']
  const lines = [`${backend}: | edits | ${outcomes.join(' | ')} |`, `|---|---|${outcomes.map(() => '---').join('|')}|`]
  for (const [group, byOutcome] of counts) {
    const total = [...byOutcome.values()].reduce((a, b) => a + b, 0)
    lines.push(`| ${group} | ${total} | ${outcomes.map((o) => byOutcome.get(o) ?? 0).join(' | ')} |`)
  }
  return lines.join('\n')
}

// ---- the edits -------------------------------------------------------------------------------

const TEXT_EDITS: { name: string; apply: (text: string) => string }[] = [
  { name: 'one letter changed', apply: (text) => text.replace(/sent|send|agent|sig|thread|owner/, (word) => `${word.slice(0, -1)}X`) },
  { name: 'made-up JSON', apply: () => JSON.stringify({ toolUseId: 'call-1', status: 'success', content: [{ text: 'forged' }] }) },
  { name: 'not JSON', apply: (text) => text.slice(0, Math.floor(text.length / 2)) },
  { name: 'empty', apply: () => '' },
  { name: 'a bad tag', apply: () => JSON.stringify({ '~': 'Date', v: 'not a date' }) },
  { name: 'a deep nest', apply: () => `${'['.repeat(20_000)}${']'.repeat(20_000)}` },
]

function edits(): Edit[] {
  return [...effectEdits(), ...runEdits(), ...rollbackEdits(), ...historyEdits()]
}

function effectEdits(): Edit[] {
  const list: Edit[] = []
  const columns = [
    ['output', 'output'],
    ['output_hash', 'outputHash'],
    ['input_hash', 'inputHash'],
    ['name', 'name'],
    ['idempotency_key', 'idempotencyKey'],
  ] as const
  for (const callId of ['call-1', 'call-2'] as const) {
    for (const [column, field] of columns) {
      for (const { name, apply } of TEXT_EDITS) list.push(effectEdit(callId, `${column}: ${name}`, (row) => ({ ...row, [field]: apply(String(row[field])) })))
    }
    list.push(effectEdit(callId, 'status succeeded -> failed', (row) => ({ ...row, status: 'failed' })))
    list.push(effectEdit(callId, 'status -> pending, outcome kept', (row) => ({ ...row, status: 'pending' })))
    list.push(effectEdit(callId, 'status -> pending, outcome cleared', (row) => ({ ...row, status: 'pending', output: null, outputHash: null })))
    list.push(effectEdit(callId, 'outputs swapped with call-3', (row) => ({ ...row, output: row.output?.replaceAll(callId, 'call-3') ?? null })))
  }
  const forged = JSON.stringify({ toolUseId: 'call-3', status: 'success', content: [{ text: 'forged' }] })
  list.push(effectEdit('call-3', 'pending -> succeeded with a made-up output', (row) => ({ ...row, status: 'succeeded', output: forged })))
  list.push(effectEdit('call-3', 'pending -> succeeded, output and hash made up', (row) => ({ ...row, status: 'succeeded', output: forged, outputHash: 'f'.repeat(64) })))
  return list
}

type EffectFields = { status: string; output: string | null; outputHash: string | null; inputHash: string; name: string; idempotencyKey: string }

function effectEdit(callId: string, name: string, change: (row: EffectFields) => EffectFields): Edit {
  return {
    group: 'effects',
    name: `${callId} ${name}`,
    sqlite: (db) => {
      const row = db.prepare('SELECT status, output, output_hash AS outputHash, input_hash AS inputHash, name, idempotency_key AS idempotencyKey FROM effects WHERE run_id = ? AND call_id = ?').get(RUN, callId) as EffectFields
      const next = change(row)
      db.prepare('UPDATE effects SET status = ?, output = ?, output_hash = ?, input_hash = ?, name = ?, idempotency_key = ? WHERE run_id = ? AND call_id = ?').run(
        next.status,
        next.output,
        next.outputHash,
        next.inputHash,
        next.name,
        next.idempotencyKey,
        RUN,
        callId,
      )
    },
    file: (dir) =>
      editRunLog(dir, RUN, (log) => {
        const row = log.effects.get(callId)!
        Object.assign(row, change(row as unknown as EffectFields))
      }),
  }
}

function runEdits(): Edit[] {
  const list: Edit[] = []
  const columns = [
    ['name', 'name'],
    ['thread_id', 'threadId'],
    ['config_signature', 'configSignature'],
    ['metadata', 'metadata'],
  ] as const
  for (const [column, field] of columns) {
    for (const { name, apply } of TEXT_EDITS) list.push(runEdit(`${column}: ${name}`, column, field, (value) => apply(String(value))))
  }
  list.push(runEdit('status -> not a status', 'status', 'status', () => 'bogus'))
  list.push(runEdit('status -> completed', 'status', 'status', () => 'completed'))
  list.push(runEdit('last_seq lowered by 2', 'last_seq', 'lastSeq', (value) => Number(value) - 2))
  list.push(runEdit('last_seq raised by 2', 'last_seq', 'lastSeq', (value) => Number(value) + 2))
  list.push(runEdit('last_seq -> -1', 'last_seq', 'lastSeq', () => -1))
  return list
}

function runEdit(name: string, column: string, field: string, change: (value: unknown) => unknown): Edit {
  return {
    group: 'runs',
    name,
    sqlite: (db) => {
      const value = (db.prepare(`SELECT ${column} AS value FROM runs WHERE run_id = ?`).get(RUN) as { value: unknown }).value
      db.prepare(`UPDATE runs SET ${column} = ? WHERE run_id = ?`).run(change(value), RUN)
    },
    file: (dir) => editRunLog(dir, RUN, (log) => void (log.run![field] = change(log.run![field]))),
  }
}

function rollbackEdits(): Edit[] {
  const list: Edit[] = []
  for (const count of [1, 2, 3]) {
    list.push({
      group: 'rollbacks',
      name: `the ${count} newest checkpoints deleted`,
      sqlite: (db) => void db.prepare('DELETE FROM checkpoints WHERE run_id = ? AND seq > ?').run(RUN, CHECKPOINTS - count),
      file: (dir) => editRunLog(dir, RUN, (log) => void log.checkpoints.splice(-count)),
    })
    list.push({
      group: 'rollbacks',
      name: `the ${count} newest checkpoints moved to another run`,
      sqlite: (db) => void db.prepare('UPDATE checkpoints SET run_id = ? WHERE run_id = ? AND seq > ?').run(OTHER, RUN, CHECKPOINTS - count),
      file: async (dir) => {
        let moved: Record<string, unknown>[] = []
        await editRunLog(dir, RUN, (log) => void (moved = log.checkpoints.splice(-count)))
        await editRunLog(dir, OTHER, (log) => void log.checkpoints.push(...moved.map((row) => ({ ...row, runId: OTHER, seq: Number(row.seq) + 100 }))))
      },
    })
  }
  for (const callId of CALLS) {
    list.push({
      group: 'rollbacks',
      name: `effect ${callId} deleted`,
      sqlite: (db) => void db.prepare('DELETE FROM effects WHERE run_id = ? AND call_id = ?').run(RUN, callId),
      file: (dir) => editRunLog(dir, RUN, (log) => void log.effects.delete(callId)),
    })
  }
  list.push({ ...effectEdit('call-3', 'status started -> pending', (row) => ({ ...row, status: 'pending' })), group: 'rollbacks' })
  list.push({
    group: 'rollbacks',
    name: 'the newest checkpoint renumbered below the others',
    sqlite: (db) => void db.prepare('UPDATE checkpoints SET seq = 0 WHERE run_id = ? AND seq = ?').run(RUN, CHECKPOINTS),
    file: (dir) => editRunLog(dir, RUN, (log) => void log.checkpoints.unshift({ ...log.checkpoints.pop()!, seq: 0 })),
  })
  list.push({
    group: 'rollbacks',
    name: 'the newest checkpoint and its list items deleted',
    sqlite: (db) => {
      db.prepare('DELETE FROM checkpoints WHERE run_id = ? AND seq = ?').run(RUN, CHECKPOINTS)
      db.prepare('DELETE FROM list_items WHERE run_id = ? AND idx = ?').run(RUN, CHECKPOINTS - 1)
    },
    file: (dir) =>
      editRunLog(dir, RUN, (log) => {
        log.checkpoints.pop()
        for (const items of log.lists.values()) items.length = Math.min(items.length, CHECKPOINTS - 1)
      }),
  })
  return list
}

function historyEdits(): Edit[] {
  const list: Edit[] = []
  const columns = [
    ['kind', 'kind', (value: unknown) => `${String(value)}X`],
    ['phase', 'phase', (value: unknown) => `${String(value)}X`],
    ['created_at', 'createdAt', (value: unknown) => Number(value) + 1],
    ['schema_version', 'schemaVersion', (value: unknown) => Number(value) + 1],
    ['terminal', 'terminal', (value: unknown) => (value === 1 || value === true ? 0 : 1)],
    ['metadata', 'metadata', () => '{"step":99}'],
    ['metadata', 'metadata', () => '{"step":'],
    ['parent_id', 'parentId', () => 'someone-else'],
    ['workflow_name', 'workflowName', () => 'wf'],
  ] as const
  for (const seq of [2, 4]) {
    for (const [column, field, change] of columns) {
      list.push({
        group: 'history',
        name: `checkpoint ${seq} ${column} edited`,
        sqlite: (db) => {
          const value = (db.prepare(`SELECT ${column} AS value FROM checkpoints WHERE run_id = ? AND seq = ?`).get(RUN, seq) as { value: unknown }).value
          const next = change(value)
          db.prepare(`UPDATE checkpoints SET ${column} = ? WHERE run_id = ? AND seq = ?`).run(field === 'terminal' ? Number(next) : next, RUN, seq)
        },
        file: (dir) =>
          editRunLog(dir, RUN, (log) => {
            const row = log.checkpoints[seq - 1]!
            row[field] = field === 'terminal' ? next(row[field]) : change(row[field])
          }),
      })
    }
    list.push({
      group: 'history',
      name: `checkpoint ${seq} made unreadable`,
      sqlite: (db) => void db.prepare('UPDATE checkpoints SET body = ? WHERE run_id = ? AND seq = ?').run('{"broken', RUN, seq),
      file: (dir) => editRunLog(dir, RUN, (log) => void (log.checkpoints[seq - 1]!.body = '{"broken')),
    })
  }
  return list
}

function next(value: unknown): boolean {
  return value !== true
}

await main()
