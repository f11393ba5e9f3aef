import { afterAll, describe, expect, it } from 'vitest'
import {
  Agent,
  CairnClient,
  CheckpointCorruptionError,
  CheckpointIntegrityError,
  Runner,
  tool,
  Worker,
  type ContentBlock,
  type EngineStoreOptions,
  type Message,
  type WorkerEvent,
} from '../../src/index.js'
import { EngineStore, MemoryEngine, type EffectRow, type StorageEngine } from '../../src/engine.js'
import { ScriptedModel } from '../../src/testing.js'
import { fileBackend, postgresBackend, removeTempDirs, sqliteBackend, type RawBackend } from './raw-rows.js'
import { crashedRun, KEY_A, scriptedAgent, waitUntil } from './scenario.js'

afterAll(removeTempDirs)

/**
 * Single-row rollbacks, each on every backend in every key mode: one row put back (or deleted)
 * the way someone with write access to the database or the directory would, with nothing of
 * Cairn between the test and the bytes. Each is refused before anything runs, with a typed error
 * naming the run; the non-idempotent tool of each scenario counts its real executions.
 */

/** One backend's rows, edited around the store. */
interface Attacked {
  open(options: EngineStoreOptions): EngineStore
  /** Put an effect row back to `pending` (its outcome cleared, as it was before it started). */
  resetEffect(runId: string, callId: string): Promise<void>
  deleteEffect(runId: string, callId: string): Promise<void>
  /** Every column of a run row as stored (signatures and lease columns too). */
  runRow(runId: string): Promise<Record<string, unknown>>
  /** Write a copy taken with `runRow` back over the row. */
  putRunRow(runId: string, row: Record<string, unknown>): Promise<void>
}

function fromRaw(raw: RawBackend): Attacked {
  return {
    open: (options) => raw.open(options),
    resetEffect: (runId, callId) => raw.updateEffect(runId, callId, { status: 'pending', output: null, outputHash: null }),
    deleteEffect: (runId, callId) => raw.deleteEffect(runId, callId),
    runRow: (runId) => raw.runColumns(runId),
    putRunRow: (runId, row) => raw.writeRunRow(runId, row),
  }
}

/**
 * A memory engine shared by every handle (closing a handle leaves it), edited through its own
 * methods, under the signing layer: what code in the same process could do behind the store.
 */
function memoryBackend(): Attacked {
  const engine = new MemoryEngine()
  const handle = new Proxy(engine, {
    get(target, property) {
      if (property === 'close') return async () => undefined
      const value = Reflect.get(target, property) as unknown
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
    },
  }) as StorageEngine
  // The engine deletes a run's whole journal; the attacker puts back every row but the one it drops.
  const putEffect = async (row: EffectRow) => engine.commit({ rows: [], appends: [], run: (await engine.getRun(row.runId))!, effects: { intents: [row] } })
  const dropEffect = async (runId: string, callId: string) => {
    const kept = (await engine.listEffects(runId)).filter((row) => row.callId !== callId)
    await engine.deleteEffects(runId)
    for (const row of kept) await putEffect(row)
  }
  return {
    open: (options) => new EngineStore(handle, options),
    resetEffect: async (runId, callId) => {
      const [row] = await engine.listEffects(runId, [callId])
      await dropEffect(runId, callId)
      await putEffect({ ...row!, status: 'pending', output: null, outputHash: null, completedAt: null })
    },
    deleteEffect: async (runId, callId) => dropEffect(runId, callId),
    runRow: async (runId) => ({ ...(await engine.getRun(runId))! }),
    putRunRow: async (runId, row) => {
      const { status, metadata, digest } = row as { status: 'queued'; metadata: string; digest: string }
      const current = (await engine.getRun(runId))!
      await engine.updateRun(runId, { status, metadata, updatedAt: Date.now(), swap: { ifDigest: current.digest ?? null, digest } })
    },
  }
}

const BACKENDS: readonly [string, () => Promise<Attacked>][] = [
  ['memory', async () => memoryBackend()],
  ['file', async () => fromRaw(await fileBackend())],
  ['sqlite', async () => fromRaw(await sqliteBackend())],
  ['postgres', async () => fromRaw(await postgresBackend())],
]

