import { spawn } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { CheckpointDiff, EffectRecord, RunSummary, TimelineEntry } from '../../src/index.js'
import { describeMessage } from '../../src/runner/checkpoint-diff.js'
import { postgresTarget, type PostgresTarget } from '../fixtures/postgres-target.js'
import { AGENTS, cairn, cairnJson, fileStore, postgresStore, ROOT, runNode, sqliteStore, type StoreUnderTest } from './cli-helpers.js'

const TIMEOUT_MS = 120_000
/** Each test runs the binary several times; a loaded machine takes seconds per start. */
const test = (title: string, fn: () => Promise<void>) => it(title, fn, TIMEOUT_MS)
let dir = ''
let runDocument = ''
let target: PostgresTarget
const stores: StoreUnderTest[] = []

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-cli-'))
  const demo = spawn(process.execPath, ['--import', 'tsx', 'examples/research-demo.ts', '--dir', dir], { cwd: ROOT, stdio: 'ignore' })
  expect(await new Promise((resolve) => demo.on('close', resolve))).toBe(0)
  const sqlite = sqliteStore(join(dir, 'demo.db'))
  const exported = await cairn(sqlite.url, ['export', 'research-demo'])
  expect(exported.code, exported.stderr).toBe(0)
  runDocument = join(dir, 'run.json')
  await writeFile(runDocument, exported.stdout)
  stores.push(sqlite, fileStore(join(dir, 'file-store')))
  target = await postgresTarget()
  if (target.skipChildProcesses === undefined) stores.push(postgresStore(target, target.freshSchema()))
  else console.info(`cairn CLI on Postgres skipped: ${target.skipChildProcesses}`)
  // SQLite -> file and SQLite -> Postgres: export + import.
  for (const store of stores.slice(1)) {
    const imported = await cairn(store.url, ['import'], { input: exported.stdout })
    expect(imported.code, imported.stderr).toBe(0)
    expect(imported.stdout).toContain('imported run research-demo (completed)')
  }
}, TIMEOUT_MS)

afterAll(async () => {
  await target?.close()
  await rm(dir, { recursive: true, force: true })
})

