import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Runner, type RunnerCheckpoint } from '../src/index.js'
import { SqliteStore } from '../src/sqlite.js'
import { runScript } from './support/child.js'

// The demo imports `cairn`, which resolves to dist/: `npm test` builds before running this.
const TIMEOUT_MS = 60_000

interface ToolRun {
  role: 'first' | 'resumed'
  pid: number
  tool: string
  callId: string
  key: string
}

describe('npm run demo (examples/research-demo.ts)', () => {
  let dir = ''
  let demo: { code: number | null; stdout: string; stderr: string }
  let toolRuns: ToolRun[]
  let history: RunnerCheckpoint[]
  let runStatus: string | undefined

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-demo-'))
    demo = await runScript(['examples/research-demo.ts', '--dir', dir])
    const log = await readFile(join(dir, 'demo-tool-runs.jsonl'), 'utf8').catch(() => '')
    toolRuns = log.split('\n').filter(Boolean).map((line) => JSON.parse(line) as ToolRun)
    const store = new SqliteStore({ path: join(dir, 'demo.db') })
    try {
      history = await new Runner({ store }).history('research-demo')
      runStatus = (await store.getRun('research-demo'))?.status
    } finally {
      await store.close()
    }
  }, TIMEOUT_MS)

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it('exits 0 and says the run completed', () => {
    expect(demo.code, demo.stderr).toBe(0)
    expect(demo.stdout).toContain('RUN STATE: completed')
  })

  it('the first process was killed with SIGKILL after running tools, and is gone', () => {
    const killed = /^KILLED: process 1 \(pid (\d+)\) died by SIGKILL/m.exec(demo.stdout)
    expect(killed, demo.stdout).not.toBeNull()
    const firstPids = new Set(toolRuns.filter((run) => run.role === 'first').map((run) => run.pid))
    expect([...firstPids]).toEqual([Number(killed![1])])
    expect(() => process.kill(Number(killed![1]), 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }) as Error)
    expect(toolRuns.some((run) => run.role === 'resumed')).toBe(true)
  })

  it('a fresh process resumed the run from the checkpoints and completed it', () => {
    expect(runStatus).toBe('completed')
    const terminal = history.at(-1)
    expect(terminal?.phase).toBe('run_terminal')
    expect(terminal?.payload.state).toBe('completed')
    const starts = history.filter((checkpoint) => checkpoint.phase === 'run_started').map((checkpoint) => checkpoint.payload.resumed)
    expect(starts).toEqual([false, true])
  })

  it('no non-idempotent effect ran twice: each save_note call ran once and its note is in the file once', async () => {
    const saveNotes = toolRuns.filter((run) => run.tool === 'save_note').map((run) => run.callId)
    expect(saveNotes.length).toBeGreaterThan(0)
    expect(new Set(saveNotes).size).toBe(saveNotes.length)
    const notes = [...(await readFile(join(dir, 'demo-notes.md'), 'utf8')).matchAll(/^## (.*)$/gm)].map((match) => match[1])
    expect(notes.length).toBe(saveNotes.length)
    expect(new Set(notes).size).toBe(notes.length)
  })

  it('the note written before the crash was replayed from the journal by the resumed process', () => {
    const firstNote = toolRuns.find((run) => run.tool === 'save_note' && run.role === 'first')
    expect(firstNote).toBeDefined()
    // Any later runtime snapshot carries the whole execution list (async writes coalesce older ones).
    const batch = history.findLast((checkpoint) => checkpoint.payload.runtime !== null && hasExecution(checkpoint, firstNote!.callId))
    const runtime = batch?.payload.runtime as { tool_executions: { tool_call_id: string; replayed: boolean }[] }
    expect(runtime.tool_executions.find((execution) => execution.tool_call_id === firstNote!.callId)?.replayed).toBe(true)
  })

  it('no model response was requested twice: one post_llm checkpoint per step', () => {
    const steps = history.filter((checkpoint) => checkpoint.phase === 'post_llm').map((checkpoint) => checkpoint.step)
    expect(steps).toEqual([0, 1, 2, 3, 4])
    expect(demo.stdout).toMatch(/model calls saved by resuming\s+3 /)
  })
})

function hasExecution(checkpoint: RunnerCheckpoint, callId: string): boolean {
  const runtime = checkpoint.payload.runtime as { tool_executions?: { tool_call_id: string }[] } | null | undefined
  return runtime?.tool_executions?.some((execution) => execution.tool_call_id === callId) === true
}