const MODES: readonly [string, EngineStoreOptions, typeof CheckpointCorruptionError][] = [
  ['unkeyed', {}, CheckpointCorruptionError],
  ['signed', { keys: [KEY_A] }, CheckpointIntegrityError],
  ['signed and encrypted', { keys: [KEY_A], encrypt: true }, CheckpointIntegrityError],
]

/** The error `promise` rejects with (undefined when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (err: unknown) => err,
  )
}

/**
 * An agent that charges a card (not idempotent), asks a human to confirm a second charge (an
 * interrupt), then charges again and answers. Each turn is decided from the conversation, so a
 * run resumed by another worker goes on where it stopped.
 */
function payAgent(charges: string[]): Agent {
  const turn = (request: { messages: Message[] }): ContentBlock[] => {
    const results = request.messages.flatMap((m) => m.content.filter((b) => 'toolResult' in b)).length
    if (results === 0) return [{ toolUse: { toolUseId: 'charge-1', name: 'charge', input: { cents: 4000 } } }]
    if (results === 1) return [{ toolUse: { toolUseId: 'confirm-1', name: 'confirm', input: { question: 'charge again?' } } }]
    if (results === 2) return [{ toolUse: { toolUseId: 'charge-2', name: 'charge', input: { cents: 4000 } } }]
    return [{ text: 'charged twice' }]
  }
  const charge = tool({
    name: 'charge',
    description: 'Charge the card (not idempotent).',
    inputSchema: { type: 'object', properties: { cents: { type: 'number' } }, required: ['cents'] },
    callback: (_input, ctx) => {
      charges.push(ctx.idempotencyKey)
      return 'charged'
    },
  })
  const confirm = tool({
    name: 'confirm',
    description: 'Ask a human.',
    inputSchema: { type: 'object', properties: { question: { type: 'string' } }, required: ['question'] },
    callback: (_input, ctx) => ctx.interrupt<string>({ name: 'approval', reason: 'charge again?' }),
  })
  const model = new ScriptedModel(Array.from({ length: 6 }, () => turn))
  return new Agent({ name: 'payer', model, tools: [charge, confirm] })
}

/** A worker on its own handle of the store, its events kept. */
async function startWorker(store: EngineStore, charges: string[]): Promise<{ worker: Worker; events: WorkerEvent[] }> {
  const events: WorkerEvent[] = []
  const worker = new Worker({ store, agents: { pay: () => payAgent(charges) }, pollMs: 20, leaseMs: 10_000, onEvent: (event) => events.push(event) })
  await worker.start()
  return { worker, events }
}

/** Wait until a worker has handed `runId` back `times` times. */
async function handedBack(events: readonly WorkerEvent[], runId: string, times: number): Promise<void> {
  await waitUntil(() => events.filter((event) => event.type === 'released' && event.runId === runId).length >= times)
}

/** A worker's run paused on its confirmation after the first charge; the worker stopped. */
async function pausedJob(attacked: Attacked, options: EngineStoreOptions, runId: string, charges: string[]): Promise<void> {
  const store = attacked.open(options)
  const { worker, events } = await startWorker(store, charges)
  const client = new CairnClient({ store })
  await client.enqueue('pay', { input: 'charge the card', runId })
  // Waited for by the worker's events, not by reading the run while the worker writes it.
  await handedBack(events, runId, 1)
  expect(await client.result(runId, { timeoutMs: 20_000 })).toMatchObject({ status: 'paused' })
  await worker.stop()
  await store.close()
  expect(charges).toHaveLength(1)
}