describe.each(['sqlite', 'file', 'postgres'] as const)('the cairn binary on a %s store', (name) => {
  const store = () => {
    const found = stores.find((s) => s.name === name)
    if (!found) console.info(`skipped: no ${name} store (see above)`)
    return found
  }
  const timeline = async (url: string, runId: string) => cairnJson<TimelineEntry[]>(url, ['show', runId])

  test('runs lists the demo run with its counts', async () => {
    const s = store()
    if (!s) return
    const runs = await cairnJson<RunSummary[]>(s.url, ['runs'])
    expect(runs.find((r) => r.runId === 'research-demo')).toMatchObject({ name: 'researcher', status: 'completed', steps: 5, checkpoints: 27, stored: 6, toolCalls: 8 })
    const table = await cairn(s.url, ['runs', '--status', 'completed'])
    expect(table.stdout).toMatch(/^RUN\s+NAME\s+STATUS\s+STEPS\s+CHECKPOINTS\s+TOOL CALLS\s+TOKENS\s+STARTED\s+UPDATED\s+OWNER/)
    expect(table.stdout).toMatch(/research-demo\s+researcher\s+completed\s+5\s+27\s+8/)
    expect((await cairnJson<RunSummary[]>(s.url, ['runs', '--status', 'failed'])).length).toBe(0)
  })

  test('show prints the timeline: the crash, the resume and the replayed note', async () => {
    const s = store()
    if (!s) return
    const shown = await cairn(s.url, ['show', 'research-demo'])
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toMatch(/process 1 stopped here; process 2 \(pid \d+ on .+\) resumed the run/)
    expect(shown.stdout).toContain('save_note REPLAYED from the journal, not run')
    const entries = await timeline(s.url, 'research-demo')
    expect(entries).toHaveLength(27)
    expect(entries.filter((e) => e.resumedHere).map((e) => e.phase)).toEqual(['run_started'])
    expect(entries.at(-1)).toMatchObject({ phase: 'run_terminal', execution: 2 })
    const payload = await cairn(s.url, ['show', 'research-demo', '--payload', entries[3]!.checkpointId])
    expect(JSON.parse(payload.stdout)).toMatchObject({ id: entries[3]!.checkpointId, phase: 'post_llm', payload: { finish_reason: 'tool_use' } })
  })

  test('effects prints the journal', async () => {
    const s = store()
    if (!s) return
    const effects = await cairnJson<EffectRecord[]>(s.url, ['effects', 'research-demo'])
    expect(effects.map((e) => e.callId).sort()).toEqual(['fetch-1', 'fetch-2', 'fetch-3', 'fetch-4', 'note-1', 'note-2', 'search-1', 'search-2'])
    expect(effects.every((e) => e.status === 'succeeded' && e.idempotencyKey === `research-demo:${e.callId}`)).toBe(true)
    expect((await cairn(s.url, ['effects', 'research-demo'])).stdout).toMatch(/note-1\s+save_note\s+succeeded\s+1\s+research-demo:note-1/)
  })

  test('diff shows the messages appended, the counters and the effects between two checkpoints', async () => {
    const s = store()
    if (!s) return
    const entries = await timeline(s.url, 'research-demo')
    const from = entries.find((e) => e.phase === 'post_llm' && e.step === 2)!
    const to = entries.findLast((e) => e.phase === 'post_llm')!
    const diff = await cairn(s.url, ['diff', from.checkpointId, to.checkpointId])
    expect(diff.code, diff.stderr).toBe(0)
    expect(diff.stdout).toContain('messages: 4 appended')
    expect(diff.stdout).toContain('+ user: result of note-1 (success), result of fetch-3 (success), result of search-2 (success)')
    expect(diff.stdout).toMatch(/~ runtime\.llm_calls: 3 -> 5/)
    expect(diff.stdout).toMatch(/~ save_note note-2: \(none\) -> succeeded/)
  })

  test('fork at a tool batch, then resume --agents: the batch is replayed from the journal, not run again', async () => {
    const s = store()
    if (!s) return
    const log = join(dir, `${name}-fork-tools.log`)
    const started = await runNode([AGENTS, s.url, 'notes-run'], { env: { CAIRN_TEST_TOOL_LOG: log } })
    expect(started.code, started.stderr).toBe(0)
    const entries = await timeline(s.url, 'notes-run')
    const noteBatch = entries.filter((e) => e.phase === 'post_tool_batch')[1]!
    const fork = await cairnJson<{ runId: string; effectsCopied: number }>(s.url, ['fork', noteBatch.checkpointId, '--run-id', 'notes-fork'])
    expect(fork).toMatchObject({ runId: 'notes-fork', effectsCopied: 3 })
    const before = await readFile(log, 'utf8')
    const resumed = await cairn(s.url, ['resume', 'notes-fork', '--agents', AGENTS], { env: { CAIRN_TEST_TOOL_LOG: log } })
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(resumed.stdout).toContain('write_note note-1 replayed from the journal, not run')
    expect(resumed.stdout).toMatch(/run notes-fork: completed; 1 model calls, 1 tool calls, 1 replayed from the journal/)
    expect(await readFile(log, 'utf8')).toBe(before)
    // A fork at pre_llm (no runtime snapshot of its own) resumes too.
    const preLlm = entries.findLast((e) => e.phase === 'pre_llm')!
    await cairnJson(s.url, ['fork', preLlm.checkpointId, '--run-id', 'notes-fork-2'])
    expect((await cairnJson<{ state: string }[]>(s.url, ['resume', 'notes-fork-2', '--agents', AGENTS]))[0]!.state).toBe('completed')
    expect((await cairn(s.url, ['show', 'notes-fork'])).stdout).toContain(`forked from checkpoint ${noteBatch.checkpointId} of run notes-run`)
  })

  test('diff compares a run with its fork: the fork point, what the source did after it, and what the resumed fork did', async () => {
    const s = store()
    if (!s) return
    const source = await timeline(s.url, 'research-demo')
    const forkPoint = source.find((e) => e.phase === 'post_llm' && e.step === 2)!
    await cairnJson(s.url, ['fork', forkPoint.checkpointId, '--run-id', 'demo-fork'])
    const forked = (await timeline(s.url, 'demo-fork'))[0]!
    // The fork's first checkpoint holds what the source held at the fork point.
    const same = await cairnJson<CheckpointDiff>(s.url, ['diff', forkPoint.checkpointId, forked.checkpointId])
    expect(same).toMatchObject({ from: { runId: 'research-demo' }, to: { runId: 'demo-fork' }, messagesAppended: [], messagesDropped: 0, effects: [] })
    expect(same.changes.filter((c) => c.path.startsWith('runtime.'))).toEqual([])
    // From the fork point the source went on: 4 messages, 2 model calls, note-2 written.
    const later = source.findLast((e) => e.phase === 'post_llm')!
    const ahead = await cairnJson<CheckpointDiff>(s.url, ['diff', forked.checkpointId, later.checkpointId])
    expect(ahead.from).toMatchObject({ runId: 'demo-fork', checkpointId: forked.checkpointId })
    expect(ahead.to).toMatchObject({ runId: 'research-demo', checkpointId: later.checkpointId })
    expect(ahead.messagesAppended.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant'])
    expect(ahead.changes).toContainEqual({ path: 'runtime.llm_calls', before: 3, after: 5 })
    expect(ahead.effects).toContainEqual({ callId: 'note-2', name: 'save_note', before: null, after: 'succeeded' })
    const table = await cairn(s.url, ['diff', later.checkpointId, forked.checkpointId])
    expect(table.code, table.stderr).toBe(0)
    expect(table.stdout).toContain(`from ${later.checkpointId} (research-demo seq ${later.seq} post_llm)`)
    expect(table.stdout).toMatch(new RegExp(`to ${forked.checkpointId} \\(demo-fork seq \\d+ `))
    expect(table.stdout).toContain('messages: 0 appended, 4 dropped')
    expect(table.stdout).toMatch(/~ runtime\.llm_calls: 5 -> 3/)
    expect(table.stdout).toContain('~ save_note note-2: succeeded -> (none)')
    // notes-fork was forked at the note's batch and resumed to its end by the test above; the
    // lookups' batch stands for itself through the snapshot before it, which the results follow.
    const notes = await timeline(s.url, 'notes-run')
    const lookups = notes.find((e) => e.phase === 'post_tool_batch')!
    const resumedEnd = (await timeline(s.url, 'notes-fork')).findLast((e) => e.phase === 'post_llm')!
    const resumed = await cairnJson<CheckpointDiff>(s.url, ['diff', lookups.checkpointId, resumedEnd.checkpointId])
    expect(resumed).toMatchObject({ from: { runId: 'notes-run' }, to: { runId: 'notes-fork' }, messagesDropped: 0 })
    expect(resumed.messagesAppended.map(describeMessage)).toEqual([
      'user: result of look-a (success), result of look-b (success)',
      'assistant: "Writing it down.", call write_note note-1',
      'user: result of note-1 (success)',
      'assistant: "Done after 3 tool results."',
    ])
    expect(resumed.effects).toEqual([{ callId: 'note-1', name: 'write_note', before: null, after: 'succeeded' }])
    const resumedTable = await cairn(s.url, ['diff', lookups.checkpointId, resumedEnd.checkpointId])
    expect(resumedTable.stdout).toContain('messages: 4 appended\n  + user: result of look-a (success), result of look-b (success)\n  + assistant: "Writing it down.", call write_note note-1\n')
    expect(resumedTable.stdout).toMatch(/~ runtime\.llm_calls: 1 -> 3/)
    expect(resumedTable.stdout).toContain('~ write_note note-1: (none) -> succeeded')
  })

  test('recover resumes a run whose process was killed, without writing the note twice', async () => {
    const s = store()
    if (!s) return
    const log = join(dir, `${name}-recover-tools.log`)
    const died = await runNode([AGENTS, s.url, 'notes-dead', 'die'], { env: { CAIRN_TEST_TOOL_LOG: log } })
    expect(died.signal).toBe('SIGKILL')
    expect((await cairnJson<RunSummary[]>(s.url, ['runs', '--status', 'running'])).map((r) => r.runId)).toContain('notes-dead')
    const recovered = await cairnJson<{ runId: string; state: string }[]>(s.url, ['recover', '--agents', AGENTS], { env: { CAIRN_TEST_TOOL_LOG: log } })
    expect(recovered).toEqual([expect.objectContaining({ runId: 'notes-dead', state: 'completed' })])
    expect((await readFile(log, 'utf8')).split('\n').filter((line) => line.startsWith('note:'))).toHaveLength(1)
  })

  test('prune keeps the newest checkpoints of a run', async () => {
    const s = store()
    if (!s) return
    const pruned = await cairnJson<{ checkpointsDeleted: number }>(s.url, ['prune', '--run', 'notes-fork-2', '--keep-last', '2'])
    expect(pruned.checkpointsDeleted).toBeGreaterThan(0)
    // Two stored checkpoints, each with the light phases of its phase log.
    expect((await timeline(s.url, 'notes-fork-2')).filter((entry) => !entry.checkpointId.includes('~'))).toHaveLength(2)
  })

  test('verify passes on intact runs, then names the first tampered record and exits 1', async () => {
    const s = store()
    if (!s) return
    const ok = await cairn(s.url, ['verify'])
    expect(ok.code, ok.stdout + ok.stderr).toBe(0)
    // Verify checks the stored checkpoints: the 27 phases of the run are 6 of them (the rest ride in their phase logs).
    expect(ok.stdout).toMatch(/ok {3}research-demo: 6 stored checkpoints/)
    const victim = (await timeline(s.url, 'research-demo')).filter((entry) => !entry.checkpointId.includes('~'))[4]!
    await s.tamper(victim.checkpointId)
    const bad = await cairn(s.url, ['verify', 'research-demo'])
    expect(bad.code).toBe(1)
    expect(bad.stdout).toContain(`BAD  research-demo: checkpoint ${victim.checkpointId} (seq ${victim.seq})`)
    expect(bad.stdout).toContain('does not match its digest')
  })
})

describe('cairn migrate, import and errors', () => {
  test('migrate creates a new SQLite store and reports its schema versions', async () => {
    const url = `sqlite:${join(dir, 'new', 'fresh.db')}`
    const first = await cairnJson<{ before: number[]; after: number[]; applied: number[] }>(url, ['migrate'])
    expect(first.before).toEqual([])
    expect(first.applied.length).toBeGreaterThan(0)
    expect(first.after).toEqual(first.applied)
    expect((await cairn(url, ['migrate'])).stdout).toContain('already up to date')
    const imported = await cairn(url, ['import', '--file', runDocument])
    expect(imported.code, imported.stderr).toBe(0)
    const again = await cairn(url, ['import', '--file', runDocument])
    expect(again).toMatchObject({ code: 1, stdout: '' })
    expect(again.stderr).toBe('cairn: run research-demo is already in this store; delete it first or import into another store\n')
  })

  test('an unknown run or checkpoint, a missing store, an unreachable server and a foreign database: one line, exit 1', async () => {
    const url = `sqlite:${join(dir, 'demo.db')}`
    const cases: [StoreArgs, RegExp][] = [
      [[url, ['show', 'no-such-run']], /^cairn: run no-such-run is not in sqlite:.*; list the runs with `cairn runs`\n$/],
      [[url, ['effects', 'no-such-run']], /^cairn: run no-such-run is not in /],
      [[url, ['diff', 'nope-1', 'nope-2']], /^cairn: checkpoint nope-1 is not in /],
      [[url, ['fork', 'nope-1']], /^cairn: checkpoint nope-1 is not in /],
      [[`sqlite:${join(dir, 'absent.db')}`, ['runs']], /^cairn: no Cairn store at sqlite:.*absent\.db; give the store with --store URL or CAIRN_STORE/],
      [['postgres://postgres@127.0.0.1:1/none', ['runs']], /^cairn: cannot reach the Postgres store postgres:\/\/postgres@127\.0\.0\.1:1\/none: .*; check the URL and that the server is running\n$/],
      [[`sqlite:${await foreignDatabase()}`, ['runs']], /^cairn: sqlite:.*foreign\.db is not a Cairn store: it holds other data; point --store at a Cairn store\n$/],
    ]
    for (const [[store, args], message] of cases) {
      const exit = await cairn(store, args)
      expect(exit.code, args.join(' ')).toBe(1)
      expect(exit.stderr).toMatch(message)
      expect(exit.stderr.split('\n').filter(Boolean)).toHaveLength(1)
    }
    const debug = await cairn(url, ['show', 'no-such-run', '--debug'])
    expect(debug.code).toBe(1)
    expect(debug.stderr).toMatch(/CliError: run no-such-run is not in[^\n]*\n\s+at /)
  })
})

type StoreArgs = [string, string[]]

async function foreignDatabase(): Promise<string> {
  const path = join(dir, 'foreign.db')
  const db = new Database(path)
  db.exec('CREATE TABLE IF NOT EXISTS invoices (id INTEGER PRIMARY KEY)')
  db.close()
  return path
}
