import { Agent, Runner, tool, type CheckpointStore, type ContentBlock, type Message } from '../../src/index.js'
import { ScriptedModel } from '../../src/testing.js'

/** Test keys: 32 bytes each, base64. */
export const KEY_A = { id: 'key-a', secret: Buffer.alloc(32, 7).toString('base64') }
export const KEY_B = { id: 'key-b', secret: Buffer.alloc(32, 9).toString('base64') }

/** Side effects as the outside world sees them: one entry per real execution. */
export class World {
  readonly effects: string[] = []
  count(prefix: string): number {
    return this.effects.filter((effect) => effect.startsWith(prefix)).length
  }
}

/** A string only a tool knows: it must never be found in a store's bytes when encryption is on. */
export const SECRET = 'tok_live_8f3k2j4h5g6f7d8s9a0'

/**
 * Two lookups (long results, so the conversation becomes an append-only list), then a
 * non-idempotent note, then the answer.
 */
export function scriptedAgent(world: World, hooks: { onNote?: () => Promise<void> } = {}) {
  const turn = (request: { messages: Message[] }): ContentBlock[] => {
    const results = request.messages.flatMap((m) => m.content.filter((b) => 'toolResult' in b)).length
    if (results === 0) {
      return [
        { toolUse: { toolUseId: 'lookup-a', name: 'lookup', input: { key: 'a' } } },
        { toolUse: { toolUseId: 'lookup-b', name: 'lookup', input: { key: 'b' } } },
      ]
    }
    if (results === 2) return [{ toolUse: { toolUseId: 'note-1', name: 'save_note', input: { text: `note with ${SECRET}` } } }]
    return [{ text: `Done after ${results} tool results.` }]
  }
  const tools = [
    tool({
      name: 'lookup',
      description: 'Look a key up.',
      idempotent: true,
      inputSchema: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
      callback: async (input) => {
        const { key } = input as { key: string }
        world.effects.push(`lookup:${key}`)
        return `value of ${key}: ${SECRET} ${'.'.repeat(700)}`
      },
    }),
    tool({
      name: 'save_note',
      description: 'Save a note (not idempotent).',
      inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      callback: async (input) => {
        world.effects.push(`note:${(input as { text: string }).text}`)
        await hooks.onNote?.()
        return `saved ${SECRET}`
      },
    }),
  ]
  const model = new ScriptedModel(Array.from({ length: 6 }, () => turn))
  return { model, agent: new Agent({ name: 'researcher', model, tools, systemPrompt: 'Research.' }) }
}

/**
 * Run the agent until its non-idempotent note is running, then leave it hanging there: the
 * process "died" with two checkpointed cycles, completed lookups and a started note.
 */
export async function crashedRun(store: CheckpointStore, runId: string): Promise<World> {
  const world = new World()
  const { agent } = scriptedAgent(world, { onNote: () => new Promise<never>(() => {}) })
  // Once the note hangs, the "dead" process's lease renewals never answer. Until then they answer,
  // and its lease is long, so a loaded machine cannot take the run from it before the hang.
  const run = new Runner({ store: frozenLeases(store, () => world.count('note:') > 0), leaseMs: CRASH_LEASE_MS, durability: 'sync' }).run(agent, { input: 'research', runId })
  let ended: Error | undefined
  run.then(
    (result) => (ended = new Error(`run ${runId} ended (${result.state}) before its note hung`)),
    (error: unknown) => (ended = error instanceof Error ? error : new Error(String(error))),
  )
  await waitUntil(() => {
    if (ended !== undefined) throw ended
    return world.count('note:') === 1
  })
  if (store.leases) await leaseCut(store, runId)
  return world
}

/**
 * The dead process's lease, cut short as if its last renewal had asked for 1 ms, then waited out:
 * a resume may take the run over now.
 */
async function leaseCut(store: CheckpointStore, runId: string): Promise<void> {
  const lease = await store.leases!.getLease(runId)
  if (lease?.owner) await store.leases!.heartbeat({ owner: lease.owner, leaseMs: 1, runs: [{ runId, epoch: lease.epoch }] })
  await leaseLapsed(store, runId)
}

/** Poll until `condition` holds (store state, never a fixed sleep). */
export async function waitUntil(condition: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('timed out waiting for a condition')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

// A process that froze or died, for a rotation child too (which cannot load the runner tests' helpers).
/**
 * The lease of a runner made to "die" in a test: long, so a loaded machine's slow renewals never
 * lose it before the runner reaches its hang (the test then cuts it short).
 */
export const CRASH_LEASE_MS = 30_000

/**
 * The store as a process that froze or died sees it: its lease renewals (and release) never
 * answer — from the moment `frozen()` holds, if given — so a runner using it loses the run once
 * `leaseMs` passes and another may take it over.
 */
export function frozenLeases(store: CheckpointStore, frozen: () => boolean = () => true): CheckpointStore {
  const leases = store.leases
  const hanging = () => new Promise<never>(() => {})
  const proxied = leases && new Proxy(leases, {
    get(target, property) {
      if ((property === 'heartbeat' || property === 'release') && frozen()) return hanging
      const value = Reflect.get(target, property) as unknown
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
    },
  })
  return new Proxy(store, {
    get(target, property) {
      if (property === 'leases') return proxied
      const value = Reflect.get(target, property) as unknown
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
    },
  })
}

/** Wait until the run's lease lapsed: the "dead" runner holding it can be taken over now. */
export async function leaseLapsed(store: CheckpointStore, runId: string): Promise<void> {
  for (;;) {
    const expiresAt = (await store.leases!.getLease(runId))?.leaseExpiresAt ?? null
    if (expiresAt === null || expiresAt < Date.now()) return
    await new Promise((resolve) => setTimeout(resolve, Math.max(1, expiresAt - Date.now() + 1)))
  }
}

