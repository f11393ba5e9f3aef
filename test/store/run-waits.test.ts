import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { MemoryStore } from '../../src/index.js'
import type { EngineStore } from '../../src/engine.js'
import { SqliteStore } from '../../src/sqlite.js'
import { postgresTarget } from '../fixtures/postgres-target.js'

const target = await postgresTarget()
const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})
afterAll(() => target.dropSchemas())

/** `store`, closed after the test. */
function closed(store: EngineStore): EngineStore {
  cleanups.push(() => store.close())
  return store
}

/** Each backend opens two handles on one database, as two processes would. */
const backends = [
  {
    name: 'SQLite',
    open: async () => {
      const dir = await mkdtemp(join(tmpdir(), 'cairn-waits-'))
      cleanups.push(() => rm(dir, { recursive: true, force: true }))
      return () => closed(new SqliteStore({ path: join(dir, 'cairn.db') }))
    },
  },
  {
    name: `Postgres (${target.kind})`,
    open: async () => {
      const schema = target.freshSchema()
      return () => closed(target.openStore(schema))
    },
  },
  {
    name: 'memory',
    open: async () => {
      const store = new MemoryStore()
      return () => store
    },
  },
]

describe.each(backends)('the time tables: $name', ({ name, open }) => {
  it('an event is taken by one taker only, and the same taker gets it again', async () => {
    const handle = await open()
    const [a, b] = [handle().waits!, handle().waits!]
    expect(await a.sendEvent({ eventId: 'e1', name: 'paid', match: 'o-1', payload: '{"n":1}', sentAt: 10 })).toBe(true)
    expect(await b.sendEvent({ eventId: 'e1', name: 'paid', match: 'o-1', payload: '{"n":2}', sentAt: 11 })).toBe(false)
    await a.sendEvent({ eventId: 'e2', name: 'paid', match: 'o-1', payload: '{"n":3}', sentAt: 12 })
    await a.setWait({ runId: 'r1', waitId: 'w', name: 'paid', match: 'o-1' })
    expect(await a.readyWaits(10)).toEqual([{ runId: 'r1', waitId: 'w', name: 'paid', match: 'o-1' }])
    // Three takers at once: two events, so two of them get one each, in sent order.
    const taken = await Promise.all(['x/1', 'y/1', 'z/1'].map((takenBy, k) => (k % 2 === 0 ? a : b).takeEvent({ name: 'paid', match: 'o-1', takenBy })))
    const got = taken.filter((event) => event !== undefined)
    expect(got.map((event) => event.eventId).sort()).toEqual(['e1', 'e2'])
    const first = got.find((event) => event.eventId === 'e1')!
    expect(first).toMatchObject({ name: 'paid', match: 'o-1', payload: '{"n":1}', sentAt: 10 })
    // A taker that took one gets the same one again, even with another event free.
    await a.sendEvent({ eventId: 'e3', name: 'paid', match: 'o-1', payload: '{}', sentAt: 13 })
    expect(await b.takeEvent({ name: 'paid', match: 'o-1', takenBy: first.takenBy! })).toEqual(first)
    expect(await a.readyWaits(10)).toHaveLength(1)
    expect((await a.listEvents({ name: 'paid', limit: 2 })).map((event) => event.eventId)).toEqual(['e3', 'e2'])
    await a.clearRun('r1')
    expect(await b.getWaits('r1')).toEqual([])
  })

  it('timers: set, moved, read when due, and cleared only while they still say their time', async () => {
    const handle = await open()
    const [a, b] = [handle().waits!, handle().waits!]
    await a.setTimer('r1', 100)
    await a.setTimer('r2', 200)
    await b.setTimer('r1', 150)
    await a.setTimer('r3', 900)
    expect(await b.getTimer('r1')).toBe(150)
    expect(await a.dueTimers(500, 10)).toEqual([
      { runId: 'r1', wakeAt: 150 },
      { runId: 'r2', wakeAt: 200 },
    ])
    expect(await a.clearTimer('r1', 100)).toBe(false)
    // Of a batch, only the timers that still say the time given are removed.
    expect(
      await b.clearTimers([
        { runId: 'r1', wakeAt: 150 },
        { runId: 'r2', wakeAt: 201 },
        { runId: 'nobody', wakeAt: 1 },
      ]),
    ).toBe(1)
    expect(await a.getTimer('r1')).toBeUndefined()
    expect(await a.clearTimer('r2')).toBe(true)
    if (name === 'SQLite' || name === 'memory') {
      // A wake time with a fraction of a millisecond (`ctx.sleep(1.5)`) is cleared like any other.
      await a.setTimer('r4', 1000.5)
      expect(await b.clearTimers([{ runId: 'r4', wakeAt: 1000.5 }])).toBe(1)
    }
    await a.clearRun('r3')
    expect(await a.dueTimers(Number.MAX_SAFE_INTEGER, 10)).toEqual([])
  })

  it('schedules: inserted once, a second put replaces the body only, and a tick advances once', async () => {
    const handle = await open()
    const [a, b] = [handle().waits!, handle().waits!]
    expect(await a.putSchedule({ id: 's', body: '{"v":1}', paused: false, lastTick: 50, createdAt: 40 })).toBe(true)
    expect(await a.setSchedulePaused('s', true)).toBe(true)
    expect(await b.putSchedule({ id: 's', body: '{"v":2}', paused: false, lastTick: 99, createdAt: 99 })).toBe(false)
    expect(await a.getSchedule('s')).toEqual({ id: 's', body: '{"v":2}', paused: true, lastTick: 50, createdAt: 40 })
    const moves = await Promise.all([a.advanceSchedule('s', 50, 60), b.advanceSchedule('s', 50, 60)])
    expect(moves.filter(Boolean)).toHaveLength(1)
    expect(await b.listSchedules()).toEqual([{ id: 's', body: '{"v":2}', paused: true, lastTick: 60, createdAt: 40 }])
    expect(await a.setSchedulePaused('nobody', true)).toBe(false)
    expect(await b.deleteSchedule('s')).toBe(true)
    expect(await a.deleteSchedule('s')).toBe(false)
    expect(await a.getSchedule('s')).toBeUndefined()
  })
})
