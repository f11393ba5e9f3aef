import pg from 'pg'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { Agent, CairnClient, MemoryStore, tool, Worker, type WorkerEvent } from '../../src/index.js'
import { RUNNER_KIND } from '../../src/runner/phases.js'
import { ScriptedModel } from '../../src/testing.js'
import { FailStopStore } from '../../src/worker/fail-stop-store.js'
import { postgresTarget } from '../fixtures/postgres-target.js'
import { gate, until, type Gate } from '../support/wait.js'

/**
 * A store that is briefly unavailable under a running worker: one of its connections is cut by
 * the server (`pg_terminate_backend`) in the middle of a write, and the next connection works.
 * The run must be handed back and resumed, not recorded as `failed`. The failure is made
 * deterministic by holding the run's row lock from another connection, so the worker's write is
 * known to be waiting on the server when its connection is cut. (The last test, on a memory
 * store, covers a store failure no call reports: a flush that timed out.)
 */
const target = await postgresTarget()
afterAll(() => target.close())
const skipReason = target.kind === 'pglite' ? 'PGlite is one in-process connection: there is no connection of the worker to cut' : undefined
if (skipReason) console.info(`skipped: transient store failure tests (${skipReason})`)

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})



/** An agent whose one tool call is a non-idempotent side effect (journaled with a write of its own after it runs). */
function senderAgent(sends: { count: number }, toolGate: Gate): Agent {
  const model = new ScriptedModel([[{ toolUse: { toolUseId: 'send-1', name: 'send', input: { to: 'ops' } } }], [{ text: 'sent' }]], { select: 'conversation' })
  const send = tool({
    name: 'send',
    description: 'Send a message (not idempotent).',
    inputSchema: { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] },
    callback: async () => {
      await toolGate.wait()
      sends.count++
      return 'message sent'
    },
  })
  return new Agent({ name: 'sender', model, tools: [send] })
}

/**
 * A worker (maxRecoveryAttempts as given) with a run of the sender agent whose tool has started;
 * `cutNextWrite()` lets the tool finish and cuts the connection of the write that records its
 * outcome, the way a server restart or a network blip would.
 */
async function runCutShort(options: { maxRecoveryAttempts: number }) {
  const schema = target.freshSchema()
  const open = () => {
    const store = target.openStore(schema, { onWarning: () => {} })
    cleanups.push(() => store.close())
    return store
  }
  const client = new CairnClient({ store: open() })
  const sends = { count: 0 }
  const toolGate = gate()
  const events: WorkerEvent[] = []
  const worker = new Worker({
    store: open(),
    agents: { send: () => senderAgent(sends, toolGate) },
    pollMs: 20,
    maxRecoveryAttempts: options.maxRecoveryAttempts,
    id: 'w1',
    onEvent: (event) => events.push(event),
  })
  cleanups.push(() => worker.stop({ timeoutMs: 0 }))
  await worker.start()
  await client.enqueue('send', { input: 'tell ops', runId: 'r1' })
  await until(async () => (toolGate.reached() ? true : undefined), 'the tool call to start')

  const cutNextWrite = async () => {
    // Another session locks the run's row, so the write that records the tool's outcome waits on the server.
    const blocker = new pg.Client({ connectionString: target.connectionString! })
    blocker.on('error', () => {})
    await blocker.connect()
    cleanups.push(() => blocker.end().catch(() => undefined))
    await blocker.query('BEGIN')
    await blocker.query(`SELECT 1 FROM "${schema}".runs WHERE run_id = 'r1' FOR UPDATE`)
    toolGate.open()
    const waiting = `SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%"${schema}".runs%FOR UPDATE%'`
    const pid = await until(async () => (await target.sql(waiting))[0]?.pid, "the worker's write to wait for the row lock")
    // The connection drops for a moment: the server cuts the worker's connection (and the test
    // waits until it is gone); the next connection works.
    expect(await target.sql('SELECT pg_terminate_backend($1, 10000) AS gone', [pid])).toEqual([{ gone: true }])
    await blocker.query('ROLLBACK')
  }
  return { client, events, sends, cutNextWrite }
}

const released = (events: WorkerEvent[]) => events.flatMap((e) => (e.type === 'released' ? [[e.reason, e.status]] : []))
/** Wait until the worker has reported `count` releases (the last one lands just after the status it writes). */
const handedBack = (events: WorkerEvent[], count: number) =>
  until(async () => (released(events).length >= count ? true : undefined), `${count} releases of the run`)
const claims = (events: WorkerEvent[]) => events.flatMap((e) => (e.type === 'claimed' ? [[e.epoch, e.recoveries]] : []))