for (const [backendName, make] of BACKENDS) {
  for (const [mode, options, Expected] of MODES) {
    describe(`single-row rollbacks on a ${mode} ${backendName} store`, { timeout: 60_000 }, () => {
      /** Resume the crashed run: refused with the mode's error, before the model or any tool. */
      async function expectResumeRefused(attacked: Attacked, runId: string, world: Awaited<ReturnType<typeof crashedRun>>): Promise<Error> {
        const store = attacked.open(options)
        const fresh = scriptedAgent(world)
        try {
          const error = await rejection(new Runner({ store }).resume(fresh.agent, { runId }))
          expect(error).toBeInstanceOf(Expected)
          if (Expected === CheckpointCorruptionError) expect(error).not.toBeInstanceOf(CheckpointIntegrityError)
          expect(error).toMatchObject({ runId })
          expect(fresh.model.calls).toHaveLength(0)
          expect(world.count('note:')).toBe(1)
          return error as Error
        } finally {
          await store.close()
        }
      }

      async function crashed(attacked: Attacked, runId: string) {
        const store = attacked.open(options)
        const world = await crashedRun(store, runId)
        await store.close()
        return world
      }

      it('an untouched crashed run resumes without running its started note again (no false alarm)', async () => {
        const attacked = await make()
        const world = await crashed(attacked, 'intact')
        const store = attacked.open(options)
        const fresh = scriptedAgent(world)
        const resumed = await new Runner({ store }).resume(fresh.agent, { runId: 'intact' })
        expect(resumed.state).toBe('paused')
        expect(resumed.interrupts?.[0]?.name).toBe('effect_outcome_unknown')
        expect(world.count('note:')).toBe(1)
        await store.close()
      })

      it('an effect row put back from started to pending is refused on resume: the note ran once', async () => {
        const attacked = await make()
        const world = await crashed(attacked, 'reset')
        await attacked.resetEffect('reset', 'note-1')
        const error = await expectResumeRefused(attacked, 'reset', world)
        expect(error.message).toContain('run reset was rolled back: its log records that effect note-1 started, but its effect row says pending')
        expect(error.message).toContain('cairn verify')
      })

      it('a deleted effect row is refused on resume: the note ran once', async () => {
        const attacked = await make()
        const world = await crashed(attacked, 'deleted')
        await attacked.deleteEffect('deleted', 'note-1')
        const error = await expectResumeRefused(attacked, 'deleted', world)
        expect(error.message).toContain('its log records that effect note-1 started, but its effect row is gone')
      })

      it('a run row put back over a cancel is refused by the worker that claims it: the card was charged once', async () => {
        const attacked = await make()
        const charges: string[] = []
        await pausedJob(attacked, options, 'cancelled', charges)
        await withStore(attacked, (store) => new CairnClient({ store }).respond('cancelled', { 'confirm-1:approval': 'yes' }))
        // The answered run waits in the queue: the copy an attacker keeps, then the cancel.
        const queued = await attacked.runRow('cancelled')
        expect(queued.status).toBe('queued')
        expect(await withStore(attacked, (store) => new CairnClient({ store }).cancel('cancelled'))).toMatchObject({ outcome: 'cancelled' })
        await attacked.putRunRow('cancelled', queued)
        const store = attacked.open(options)
        const { worker, events } = await startWorker(store, charges)
        try {
          await handedBack(events, 'cancelled', 1)
          const refused = events.find((event) => event.type === 'error' && event.runId === 'cancelled')
          expect(refused?.type === 'error' && refused.error).toBeInstanceOf(Expected)
          expect(refused?.type === 'error' && refused.error.message).toContain('run cancelled was rolled back: its row says queued, but its log records that the run was cancelled')
          expect(charges).toHaveLength(1)
        } finally {
          await worker.stop()
          await store.close()
        }
      })

      it('an old paused run row put back over a completed run is refused when answered: the card was not charged again', async () => {
        const attacked = await make()
        const charges: string[] = []
        await pausedJob(attacked, options, 'done', charges)
        const paused = await attacked.runRow('done')
        const store = attacked.open(options)
        const { worker, events } = await startWorker(store, charges)
        const client = new CairnClient({ store })
        await client.respond('done', { 'confirm-1:approval': 'yes' })
        await handedBack(events, 'done', 1)
        expect(await client.result('done', { timeoutMs: 20_000 })).toMatchObject({ status: 'completed' })
        await worker.stop()
        await store.close()
        expect(charges).toHaveLength(2)
        await attacked.putRunRow('done', paused)
        const error = await withStore(attacked, (again) => rejection(new CairnClient({ store: again }).respond('done', { 'confirm-1:approval': 'yes' })))
        expect(error).toBeInstanceOf(Expected)
        expect(error).toMatchObject({ runId: 'done' })
        expect(charges).toHaveLength(2)
      })

      /** `fn` on a handle of its own, closed after: a short-lived process. */
      async function withStore<T>(attacked: Attacked, fn: (store: EngineStore) => Promise<T>): Promise<T> {
        const store = attacked.open(options)
        try {
          return await fn(store)
        } finally {
          await store.close()
        }
      }
    })
  }
}
