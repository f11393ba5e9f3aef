import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { FileStore, Runner, type CheckpointStore } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { postgresTarget } from '../fixtures/postgres-target.js'
import { answeredAfterWinner, prepare, race, report, runChild, type RaceConfig, type RaceState } from './fixtures/race.js'

// Two — and five — fresh processes resume one run at the same instant (released by a socket
// barrier) after the process executing it was SIGKILLed. One owner per run: exactly one of them
// executes it, the others get RunBusyError or the stored result, and no non-idempotent call runs twice.

const target = await postgresTarget()
afterAll(() => target.close())

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

interface Backend {
  name: string
  skip: string | undefined
  open(dir: string): { config: RaceConfig['backend']; store: CheckpointStore }
}

const backends: Backend[] = [
  {
    name: 'sqlite',
    skip: undefined,
    open: (dir) => ({ config: { kind: 'sqlite', path: join(dir, 'cairn.db') }, store: new SqliteStore({ path: join(dir, 'cairn.db') }) }),
  },
  {
    name: 'postgres',
    skip: target.skipChildProcesses,
    open: () => {
      const schema = target.freshSchema()
      return { config: { kind: 'postgres', connectionString: target.connectionString!, schema }, store: target.openStore(schema) }
    },
  },
]

async function setup(backend: Backend) {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-race-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  const { config, store } = backend.open(dir)
  cleanups.push(() => store.close())
  return { dir, store, base: { backend: config, runId: 'raced', effectsFile: join(dir, 'effects.log') } }
}

const STATES: { state: RaceState; sends: number; terminals: number; final: string }[] = [
  { state: 'model_checkpointed', sends: 1, terminals: 1, final: 'completed' },
  { state: 'intent_journaled', sends: 1, terminals: 1, final: 'completed' },
  { state: 'effect_started', sends: 1, terminals: 0, final: 'paused' },
  { state: 'paused_for_human', sends: 1, terminals: 1, final: 'completed' },
]

for (const backend of backends) {
  describe.skipIf(backend.skip !== undefined)(`one owner per run on ${backend.name}: racing resumes in separate processes`, { timeout: 60_000 }, () => {
    // Every state with two racers, one state with five; the full matrix, many times over, is in
    // `npm run torture`.
    const cases = STATES.flatMap((entry, i) => (i !== 1 ? [{ ...entry, racers: 2 }] : [])).concat({ ...STATES[1]!, racers: 5 })
    for (const { state, sends, terminals, final, racers } of cases) {
      {
        it(`${racers} processes resuming a run left at ${state} execute it once: the email is sent ${sends === 1 ? 'once' : 'never again'}`, async () => {
          const { dir, store, base } = await setup(backend)
          await prepare(base, state)
          const outcomes = await race({ ...base, role: 'resume', state }, racers, dir)
          const result = await report(store, 'raced', base.effectsFile, outcomes)
          expect(result.sends).toBe(sends)
          expect(result.terminals).toBe(terminals)
          for (const outcome of outcomes) {
            if (state === 'paused_for_human' && answeredAfterWinner(outcome)) continue
            if (outcome.error) expect(outcome.error.code).toBe('run_busy')
            else expect(outcome.state).toBe(final)
          }
          // The winner did the work; a racer that came after it got the stored result (or the same pause).
          expect(outcomes.filter((o) => !o.error).length).toBeGreaterThanOrEqual(1)
          expect(outcomes.filter((o) => o.error?.code === 'run_busy').every((o) => /is being executed by process \d+ on /.test(o.error!.message))).toBe(true)
        })
      }
    }

    it('5 processes starting runner.run with one new run id at once: one executes it, the others are refused', async () => {
      const { dir, store, base } = await setup(backend)
      const outcomes = await race({ ...base, role: 'run' }, 5, dir)
      const result = await report(store, 'raced', base.effectsFile, outcomes)
      expect(result.sends).toBe(1)
      expect(result.terminals).toBe(1)
      expect(outcomes.filter((o) => o.state === 'completed')).toHaveLength(1)
      for (const outcome of outcomes.filter((o) => o.error)) expect(['run_busy', 'run_exists']).toContain(outcome.error!.code)
    })

    it('a SIGSTOPped owner is taken over once its lease lapses, and its writes are rejected when it wakes', async () => {
      const { store, base } = await setup(backend)
      const zombie = runChildStopped({ ...base, role: 'zombie', leaseMs: 1500 })
      const pid = await zombie.stopped
      // The zombie's process exists (stopped), so the taker waits for its lease to lapse.
      const taker = await runChild({ ...base, role: 'resume', wait: true, leaseMs: 1500 })
      expect(taker.outcome).toMatchObject({ state: 'completed' })
      const terminalsBefore = await report(store, 'raced', base.effectsFile, [])
      process.kill(pid, 'SIGCONT')
      const woke = await zombie.done
      expect(woke.outcome?.error?.code).toBe('lease_lost')
      const after = await report(store, 'raced', base.effectsFile, [])
      expect(after.terminals).toBe(1)
      expect(after.sends).toBe(1)
      expect(terminalsBefore.terminals).toBe(1)
      expect((await store.getRun('raced'))?.status).toBe('completed')
    })
  })
}

