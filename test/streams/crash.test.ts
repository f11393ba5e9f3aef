import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import type { RunEvent, StreamedRunEvent } from '../../src/index.js'
import { postgresTarget } from '../fixtures/postgres-target.js'
import { ROOT } from '../support/child.js'
import { waitFor } from '../support/wait.js'
import { answer, openTarget } from './fixtures/stream-agent.js'

const CHILD = join(ROOT, 'test/streams/fixtures/stream-child.ts')
const dirs: string[] = []
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true })
})

function start(args: string[]): { child: ChildProcess; exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> } {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }))
  })
  return { child, exited }
}

/** The text of the answer streamed for `step` in `events`. */
function textOf(events: readonly RunEvent[], step: number): string {
  return events.flatMap((e) => (e.type === 'text_delta' && e.step === step ? [e.text] : [])).join('')
}

async function crashAndResume(target: string, dir: string): Promise<void> {
  const runId = 'streamed'
  const store = openTarget(target)
  try {
    const readers = [0, 1, 2].map((i) => {
      const out = join(dir, `reader-${i}.json`)
      return { out, process: start(['read', target, runId, out, i === 2 ? '1' : '0']) }
    })
    const writer = start(['write', target, runId])
    // Kill the writer in the middle of the answer: once part of it is durable.
    await waitFor(async () => {
      const events = (await store.events!.read(runId, { limit: 10_000 })).map((s) => s.event as unknown as RunEvent)
      return textOf(events, 1).length >= 40
    }, 'part of the answer in the event log', 60_000)
    writer.child.kill('SIGKILL')
    expect((await writer.exited).signal).toBe('SIGKILL')
    const resumed = await start(['resume', target, runId]).exited
    expect(resumed.stderr).toBe('')
    expect(resumed.stdout).toContain('result completed')

    const truth = (await store.events!.read(runId, { limit: 10_000 })) as unknown as StreamedRunEvent[]
    const events = truth.map((s) => s.event)
    const voided = events.findIndex((e) => e.type === 'model_call_voided')
    expect(voided).toBeGreaterThan(0)
    expect(events.filter((e) => e.type === 'model_call_voided')).toEqual([{ type: 'model_call_voided', runId, step: 1 }])
    // Before the marker: a part of the answer, cut off; after it: the resumed run, whole, once.
    const before = textOf(events.slice(0, voided), 1)
    expect(before.length).toBeGreaterThan(0)
    expect(before.length).toBeLessThan(answer().length)
    expect(answer().startsWith(before)).toBe(true)
    expect(textOf(events.slice(voided), 1)).toBe(answer())
    expect(events[voided + 1]).toMatchObject({ type: 'run_started', resumed: true })
    expect(events.filter((e) => e.type === 'run_started')).toHaveLength(2)
    expect(events[events.length - 1]).toMatchObject({ type: 'run_finished', state: 'completed', text: answer() })
    // Cursors strictly increase.
    const seqs = truth.map((s) => Number(s.cursor))
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b))
    expect(new Set(seqs).size).toBe(seqs.length)

    // Every reader, the one that dropped and came back included, has exactly the log, in order.
    for (const reader of readers) {
      const exit = await reader.process.exited
      expect(exit.stderr).toBe('')
      expect(exit.code).toBe(0)
      const { received, drops } = JSON.parse(await readFile(reader.out, 'utf8')) as { received: StreamedRunEvent[]; drops: number }
      expect(received).toEqual(truth)
      if (reader.out.endsWith('reader-2.json')) expect(drops).toBeGreaterThan(0)
    }
  } finally {
    await store.close()
  }
}

describe('durable run streams across a SIGKILL', () => {
  it('on SQLite: three reader processes, one reconnecting at random, each get the whole log once, with the cut-off turn marked void', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-stream-crash-'))
    dirs.push(dir)
    await crashAndResume(`sqlite:${join(dir, 'cairn.db')}`, dir)
  })

  it('on Postgres: the same across processes, woken by LISTEN/NOTIFY', async (ctx) => {
    const target = await postgresTarget()
    if (target.skipChildProcesses) ctx.skip()
    const dir = await mkdtemp(join(tmpdir(), 'cairn-stream-crash-'))
    dirs.push(dir)
    const schema = target.freshSchema()
    try {
      await crashAndResume(`postgres:${schema}`, dir)
    } finally {
      await target.dropSchemas()
    }
  })
})
