/**
 * The ownership races of the torture run: a run left by a SIGKILLed process in each interesting
 * state (model response checkpointed, intent journaled, effect started, paused for a human) is
 * resumed by two and by five fresh processes released at the same instant by a socket barrier;
 * five processes start `runner.run` under one new run id at once; a SIGSTOPped owner wakes after
 * another process took its run over. Each case is repeated `repeats` times on SQLite, on a file
 * store (single-process: a racer is refused while another process holds the directory, so the
 * zombie case does not apply) and, when a server answers, Postgres. Duplicate executions (an email sent twice, two terminal checkpoints,
 * two processes that both executed the run) must be zero.
 */
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { POSTGRES_URL, postgresAnswers } from './postgres.js'
import { FileStore, type CheckpointStore } from '../src/index.js'
import { PostgresStore } from '../src/postgres.js'
import { SqliteStore } from '../src/sqlite.js'
import { answeredAfterWinner, prepare, race, report, runChild, type RaceConfig, type RaceState } from '../test/runner/fixtures/race.js'

/** The totals of the race phase. */
export interface RaceTally {
  /** Races played (each: one run, 2 or 5 racing processes, or a zombie and its taker). */
  races: number
  racingProcesses: number
  /** Racers refused with RunBusyError or run_exists, or that answered a run another racer had answered and finished. */
  busy: number
  /** Extra executions of the non-idempotent tool beyond what the case allows. */
  duplicateExecutions: number
  /** Runs with more than one `run_terminal` checkpoint. */
  duplicateTerminals: number
  /** Races in which more than one process executed the run. */
  doubleOwners: number
  /** Zombies whose writes were not rejected once they woke. */
  zombieWrites: number
  failures: { race: string; problem: string }[]
  byBackend: Record<string, number>
}

interface Backend {
  name: string
  /** Whether a SIGSTOPped owner can be taken over (not on a single-process file store). */
  zombies: boolean
  config: () => RaceConfig['backend']
  open: (config: RaceConfig['backend']) => CheckpointStore
}

const STATES: RaceState[] = ['model_checkpointed', 'intent_journaled', 'effect_started', 'paused_for_human']

/** Which races to play. */
export interface RaceOptions {
  repeats: number
  lanes: number
  log?: (line: string) => void
  /** Only the backends of these names (`sqlite`, `file`, `postgres`); default every one available. */
  backends?: readonly string[]
  /** Only the cases whose name starts with one of these (`zombie`, `run x5`, `effect_started`, …); default every case. */
  cases?: readonly string[]
}

/** Play every race case `repeats` times on every backend that is available; `lanes` races at once. */
export async function runRaces(options: RaceOptions): Promise<RaceTally> {
  const tally: RaceTally = { races: 0, racingProcesses: 0, busy: 0, duplicateExecutions: 0, duplicateTerminals: 0, doubleOwners: 0, zombieWrites: 0, failures: [], byBackend: {} }
  const root = await mkdtemp(join(tmpdir(), 'cairn-races-'))
  const available = [sqliteBackend(root), fileBackend(root), ...((await postgresAnswers()) ? [postgresBackend()] : [])]
  const backends = available.filter((backend) => options.backends === undefined || options.backends.includes(backend.name))
  const cases: { backend: Backend; name: string; play: (dir: string, backend: Backend) => Promise<void> }[] = []
  for (const backend of backends) {
    for (let i = 0; i < options.repeats; i++) {
      for (const state of STATES) for (const racers of [2, 5]) cases.push({ backend, name: `${state} x${racers}`, play: (dir, b) => resumeRace(tally, dir, b, state, racers) })
      cases.push({ backend, name: 'run x5', play: (dir, b) => runRace(tally, dir, b) })
      if (backend.zombies) cases.push({ backend, name: 'zombie', play: (dir, b) => zombieRace(tally, dir, b) })
    }
  }
  const chosen = cases.filter((item) => options.cases === undefined || options.cases.some((name) => item.name.startsWith(name)))
  let next = 0
  const lane = async () => {
    for (let index = next++; index < chosen.length; index = next++) {
      const item = chosen[index]!
      const dir = await mkdtemp(join(root, 'race-'))
      try {
        await item.play(dir, item.backend)
      } catch (err) {
        tally.failures.push({ race: `${item.backend.name} ${item.name}`, problem: (err as Error).message })
      } finally {
        tally.races++
        tally.byBackend[item.backend.name] = (tally.byBackend[item.backend.name] ?? 0) + 1
        await rm(dir, { recursive: true, force: true })
      }
      if (tally.races % 20 === 0) options.log?.(`  races: ${tally.races}/${chosen.length}, duplicate executions so far: ${tally.duplicateExecutions}, failures: ${tally.failures.length}`)
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, options.lanes) }, lane))
  await rm(root, { recursive: true, force: true })
  return tally
}

/** The totals as the torture run prints them. */
export function formatRaceTally(tally: RaceTally): string {
  const backends = Object.entries(tally.byBackend).map(([name, n]) => `${name} ${n}`).join(', ')
  return [
    `ownership races: ${tally.races} (${backends}), ${tally.racingProcesses} racing processes, ${tally.busy} refused as busy`,
    `  duplicate executions: ${tally.duplicateExecutions}, duplicate terminal checkpoints: ${tally.duplicateTerminals}, runs executed by two owners: ${tally.doubleOwners}, zombie writes accepted: ${tally.zombieWrites}`,
    ...tally.failures.slice(0, 20).map((f) => `  FAILED ${f.race}: ${f.problem}`),
  ].join('\n')
}