describe('the file store is single-process: racing resumes in separate processes', { timeout: 60_000 }, () => {
  it('5 processes resuming a run a SIGKILLed process left: one executes it, the others are refused with RunBusyError naming the file store', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-race-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    const base = { backend: { kind: 'file' as const, directory: join(dir, 'store') }, runId: 'raced', effectsFile: join(dir, 'effects.log') }
    // The SIGKILLed process left its lock on the directory: a process of this machine that is gone,
    // whose lock the racers find at once (only one of them may replace it).
    await prepare(base, 'intent_journaled')
    const outcomes = await race({ ...base, role: 'resume', state: 'intent_journaled' }, 5, dir)
    const store = new FileStore({ directory: base.backend.directory })
    cleanups.push(() => store.close())
    const result = await report(store, 'raced', base.effectsFile, outcomes)
    expect(result.sends).toBe(1)
    expect(result.terminals).toBe(1)
    expect(result.executed).toBe(1)
    const refused = outcomes.filter((o) => o.error)
    for (const outcome of refused) expect(outcome.error).toMatchObject({ code: 'run_busy', name: 'RunBusyError' })
    // A racer that came after the winner closed the store got the stored result.
    expect(refused.length + outcomes.filter((o) => o.fromTerminalCheckpoint === true).length).toBe(4)
    expect(refused.some((o) => /the file store in .* is in use by process \d+ on .*use SqliteStore or PostgresStore/.test(o.error!.message))).toBe(true)
    // Once the winner closed the store, another process may use it: it gets the stored result.
    const later = await runChild({ ...base, role: 'resume' })
    expect(later.outcome).toMatchObject({ state: 'completed', fromTerminalCheckpoint: true })
  })
})

describe('one owner per run on the file store (one process, many executions)', { timeout: 60_000 }, () => {
  it('5 runners resuming one run at once in one process: one executes it, the others get RunBusyError', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-race-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    const base = { backend: { kind: 'file' as const, directory: join(dir, 'store') }, runId: 'raced', effectsFile: join(dir, 'effects.log') }
    await prepare(base, 'intent_journaled')
    const { raceAgentInProcess } = await import('./fixtures/race-agent.js')
    const stores = Array.from({ length: 5 }, () => new FileStore({ directory: base.backend.directory }))
    cleanups.push(() => Promise.all(stores.map((s) => s.close())))
    const settled = await Promise.allSettled(stores.map((store) => new Runner({ store, durability: 'sync' }).resume(raceAgentInProcess(base.effectsFile), { runId: 'raced' })))
    const completed = settled.filter((s) => s.status === 'fulfilled')
    expect(completed).toHaveLength(1)
    for (const s of settled) if (s.status === 'rejected') expect(s.reason).toMatchObject({ code: 'run_busy' })
    const sends = (await readFile(base.effectsFile, 'utf8')).split('\n').filter((l) => l.startsWith('send ')).length
    expect(sends).toBe(1)
  })
})

/** Start the zombie; `stopped` resolves with its pid once it SIGSTOPped itself inside the tool. */
function runChildStopped(config: RaceConfig): { stopped: Promise<number>; done: ReturnType<typeof runChild> } {
  const done = runChild(config)
  const stopped = (async () => {
    for (;;) {
      const text = await readFile(config.effectsFile, 'utf8').catch(() => '')
      const match = /stopping (\d+)/.exec(text)
      if (match) return Number(match[1])
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  })()
  return { stopped, done }
}
