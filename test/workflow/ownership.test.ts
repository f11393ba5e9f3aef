import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Executor, LeaseLostError, MemoryStore, RunBusyError, WorkflowBuilder, type WorkflowContext, type WorkflowStore } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'

// A workflow run with a store that has leases owns its run while it executes, like a Runner:
// another execution of the same run (here another instance with its own store object on the
// same SQLite file) fails with RunBusyError, or waits; an execution that lost the run writes nothing.

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

interface Gate {
  entered: Promise<void>
  open(): void
}

function gate(): Gate & { enter: () => Promise<void> } {
  let entered!: () => void
  let open!: () => void
  const enteredP = new Promise<void>((resolve) => (entered = resolve))
  const opened = new Promise<void>((resolve) => (open = resolve))
  return {
    entered: enteredP,
    open,
    enter: async () => {
      entered()
      await opened
    },
  }
}

class Start extends Executor<string> {
  async handle(input: string, ctx: WorkflowContext<string>): Promise<void> {
    await ctx.sendMessage(input)
  }
}

/** Records each execution of its step in `log`, then waits at `wait` when given. */
class Send extends Executor<string> {
  constructor(
    readonly log: string[],
    readonly label: string,
    readonly wait?: () => Promise<void>,
  ) {
    super('send')
  }

  async handle(input: string, ctx: WorkflowContext<never, string>): Promise<void> {
    this.log.push(`${this.label}:send`)
    await this.wait?.()
    await ctx.yieldOutput(`sent ${input}`)
  }
}

function build(store: WorkflowStore, send: Send) {
  const start = new Start('start')
  return new WorkflowBuilder({ name: 'owned', startExecutor: start, store }).addEdge(start, send).build()
}

async function twoStores() {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-wf-own-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  const a = new SqliteStore({ path: join(dir, 'cairn.db') })
  const b = new SqliteStore({ path: join(dir, 'cairn.db') })
  cleanups.push(() => a.close(), () => b.close())
  return { a, b }
}

/** Instance A runs the workflow and holds the run inside its `send` step; returns the checkpoint before it. */
async function ownerHoldingTheRun(store: SqliteStore, log: string[]) {
  const held = gate()
  const running = build(store, new Send(log, 'A', held.enter)).run({ message: 'hello' })
  await held.entered
  const before = (await store.getLatest({ workflowName: 'owned' }))!
  return { held, running, before }
}

describe('a workflow run owns its run', () => {
  it('a second instance resuming a run that a live execution owns gets RunBusyError naming that process; the owner completes and gives the run back', async () => {
    const { a, b } = await twoStores()
    const log: string[] = []
    const { held, running, before } = await ownerHoldingTheRun(a, log)
    const error = await build(b, new Send(log, 'B')).run({ checkpointId: before.id }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RunBusyError)
    expect(error).toMatchObject({ code: 'run_busy', runId: before.runId, pid: process.pid })
    expect((error as Error).message).toContain(`run ${before.runId} is being executed by process ${process.pid} on `)
    held.open()
    const result = await running
    expect(result.getOutputs()).toEqual(['sent hello'])
    expect(log).toEqual(['A:send'])
    expect((await b.getRun(before.runId))?.status).toBe('completed')
    expect((await b.leases!.getLease(before.runId))?.owner).toBeNull()
  })

  it('with waitForOwner: true the second execution starts only once the owner released the run', async () => {
    const { a, b } = await twoStores()
    const log: string[] = []
    const { held, running, before } = await ownerHoldingTheRun(a, log)
    const done = running.then(() => log.push('A:done'))
    const waiting = build(b, new Send(log, 'B')).run({ checkpointId: before.id, waitForOwner: true })
    held.open()
    const [, second] = await Promise.all([done, waiting])
    expect(second.getOutputs()).toEqual(['sent hello'])
    expect(log).toEqual(['A:send', 'A:done', 'B:send'])
  })

  it('with waitForOwner: { timeoutMs } the second execution gives up with RunBusyError while the owner holds the run', async () => {
    const { a, b } = await twoStores()
    const log: string[] = []
    const { held, running, before } = await ownerHoldingTheRun(a, log)
    const error = await build(b, new Send(log, 'B')).run({ checkpointId: before.id, waitForOwner: { timeoutMs: 100 } }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RunBusyError)
    held.open()
    await running
    expect(log).toEqual(['A:send'])
  })

  it('an execution whose run was taken over (a zombie) has its checkpoint and status writes rejected with LeaseLostError', async () => {
    const { a, b } = await twoStores()
    const log: string[] = []
    const { held, running, before } = await ownerHoldingTheRun(a, log)
    const lease = (await b.leases!.getLease(before.runId))!
    const taken = await b.leases!.acquire({ runId: before.runId, owner: 'elsewhere:1:ab', leaseMs: 60_000, takeFrom: { owner: lease.owner!, epoch: lease.epoch } })
    expect(taken.outcome).toBe('acquired')
    held.open()
    const error = await running.catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LeaseLostError)
    expect(error).toMatchObject({ code: 'lease_lost', runId: before.runId, epoch: lease.epoch })
    // Nothing the zombie did after the takeover reached the store.
    const checkpoints = await b.listCheckpoints({ runId: before.runId })
    expect(checkpoints.map((c) => c.id)).toContain(before.id)
    expect(checkpoints[0]!.id).toBe(before.id)
    expect((await b.getRun(before.runId))?.status).toBe('running')
    expect((await b.leases!.getLease(before.runId))).toMatchObject({ owner: 'elsewhere:1:ab', epoch: lease.epoch + 1 })
  })

  it('a store without leases runs the workflow as before, taking no lease', async () => {
    const memory = new MemoryStore()
    const plain: WorkflowStore = {
      load: memory.load.bind(memory),
      listCheckpoints: memory.listCheckpoints.bind(memory),
      getLatest: memory.getLatest.bind(memory),
      save: memory.save.bind(memory),
    }
    const log: string[] = []
    const result = await build(plain, new Send(log, 'A')).run({ message: 'hello' })
    expect(result.getOutputs()).toEqual(['sent hello'])
    expect(await memory.listCheckpoints({ runId: result.runId })).toHaveLength(3)
    expect((await memory.leases!.getLease(result.runId))?.owner).toBeNull()
  })
})