async function resumeRace(tally: RaceTally, dir: string, backend: Backend, state: RaceState, racers: number): Promise<void> {
  const base = { backend: backend.config(), runId: 'raced', effectsFile: join(dir, 'effects.log') }
  await prepare(base, state)
  const outcomes = await race({ ...base, role: 'resume', state }, racers, dir)
  await settle(tally, base, backend, outcomes, { sends: 1, terminals: state === 'effect_started' ? 0 : 1, answered: state === 'paused_for_human' })
}

async function runRace(tally: RaceTally, dir: string, backend: Backend): Promise<void> {
  const base = { backend: backend.config(), runId: 'raced', effectsFile: join(dir, 'effects.log') }
  const outcomes = await race({ ...base, role: 'run' }, 5, dir)
  await settle(tally, base, backend, outcomes, { sends: 1, terminals: 1 })
}

async function settle(
  tally: RaceTally,
  base: Omit<RaceConfig, 'role'>,
  backend: Backend,
  outcomes: Awaited<ReturnType<typeof race>>,
  expected: { sends: number; terminals: number; answered?: boolean },
): Promise<void> {
  const store = backend.open(base.backend)
  try {
    const result = await report(store, base.runId, base.effectsFile, outcomes)
    tally.racingProcesses += outcomes.length
    const refused = (o: (typeof outcomes)[number]) => o.error?.code === 'run_busy' || o.error?.code === 'run_exists' || (expected.answered === true && answeredAfterWinner(o))
    tally.busy += outcomes.filter(refused).length
    tally.duplicateExecutions += Math.max(0, result.sends - expected.sends)
    tally.duplicateTerminals += Math.max(0, result.terminals - 1)
    if (outcomes.filter((o) => o.error === undefined && o.fromTerminalCheckpoint !== true && o.state === 'completed').length > 1) tally.doubleOwners++
    const other = outcomes.find((o) => o.error && !refused(o))
    if (other) throw new Error(`a racer failed: ${other.error!.code ?? other.error!.name}: ${other.error!.message}`)
    if (result.sends !== expected.sends || result.terminals !== expected.terminals) {
      const got = outcomes.map((o) => o.error?.code ?? `${o.state}${o.fromTerminalCheckpoint === true ? ' (stored result)' : ''}`)
      throw new Error(`expected ${expected.sends} send(s) and ${expected.terminals} terminal checkpoint(s), found ${result.sends} and ${result.terminals}; racers: ${got.join(', ')}`)
    }
  } finally {
    await store.close()
  }
}

async function zombieRace(tally: RaceTally, dir: string, backend: Backend): Promise<void> {
  const base = { backend: backend.config(), runId: 'raced', effectsFile: join(dir, 'effects.log') }
  const zombie = runChild({ ...base, role: 'zombie', leaseMs: 1500 })
  // The zombie stops itself inside its tool; one that ends before it gets there is a failure, not a wait without end.
  const ended = zombie.then(
    (exit) => exit,
    (err: unknown) => ({ outcome: undefined, signal: null, pid: 0, error: err as Error }),
  )
  const pid = await Promise.race([stoppedPid(base.effectsFile), ended.then(() => undefined)])
  if (pid === undefined) {
    const exit = await ended
    const what = 'error' in exit ? exit.error.message : JSON.stringify(exit.outcome)
    throw new Error(`the zombie ended before it stopped in its tool: ${what}`)
  }
  const taker = await runChild({ ...base, role: 'resume', wait: true, leaseMs: 1500 })
  process.kill(pid, 'SIGCONT')
  const woke = await zombie
  tally.racingProcesses += 2
  if (woke.outcome?.error?.code !== 'lease_lost') tally.zombieWrites++
  await settle(tally, base, backend, [taker.outcome ?? { pid: taker.pid, error: { code: 'died', name: 'Died', message: 'the taker died' } }], { sends: 1, terminals: 1 })
}

async function stoppedPid(effectsFile: string): Promise<number> {
  const { readFile } = await import('node:fs/promises')
  // Bounded: a zombie starts and reaches its tool in seconds, even on a loaded machine.
  for (const deadline = Date.now() + 120_000; Date.now() < deadline; ) {
    const match = /stopping (\d+)/.exec(await readFile(effectsFile, 'utf8').catch(() => ''))
    if (match) return Number(match[1])
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  throw new Error(`the zombie did not stop in its tool within 120 s (${effectsFile})`)
}

function sqliteBackend(root: string): Backend {
  let n = 0
  return {
    name: 'sqlite',
    zombies: true,
    config: () => ({ kind: 'sqlite', path: join(root, `race-${process.pid}-${n++}.db`) }),
    open: (config) => new SqliteStore({ path: (config as { path: string }).path }),
  }
}

function fileBackend(root: string): Backend {
  let n = 0
  return {
    name: 'file',
    zombies: false,
    config: () => ({ kind: 'file', directory: join(root, `race-${process.pid}-${n++}`) }),
    open: (config) => new FileStore({ directory: (config as { directory: string }).directory }),
  }
}

function postgresBackend(): Backend {
  let n = 0
  const tag = randomBytes(4).toString('hex')
  return {
    name: 'postgres',
    zombies: true,
    // Random as well as numbered: harnesses of other machines or containers (pids repeat across them)
    // share the server, and a schema a killed run left behind must not be found by a new race.
    config: () => ({ kind: 'postgres', connectionString: POSTGRES_URL, schema: `cairn_race_${process.pid}_${tag}_${n++}` }),
    open: (config) => {
      const { connectionString, schema } = config as { connectionString: string; schema: string }
      const store = new PostgresStore({ connectionString, schema })
      const close = store.close.bind(store)
      // The race's schema goes with it.
      store.close = async () => {
        await close()
        const client = new pg.Client({ connectionString })
        await client.connect()
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => client.end())
      }
      return store
    },
  }
}

