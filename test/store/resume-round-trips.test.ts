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
function counted(engine: StorageEngine): { engine: StorageEngine; calls: string[] } {
  const calls: string[] = []
  const wrap = <T extends object>(target: T, prefix: string): T =>
    new Proxy(target, {
      get(inner, property) {
        const value = Reflect.get(inner, property, inner) as unknown
        if (property === 'leases' && value) return wrap(value, 'leases.')
        if (typeof value !== 'function') return value
        return (...args: unknown[]) => {
          calls.push(`${prefix}${String(property)}`)
          return (value as (...a: unknown[]) => unknown).apply(inner, args)
        }
      },
    })
  return { engine: wrap(engine, ''), calls }
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
      it(`${name}${keyed ? ', signed and encrypted' : ''}: the run, its latest checkpoint, the snapshot it rests on and its effects in one loadRun`, async () => {
        const { engine, calls } = counted(open())
        const keys = [{ id: 'k', secret: Buffer.alloc(32, 3).toString('base64') }]
        const store = new EngineStore(engine, keyed ? { keys, encrypt: true } : {})
        try {
          const world = await crashedRun(store, 'run')
          const fresh = scriptedAgent(world)
          calls.length = 0
          await new Runner({ store, durability: 'sync' }).resume(fresh.agent, { runId: 'run' }).catch(() => undefined)
          // Everything the resume read before its first write (the lease taken, the run read).
          const firstWrite = calls.indexOf('commit')
          expect(firstWrite).toBeGreaterThan(0)
          const reads = calls.slice(0, firstWrite).filter((call) => !call.startsWith('leases.'))
          expect(reads).toContain('loadRun')
          expect(reads.length, reads.join(', ')).toBeLessThanOrEqual(2)
          expect(fresh.model.calls.length + world.count('note:')).toBeGreaterThan(0)
        } finally {
          await store.close()
        }
      }, 60_000)

      it(`${name}${keyed ? ', signed and encrypted' : ''}: openRun finds the checkpoint the newest rests on among the recent ones, in one engine call`, async () => {
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
          expect(calls).toEqual(['loadRun'])
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
        } finally {
          await store.close()
        }
      })
    }
  }
})
