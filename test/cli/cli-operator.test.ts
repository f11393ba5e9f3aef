import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { EffectRecord, TimelineEntry } from '../../src/index.js'
import { postgresTarget, type PostgresTarget } from '../fixtures/postgres-target.js'
import { AGENTS, cairn, cairnJson, postgresStore, runNode, sqliteStore } from './cli-helpers.js'

// What an operator sees after a process died inside a non-idempotent call and they answered the
// unknown outcome: `cairn effects` counts every execution, `cairn show` says what happened and
// who answered, `cairn resume` prints what ran and what did not; answers to a finished run are
// refused. SQLite and Postgres, the real binary, the run's process SIGKILLed inside the call.

const TIMEOUT_MS = 120_000
const test = (title: string, fn: () => Promise<void>) => it(title, fn, TIMEOUT_MS)
const UNKNOWN = 'note-1:effect_outcome_unknown'
let dir = ''
let target: PostgresTarget

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-cli-operator-'))
  target = await postgresTarget()
}, TIMEOUT_MS)

afterAll(async () => {
  await target?.close()
  await rm(dir, { recursive: true, force: true })
})

const urls = {
  sqlite: () => sqliteStore(join(dir, 'operator.db')).url,
  postgres: () => (target.skipChildProcesses === undefined ? postgresStore(target, target.freshSchema()).url : undefined),
}

/** Start a run whose process is SIGKILLed inside its note, then resume it to the unknown-outcome pause. */
async function pausedOnUnknownNote(url: string, runId: string, log: string): Promise<void> {
  const died = await runNode([AGENTS, url, runId, 'die-in-note'], { env: { CAIRN_TEST_TOOL_LOG: log } })
  expect(died.signal, died.stderr).toBe('SIGKILL')
  const paused = await cairn(url, ['resume', runId, '--agents', AGENTS], { env: { CAIRN_TEST_TOOL_LOG: log } })
  expect(paused.code, paused.stderr).toBe(0)
  expect(paused.stdout).toContain(`run ${runId}: paused; 0 model calls, 0 tool calls, 0 replayed from the journal; waiting on ${UNKNOWN}`)
}

const notes = async (log: string) => (await readFile(log, 'utf8')).split('\n').filter((line) => line.startsWith('note:'))

describe.each(['sqlite', 'postgres'] as const)('operator answers on a %s store', (backend) => {
  test('retry: the note ran twice and cairn effects says 2 attempts; show names the answer, who gave it and when', async () => {
    const url = urls[backend]()
    if (url === undefined) return console.info(`skipped: ${target.skipChildProcesses}`)
    const log = join(dir, `${backend}-retry.log`)
    await pausedOnUnknownNote(url, 'retried', log)
    expect(await notes(log)).toHaveLength(1)

    const resumed = await cairn(url, ['resume', 'retried', '--agents', AGENTS, '--response', `${UNKNOWN}=retry`], { env: { CAIRN_TEST_TOOL_LOG: log } })
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(resumed.stdout).toContain('write_note note-1 runs again: its outcome was unknown and the answer was retry')
    expect(resumed.stdout).toContain('write_note note-1 ran (success)')
    expect(resumed.stdout).not.toContain('replayed from the journal, not run')
    expect(await notes(log)).toHaveLength(2)

    const effects = await cairnJson<EffectRecord[]>(url, ['effects', 'retried'])
    expect(effects.map((e) => [e.callId, e.status, e.attempts])).toEqual([
      ['look-a', 'succeeded', 1],
      ['look-b', 'succeeded', 1],
      ['note-1', 'succeeded', 2],
    ])
    expect((await cairn(url, ['effects', 'retried'])).stdout).toMatch(/note-1\s+write_note\s+succeeded\s+2\s/)

    const shown = await cairn(url, ['show', 'retried'])
    expect(shown.stdout).toMatch(new RegExp(`answer to ${UNKNOWN}: "retry", given by .+@.+ \\(cairn resume\\) at \\d{4}-\\d\\d-\\d\\dT`))
    expect(shown.stdout).toContain('write_note ran again: its outcome was unknown and the answer was retry')
    const entries = await cairnJson<TimelineEntry[]>(url, ['show', 'retried'])
    const answered = entries.find((entry) => entry.answers.length > 0)!
    expect(answered).toMatchObject({ phase: 'run_started', resumedHere: true, answers: [{ interruptId: UNKNOWN, name: 'effect_outcome_unknown', toolUseId: 'note-1', answer: 'retry' }] })
    expect(answered.answers[0]!.appliedBy).toMatch(/^pid \d+ on /)
  })

  test('skip: the note is not run again and nothing says it ran or was replayed; answers to the finished run are refused', async () => {
    const url = urls[backend]()
    if (url === undefined) return
    const log = join(dir, `${backend}-skip.log`)
    await pausedOnUnknownNote(url, 'skipped', log)

    const resumed = await cairn(url, ['resume', 'skipped', '--agents', AGENTS, '--response', `${UNKNOWN}=skip`], { env: { CAIRN_TEST_TOOL_LOG: log } })
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(resumed.stdout).toContain('write_note note-1 not run: its outcome is unknown and the answer was skip')
    expect(resumed.stdout).not.toContain('replayed from the journal, not run')
    expect(resumed.stdout).toContain('run skipped: completed; 1 model calls, 1 tool calls, 0 replayed from the journal, 1 not run on a skip answer')
    expect(await notes(log)).toHaveLength(1)

    const shown = await cairn(url, ['show', 'skipped'])
    expect(shown.stdout).toContain('write_note NOT RUN: its outcome was unknown and the answer was skip')
    expect(shown.stdout).not.toMatch(/write_note ran/)
    expect(shown.stdout).toMatch(new RegExp(`answer to ${UNKNOWN}: "skip", given by `))
    expect((await cairnJson<EffectRecord[]>(url, ['effects', 'skipped'])).find((e) => e.callId === 'note-1')).toMatchObject({ status: 'failed', attempts: 1 })

    // The run is completed: another answer is refused, not answered with the stored result.
    const again = await cairn(url, ['resume', 'skipped', '--agents', AGENTS, '--response', `${UNKNOWN}=retry`])
    expect(again.code).toBe(1)
    expect(again.stderr).toMatch(/^cairn: run skipped is completed, not paused: it waits for no response/)
  })
})
