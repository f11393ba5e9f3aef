import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterEach, describe, expect, it } from 'vitest'
import { Runner } from '../../src/index.js'
import { EngineStore, FileEngine, MemoryEngine, type StorageEngine } from '../../src/engine.js'
import { SqliteEngine } from '../../src/sqlite.js'
import { crashedRun, scriptedAgent } from '../trust/scenario.js'

/**
 * A resume's reads of the storage engine, counted: every call to the engine (and to its lease
 * capability) is recorded by name, in order, through a proxy around a real engine.
 */
function counted(engine: StorageEngine): { engine: StorageEngine; calls: string[]; effectsAsked: (readonly string[] | undefined)[] } {
  const calls: string[] = []
  const effectsAsked: (readonly string[] | undefined)[] = []
  const wrap = <T extends object>(target: T, prefix: string): T =>
    new Proxy(target, {
      get(inner, property) {
        const value = Reflect.get(inner, property, inner) as unknown
        if (property === 'leases' && value) return wrap(value, 'leases.')
        if (typeof value !== 'function') return value
        return (...args: unknown[]) => {
          calls.push(`${prefix}${String(property)}`)
          if (property === 'listEffects') effectsAsked.push(args[1] as readonly string[] | undefined)
          return (value as (...a: unknown[]) => unknown).apply(inner, args)
        }
      },
    })
  return { engine: wrap(engine, ''), calls, effectsAsked }
}

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-resume-trips-'))
  dirs.push(dir)
  return dir
}

const backends: [string, () => StorageEngine][] = [
  ['memory', () => new MemoryEngine()],
  ['SQLite', () => new SqliteEngine({ database: new Database(join(tempDir(), 'cairn.db')) })],
  ['file', () => new FileEngine({ directory: tempDir() })],
]

describe('a resume reads the store in at most 2 engine round trips', () => {
  for (const [name, open] of backends) {
    for (const keyed of [false, true]) {
      it(`${name}${keyed ? ', signed and encrypted' : ''}: the run, its latest checkpoint and the snapshot it rests on in one loadRun, then the effects of the calls under way`, async () => {
        const { engine, calls, effectsAsked } = counted(open())
        const keys = [{ id: 'k', secret: Buffer.alloc(32, 3).toString('base64') }]
        const store = new EngineStore(engine, keyed ? { keys, encrypt: true } : {})
        try {
          const world = await crashedRun(store, 'run')
          effectsAsked.length = 0
          const fresh = scriptedAgent(world)
          calls.length = 0
          await new Runner({ store, durability: 'sync' }).resume(fresh.agent, { runId: 'run' }).catch(() => undefined)
          // Everything the resume read before its first write (the lease taken, the run read). A
          // keyed store's commit that changes the run row first reads the row it signs anew: that
          // read is the write's.
          const firstWrite = calls.indexOf('commit')
          expect(firstWrite).toBeGreaterThan(0)
          const reads = calls.slice(0, firstWrite).filter((call) => !call.startsWith('leases.'))
          if (keyed && reads.at(-1) === 'getRun') reads.pop()
          expect(reads).toEqual(['loadRun', 'listEffects'])
          // Only the calls of the batch the run goes on with, not every effect of the run.
          expect(effectsAsked).toEqual([['note-1']])
          expect((await store.listEffects('run')).map((effect) => effect.callId)).toEqual(['lookup-a', 'lookup-b', 'note-1'])
          expect(fresh.model.calls.length + world.count('note:')).toBeGreaterThan(0)
        } finally {
          await store.close()
        }
      }, 60_000)

      it(`${name}${keyed ? ', signed and encrypted' : ''}: openRun finds the checkpoint the newest rests on among the recent ones, and reads the effects it is asked for`, async () => {
        const { engine, calls } = counted(open())
        const keys = [{ id: 'k', secret: Buffer.alloc(32, 3).toString('base64') }]
        const store = new EngineStore(engine, keyed ? { keys, encrypt: true } : {})
        try {
          const messages = Array.from({ length: 40 }, (_, k) => ({ role: 'user', text: `message ${k}` }))
          await store.save({ runId: 'r', kind: 'k', phase: 'full', metadata: { full: true }, payload: { messages: messages.slice(0, 20) } })
          await store.save({ runId: 'r', kind: 'k', phase: 'full', metadata: { full: true }, payload: { messages } })
          await store.save({ runId: 'r', kind: 'k', phase: 'light', metadata: { full: false }, payload: { step: 1 } })
          await store.write({ runId: 'r', intents: [{ runId: 'r', callId: 'c1', name: 'tool', inputHash: 'h1', idempotencyKey: 'r:c1' }] })
          const fresh = new EngineStore(engine, keyed ? { keys, encrypt: true } : {})
          calls.length = 0
          const opened = await fresh.openRun('r', { base: (info) => info.metadata.full === true })
          // Every effect of the run unless asked for fewer: a second call, after the log is read.
          expect(calls).toEqual(['loadRun', 'listEffects'])
          expect(opened.run).toMatchObject({ runId: 'r', lastSeq: 3 })
          expect(opened.latest).toMatchObject({ phase: 'light', payload: { step: 1 } })
          expect(opened.base).toMatchObject({ seq: 2, payload: { messages } })
          expect(opened.effects.map((effect) => effect.callId)).toEqual(['c1'])
          // The next write goes on from what the open read: no read of the run before it.
          calls.length = 0
          await fresh.save({ runId: 'r', kind: 'k', phase: 'light', payload: { step: 2 } })
          // (A keyed store checks its writing key once, at its first write.)
          expect(calls.filter((call) => call !== 'putKeyCheck')).toEqual(['commit'])
          // None of the recent ones: no base (the caller looks further back).
          expect((await fresh.openRun('r', { recent: 1, base: (info) => info.metadata.full === true })).base).toBeUndefined()
          // The effects picked from what was read: none is one engine call; some are read by call id.
          await store.write({ runId: 'r', intents: [{ runId: 'r', callId: 'c2', name: 'tool', inputHash: 'h2', idempotencyKey: 'r:c2' }] })
          const seen: unknown[] = []
          calls.length = 0
          const none = await fresh.openRun('r', { effects: (read) => (seen.push(read.latest?.payload), []) })
          expect(calls).toEqual(['loadRun'])
          expect(none.effects).toEqual([])
          expect(seen).toEqual([{ step: 2 }])
          calls.length = 0
          const some = await fresh.openRun('r', { effects: () => ['c2', 'unknown'] })
          expect(calls).toEqual(['loadRun', 'listEffects'])
          expect(some.effects.map((effect) => effect.callId)).toEqual(['c2'])
        } finally {
          await store.close()
        }
      })
    }
  }
})
