import { spawn } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import type { CheckpointStore } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { postgresTarget } from '../fixtures/postgres-target.js'
import { openBarrier } from '../support/barrier.js'
import type { WorkflowRaceConfig, WorkflowRaceOutcome } from './fixtures/race-child.js'

// A workflow run left by a SIGKILLed process, resumed from its checkpoint by two — and five —
// fresh processes released at the same instant by a socket barrier. One owner per run: exactly
// one of them executes it, the others get RunBusyError, and the non-idempotent step runs once.

const CHILD = ['--import', 'tsx', fileURLToPath(new URL('./fixtures/race-child.ts', import.meta.url))]

const target = await postgresTarget()
afterAll(() => target.close())

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

interface Backend {
  name: string
  skip: string | undefined
  open(dir: string): { config: WorkflowRaceConfig['backend']; store: CheckpointStore }
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

interface Child {
  exited: Promise<{ outcome: WorkflowRaceOutcome | undefined; signal: NodeJS.Signals | null }>
}

function startChild(config: WorkflowRaceConfig): Child {
  const child = spawn(process.execPath, [...CHILD, JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<{ outcome: WorkflowRaceOutcome | undefined; signal: NodeJS.Signals | null }>((resolve, reject) =>
    child.on('exit', (_code, signal) => {
      const line = stdout.trim().split('\n').filter(Boolean).at(-1)
      if (!line && signal !== 'SIGKILL') reject(new Error(`workflow race process ${config.role} printed nothing; stderr:\n${stderr}`))
      else resolve({ outcome: line ? (JSON.parse(line) as WorkflowRaceOutcome) : undefined, signal })
    }),
  )
  return { exited }
}

/**
 * Start `count` racers, release them together once all are at the barrier; when every racer but
 * one has ended, let the last one (the owner, holding the run inside its step) finish.
 */
async function race(base: Omit<WorkflowRaceConfig, 'barrier' | 'releaseFile' | 'role'>, count: number, dir: string): Promise<WorkflowRaceOutcome[]> {
  const releaseFile = join(dir, `release-${Math.random().toString(36).slice(2)}`)
  const barrier = await openBarrier(dir, count)
  try {
    const children = Array.from({ length: count }, () => startChild({ ...base, role: 'resume', barrier: barrier.path, releaseFile }).exited)
    await Promise.race([barrier.ready, Promise.all(children).then(() => undefined)])
    barrier.release()
    let ended = 0
    const done = children.map((child) =>
      child.then(async (result) => {
        if (++ended === count - 1) await writeFile(releaseFile, '')
        return result
      }),
    )
    // Should two racers both run the step (no owner), neither would ever end: release them then,
    // so the test fails on its assertions.
    const all = Promise.all(done)
    const watching = watchForSecondSend(base.effectsFile, releaseFile, all)
    const results = await all
    await watching
    return results.map(({ outcome }, i) => outcome ?? { pid: -i, error: { code: 'died', name: 'Died', message: 'the racer died' } })
  } finally {
    barrier.close()
  }
}

async function watchForSecondSend(effectsFile: string, releaseFile: string, until: Promise<unknown>): Promise<void> {
  let over = false
  void until.then(
    () => (over = true),
    () => (over = true),
  )
  while (!over) {
    const sends = (await readFile(effectsFile, 'utf8').catch(() => '')).split('\n').filter((line) => line.startsWith('send '))
    if (sends.length > 1) {
      await writeFile(releaseFile, '')
      return
    }
    await sleep(50)
  }
}

for (const backend of backends) {
  describe.skipIf(backend.skip !== undefined)(`one owner per workflow run on ${backend.name}: racing resumes in separate processes`, { timeout: 60_000 }, () => {
    for (const racers of [2, 5]) {
      it(`${racers} processes resuming a workflow run left by a SIGKILLed process execute it once: the non-idempotent step runs once, the others get RunBusyError`, async () => {
        const dir = await mkdtemp(join(tmpdir(), 'cairn-wf-race-'))
        cleanups.push(() => rm(dir, { recursive: true, force: true }))
        const { config, store } = backend.open(dir)
        cleanups.push(() => store.close())
        const effectsFile = join(dir, 'effects.log')

        const prepared = await startChild({ role: 'prepare', backend: config, effectsFile }).exited
        expect(prepared.signal).toBe('SIGKILL')
        const left = await store.getLatest({ workflowName: 'raced' })
        expect(left?.phase).toBe('superstep')
        const runId = left!.runId
        // The dead process still holds the lease: the racers must take it over.
        expect((await store.leases!.getLease(runId))?.owner).toMatch(/:\d+:/)

        const outcomes = await race({ backend: config, effectsFile, checkpointId: left!.id }, racers, dir)

        const sends = (await readFile(effectsFile, 'utf8').catch(() => '')).split('\n').filter((line) => line.startsWith('send '))
        expect(sends).toHaveLength(1)
        const completed = outcomes.filter((o) => o.error === undefined)
        expect(completed).toHaveLength(1)
        expect(completed[0]).toMatchObject({ runId, outputs: ['sent hello'] })
        expect(sends[0]).toBe(`send ${completed[0]!.pid}`)
        const busy = outcomes.filter((o) => o.error !== undefined)
        expect(busy).toHaveLength(racers - 1)
        for (const outcome of busy) {
          expect(outcome.error).toMatchObject({ code: 'run_busy', name: 'RunBusyError' })
          expect(outcome.error!.message).toMatch(new RegExp(`run ${runId} is being executed by process ${completed[0]!.pid} on `))
        }
        // The winner finished the run and gave it back.
        expect((await store.getRun(runId))?.status).toBe('completed')
        expect((await store.leases!.getLease(runId))?.owner).toBeNull()
      })
    }
  })
}
