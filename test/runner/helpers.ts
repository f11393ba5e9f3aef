import { join } from 'node:path'
import { Agent, tool, type CheckpointStore, type ContentBlock, type Message, type Tool } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel } from '../../src/testing.js'
import { waitFor } from '../support/wait.js'
import { useTempDirs } from '../support/temp-dirs.js'

const tempDir = useTempDirs('cairn-runner-')

/** A fresh SQLite store file; `reopen` gives a new handle on it, as a fresh process would. */
export async function sqliteStore(): Promise<{ store: SqliteStore; reopen: () => SqliteStore; path: string }> {
  const dir = await tempDir()
  const path = join(dir, 'cairn.db')
  return { store: new SqliteStore({ path }), reopen: () => new SqliteStore({ path }), path }
}

/** Side effects as the outside world sees them: one entry per real execution. */
export class World {
  readonly effects: string[] = []
  count(key: string): number {
    return this.effects.filter((effect) => effect === key).length
  }
}

/**
 * A research script decided from the conversation, so a resumed process continues it: cycle 0
 * asks for two lookups at once, cycle 1 for a note, then the answer.
 */
export function researchTurns(): (request: { messages: Message[] }) => ContentBlock[] {
  return (request) => {
    const results = request.messages.flatMap((m) => m.content.filter((b) => 'toolResult' in b)).length
    if (results === 0) {
      return [
        { toolUse: { toolUseId: 'lookup-a', name: 'lookup', input: { key: 'a' } } },
        { toolUse: { toolUseId: 'lookup-b', name: 'lookup', input: { key: 'b' } } },
      ]
    }
    if (results === 2) return [{ toolUse: { toolUseId: 'note-1', name: 'save_note', input: { text: 'a and b' } } }]
    return [{ text: `Done after ${results} tool results.` }]
  }
}

/** Tools writing to `world`: `lookup` is idempotent, `save_note` is not. */
export function researchTools(world: World, hooks: { onNote?: () => Promise<void>; onLookup?: (key: string) => Promise<void> } = {}): Tool[] {
  return [
    tool({
      name: 'lookup',
      description: 'Look a key up.',
      idempotent: true,
      inputSchema: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
      callback: async (input) => {
        const { key } = input as { key: string }
        world.effects.push(`lookup:${key}`)
        await hooks.onLookup?.(key)
        return `value of ${key}`
      },
    }),
    tool({
      name: 'save_note',
      description: 'Save a note (not idempotent).',
      inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      callback: async (input) => {
        world.effects.push(`note:${(input as { text: string }).text}`)
        await hooks.onNote?.()
        return 'saved'
      },
    }),
  ]
}

/** A research agent with a fresh model (as a fresh process builds it). */
export function researchAgent(world: World, hooks: Parameters<typeof researchTools>[1] = {}) {
  const model = new ScriptedModel(Array.from({ length: 10 }, () => researchTurns()))
  return { model, agent: new Agent({ name: 'researcher', model, tools: researchTools(world, hooks), systemPrompt: 'Research.' }) }
}

/** A promise that never settles: what a process that died leaves behind. */
export const forever = () => new Promise<never>(() => {})

/** The lease of a runner made to "die" in a test: short, so the test's resume does not wait long. */
export const CRASH_LEASE_MS = 150

/**
 * The store as a process that froze or died sees it: its lease renewals (and release) never
 * answer, so a runner using it loses the run once `leaseMs` passes and another may take it over.
 */
export function frozenLeases(store: CheckpointStore): CheckpointStore {
  const leases = store.leases
  const frozen = leases && new Proxy(leases, {
    get(target, property) {
      if (property === 'heartbeat' || property === 'release') return () => forever()
      const value = Reflect.get(target, property) as unknown
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
    },
  })
  return new Proxy(store, {
    get(target, property) {
      if (property === 'leases') return frozen
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

/**
 * A store that "dies" after `writes` calls of `write`: from then on every call hangs, as if the
 * process had been killed (its lease renewals never answer). Everything before the death is in
 * the real store.
 */
export function dyingStore(store: CheckpointStore, writes: number): CheckpointStore {
  let left = writes
  let dead = false
  const frozen = frozenLeases(store)
  return new Proxy(store, {
    get(target, property) {
      if (property === 'leases') return frozen.leases
      const value = Reflect.get(target, property) as unknown
      if (typeof value !== 'function') return value
      return (...args: unknown[]) => {
        if (dead) return forever()
        if (property === 'write' && left-- <= 0) {
          dead = true
          return forever()
        }
        return (value as (...a: unknown[]) => unknown).apply(target, args)
      }
    },
  })
}

/**
 * Wait until the store shows a run hanging where the test left it (its process "died" there):
 * the `hanging` calls journaled, and every other effect of the run finished and written.
 */
export async function waitForHang(store: CheckpointStore, runId: string, hanging: readonly string[]): Promise<void> {
  await waitFor(
    async () => {
      const effects = await store.listEffects(runId)
      const stuck = effects.filter((effect) => hanging.includes(effect.callId))
      const settled = effects.every((effect) => hanging.includes(effect.callId) || effect.status === 'succeeded' || effect.status === 'failed')
      return stuck.length === hanging.length && settled
    },
    `run ${runId} to hang at ${hanging.join(', ')}`,
  )
}
