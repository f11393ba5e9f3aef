import { describe, expect, it } from 'vitest'
import { linesStartingWith, runScript } from '../support/child.js'

// The examples import `cairn` and `cairn-agents/sqlite`, which resolve to dist/: `npm test` builds first.
const TIMEOUT_MS = 60_000
const SQUARES = JSON.stringify([{ 1: 1, 2: 4, 3: 9, 4: 16, 5: 25, 6: 36, 7: 49, 8: 64, 9: 81, 10: 100 }])

describe('examples/workflow-squares.ts', () => {
  it.each([
    { store: 'file', killAfter: 4 },
    { store: 'sqlite', killAfter: 8 },
  ])(
    'a run SIGKILLed after super step $killAfter ($store storage) resumes in a fresh process and prints the same results as an uninterrupted run',
    async ({ store, killAfter }) => {
      const run = await runScript(['examples/workflow-squares.ts', '--store', store, '--kill-after', String(killAfter)])
      expect(run.code, run.stderr).toBe(0)
      expect(linesStartingWith(run.stdout, 'Results: ')).toEqual([SQUARES, SQUARES])
      expect(linesStartingWith(run.stdout, 'KILLED: ')).toEqual([`the worker died by SIGKILL after super step ${killAfter}`])
      expect(linesStartingWith(run.stdout, 'Resuming from iteration ')).toEqual([String(killAfter)])
      // The resumed process ran only the super steps after the checkpoint it resumed from.
      const afterResume = run.stdout.slice(run.stdout.indexOf('Resuming from iteration'))
      expect(linesStartingWith(afterResume, '   superstep ').map((line) => Number(line.split(' ')[0]))).toEqual(range(killAfter + 1, 11))
      expect(run.stdout).toContain('OK: the resumed run printed the same results as the uninterrupted one')
    },
    TIMEOUT_MS,
  )
})

describe('examples/workflow-recovery.ts', () => {
  it.each([{ seed: 1 }, { seed: 7 }])(
    'the recovery loop survives random interruptions and crashes (seed $seed) and processes every item exactly once',
    async ({ seed }) => {
      const run = await runScript(['examples/workflow-recovery.ts', '--seed', String(seed)])
      expect(run.code, run.stderr).toBe(0)
      expect(linesStartingWith(run.stdout, 'Workflow completed: ')).toEqual(['Processed 10 items: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10'])
      const interruptions = linesStartingWith(run.stdout, 'Simulated interruption')
      const errors = linesStartingWith(run.stdout, 'Error: ')
      expect(interruptions.length).toBeGreaterThan(0)
      expect(errors.length).toBeGreaterThan(0)
      expect(errors.every((line) => /executor worker failed in superstep \d+: simulated crash/.test(line))).toBe(true)
      expect(linesStartingWith(run.stdout, 'Resuming from checkpoint ')).toHaveLength(interruptions.length + errors.length)
      expect(linesStartingWith(run.stdout, 'ATTEMPTS: ')).toEqual([String(interruptions.length + errors.length + 1)])
    },
    TIMEOUT_MS,
  )
})

describe('examples/workflow-approval.ts', () => {
  it('asks a human for approval, stops, and is answered (a rejection, then an approval) by fresh processes', async () => {
    const run = await runScript(['examples/workflow-approval.ts'])
    expect(run.code, run.stderr).toBe(0)
    expect(linesStartingWith(run.stdout, 'STATUS: ')).toEqual(['paused', 'paused', 'idle'])
    const requests = linesStartingWith(run.stdout, 'REQUEST: ').map((line) => JSON.parse(line) as { draft: { revision: number; text: string } })
    expect(requests.map((r) => r.draft.revision)).toEqual([1, 2])
    expect(requests[1]!.draft.text).toBe('Cairns mark the way.')
    expect(linesStartingWith(run.stdout, '   found request ')).toHaveLength(2)
    expect(linesStartingWith(run.stdout, 'OUTPUT: ')).toEqual(['Published (revision 2): Cairns mark the way.'])
  }, TIMEOUT_MS)
})

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i)
}


