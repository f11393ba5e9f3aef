import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { linesStartingWith, runScript } from './support/child.js'

// The examples import `cairn`, which resolves to dist/: `npm test` builds before running this.
const TIMEOUT_MS = 60_000
const KEYS = ['alpha', 'beta', 'gamma', 'delta', 'epsilon']

describe('examples/weather.ts', () => {
  it('checkpoints after_model and after_tools of cycle 0, then answers from the tool results', async () => {
    const run = await runScript(['examples/weather.ts'])
    expect(run.code, run.stderr).toBe(0)
    expect(linesStartingWith(run.stdout, 'CHECKPOINT: ')).toEqual(['position=after_model cycleIndex=0', 'position=after_tools cycleIndex=0'])
    expect(linesStartingWith(run.stdout, 'STOP REASON: ')).toEqual(['end_turn'])
    const [message] = linesStartingWith(run.stdout, 'MESSAGE: ')
    expect(JSON.parse(message!)).toEqual({ role: 'assistant', content: [{ text: 'Seattle is sunny now, with clear skies ahead.' }] })
  }, TIMEOUT_MS)
})

describe('examples/crash-recovery.ts', () => {
  let dir = ''
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-example-'))
  })
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it.each([
    { crashAfter: 3, position: 'after_model of cycle 1', lookedUpBeforeCrash: ['alpha', 'beta'] },
    { crashAfter: 4, position: 'after_tools of cycle 1', lookedUpBeforeCrash: ['alpha', 'beta', 'gamma'] },
  ])(
    'a worker killed with SIGKILL after its $position checkpoint is resumed by a fresh process that repeats no lookup',
    async ({ crashAfter, position, lookedUpBeforeCrash }) => {
      const run = await runScript(['examples/crash-recovery.ts', '--crash-after', String(crashAfter), '--dir', dir])
      expect(run.code, run.stderr).toBe(0)
      expect(run.stdout).toContain(`checkpoint ${crashAfter} persisted: ${position}`)
      const [killed] = linesStartingWith(run.stdout, 'KILLED: ')
      const killedPrefix = 'first worker killed by SIGKILL after looking up '
      expect(killed?.startsWith(killedPrefix), killed).toBe(true)
      expect(killed!.slice(killedPrefix.length).split(', ').sort()).toEqual([...lookedUpBeforeCrash].sort())
      expect(run.stdout).toContain(`resuming from ${position}`)
      expect(linesStartingWith(run.stdout, 'STOP REASON: ')).toEqual(['end_turn'])
      const [message] = linesStartingWith(run.stdout, 'MESSAGE: ')
      expect(JSON.parse(message!)).toEqual({ role: 'assistant', content: [{ text: 'Summary: ALPHA-5, BETA-4, GAMMA-5, DELTA-5, EPSILON-7.' }] })

      // Tools of one cycle run concurrently, so lines of a cycle may come in either order.
      const sideEffects = (await readFile(join(dir, 'side-effects.log'), 'utf8')).split('\n').filter((line) => line !== '')
      expect(sideEffects.sort()).toEqual([...KEYS].sort())
    },
    TIMEOUT_MS,
  )
})