describe.skipIf(skipReason !== undefined)('a store failure under a running worker', () => {
  it('a connection cut in the middle of a write hands the run back instead of failing it, and the run is resumed', async () => {
    const { client, events, sends, cutNextWrite } = await runCutShort({ maxRecoveryAttempts: 3 })
    await cutNextWrite()

    // The tool ran but its outcome was never recorded; it is not idempotent, so the resumed run asks a human.
    const outcome = await client.result('r1', { timeoutMs: 20_000, pollMs: 20 })
    expect(outcome, JSON.stringify(outcome.error)).toMatchObject({ status: 'paused', interrupts: [{ id: 'send-1:effect_outcome_unknown' }] })
    // The runner writes `paused` just before its worker hands the run back.
    await handedBack(events, 2)
    expect(released(events)).toEqual([
      ['failed_attempt', undefined],
      ['finished', 'paused'],
    ])
    expect(claims(events)).toEqual([
      [1, 0],
      [2, 1],
    ])
    expect((await client.store.getRun('r1'))?.metadata.cairn).toMatchObject({ lastError: { code: 'store_failure' } })
    expect(await client.store.listCheckpoints({ runId: 'r1' })).not.toContainEqual(expect.objectContaining({ phase: 'run_terminal' }))

    await client.respond('r1', { 'send-1:effect_outcome_unknown': 'retry' })
    const done = await client.result('r1', { timeoutMs: 20_000, pollMs: 20 })
    expect(done).toMatchObject({ status: 'completed' })
    expect(done.result?.result?.toString()).toBe('sent')
    expect(sends.count).toBe(2)
  }, 60_000)

  it('a run cut short by the store more than maxRecoveryAttempts times is failed by the worker, naming the store failure', async () => {
    const { client, events, cutNextWrite } = await runCutShort({ maxRecoveryAttempts: 0 })
    await cutNextWrite()

    const outcome = await client.result('r1', { timeoutMs: 20_000, pollMs: 20 })
    expect(outcome.status).toBe('failed')
    expect(outcome.error).toMatchObject({ name: 'RecoveryLimitError', code: 'max_recovery_attempts' })
    expect(outcome.error?.message).toContain('maxRecoveryAttempts (0)')
    expect(outcome.error?.message).toContain('terminating connection due to administrator command')
    await handedBack(events, 2)
    expect(released(events)).toEqual([
      ['failed_attempt', undefined],
      ['failed_by_worker', 'failed'],
    ])
    expect(claims(events)).toEqual([
      [1, 0],
      [2, 1],
    ])
    // The run was failed by the worker layer, not recorded as failed by the runner when the store failed.
    expect(outcome.result).toBeUndefined()
    expect(await client.store.listCheckpoints({ runId: 'r1' })).not.toContainEqual(expect.objectContaining({ phase: 'run_terminal' }))
  }, 60_000)
})

describe('the store a worker gives its runner', () => {
  // The runner records a flush that timed out (the database stalled; no call failed) as the run's
  // end; under a worker that record is refused, and the run is handed back instead.
  it('refuses a terminal checkpoint that records a store failure as the run’s end, and every write after it', async () => {
    const store = new MemoryStore()
    await store.leases!.enqueue({ runId: 'r1' })
    const [claimed] = await store.leases!.claim({ owner: 'w1', limit: 1, leaseMs: 60_000 })
    const execution = () => new FailStopStore(store.fenced(claimed!.fence))
    const view = execution()
    const terminal = (error: Record<string, string>) => ({ runId: 'r1', kind: RUNNER_KIND, phase: 'run_terminal', payload: { state: 'failed', error } })
    await view.save({ runId: 'r1', kind: RUNNER_KIND, phase: 'run_started', payload: {} })
    const stalled = { name: 'StoreError', code: 'store_failure', message: 'run r1: checkpoints could not be flushed within 10000 ms' }
    const refused = view.write({ runId: 'r1', checkpoints: [terminal(stalled)] })
    await expect(refused).rejects.toMatchObject({ code: 'store_failure' })
    await expect(refused).rejects.toThrow('the store failed under this execution (run r1: checkpoints could not be flushed within 10000 ms)')
    await expect(view.updateRun('r1', { status: 'failed' })).rejects.toMatchObject({ code: 'store_failure' })
    expect(view.failure?.message).toContain('could not be flushed')
    expect((await store.listCheckpoints({ runId: 'r1' })).map((c) => c.phase)).toEqual(['run_started'])
    expect(await store.getRun('r1')).toMatchObject({ status: 'queued' })

    // The agent's own failure, with the store healthy, is recorded.
    const healthy = execution()
    await healthy.write({ runId: 'r1', checkpoints: [terminal({ name: 'Error', message: 'the model endpoint is not configured' })] })
    await healthy.updateRun('r1', { status: 'failed' })
    expect(healthy.failure).toBeUndefined()
    expect(await store.getRun('r1')).toMatchObject({ status: 'failed' })
  })
})
