import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { exited, onLines, startChild } from './child-process.js'
import { conversation } from './fixtures.js'
import type { SuiteContext } from './suite-context.js'
import type { CheckpointStore } from '../../store/checkpoint-store.js'

const KILL_ROUNDS = 4

/** Crash atomicity under SIGKILL and two processes writing one run. */
export function processCases(ctx: SuiteContext): void {
  const { childModule, persistent, multiProcess } = ctx.factory
  // Child-process tests need a store a second process can open; in-memory stores have none.
  const canSpawn = childModule !== undefined && persistent !== false

  describe('crash atomicity', () => {
    it.skipIf(!canSpawn)(
      'a child killed with SIGKILL while saving leaves a consistent latest checkpoint, and the run continues',
      async () => {
        await ctx.store().close()
        let lastReported = -1
        for (let round = 0; round < KILL_ROUNDS; round++) {
          const child = startChild([childModule!, ctx.location(), 'save-loop', 'torture'])
          const done = exited(child)
          const target = lastReported + 3 + Math.floor(Math.random() * 25)
          await new Promise<void>((resolve, reject) => {
            onLines(child, (line) => {
              const i = Number(line.split(' ')[1])
              lastReported = Math.max(lastReported, i)
              if (i >= target) resolve()
            })
            void done.then((exit) => reject(new Error(`child exited early (${exit.code ?? exit.signal}): ${exit.stderr}`)))
          })
          await sleep(Math.random() * 15)
          child.kill('SIGKILL')
          expect((await done).signal).toBe('SIGKILL')

          const store = await ctx.reopen()
          const { latest, history } = await settledView(store)
          expect(latest).toBeDefined()
          const i = latest!.payload.i
          expect(i).toBeGreaterThanOrEqual(lastReported)
          expect(latest!.metadata).toEqual({ i })
          expect(latest!.payload.messages).toEqual(conversation(i + 1))
          expect(history.map((cp) => cp.seq)).toEqual(Array.from({ length: i + 1 }, (_, k) => i + 1 - k))
          const sample = history[Math.floor(Math.random() * history.length)]!
          const loaded = await store.load<{ i: number; messages: unknown[] }>(sample.id)
          expect(loaded.payload.messages).toEqual(conversation(loaded.payload.i + 1))
          await store.close()
          lastReported = i
        }
      },
      60_000,
    )
  })

  describe('concurrent writers', () => {
    it.skipIf(!canSpawn || multiProcess !== true)(
      'two processes saving to one run lose nothing',
      async () => {
        await ctx.store().close()
        const count = 60
        const children = ['alpha', 'beta'].map((writer) => exited(startChild([childModule!, ctx.location(), 'writer', 'shared', writer, String(count)])))
        for (const exit of await Promise.all(children)) expect(exit, exit.stderr).toMatchObject({ code: 0 })
        const store = await ctx.reopen()
        const history = await store.listCheckpoints({ runId: 'shared' })
        expect(history.map((cp) => cp.seq)).toEqual(Array.from({ length: 2 * count }, (_, k) => 2 * count - k))
        const seen = new Set<string>()
        for (const cp of history) {
          const { payload } = await store.load<{ writer: string; k: number; messages: unknown[] }>(cp.id)
          expect(payload.messages).toEqual(conversation((payload.k % 7) + 1, payload.writer))
          seen.add(`${payload.writer}:${payload.k}`)
        }
        expect(seen.size).toBe(2 * count)
      },
      60_000,
    )
  })
}

/**
 * The latest checkpoint and the listing, read until they agree. A server-side store may still
 * commit the transaction whose COMMIT the killed child sent just before it died; that commit can
 * land between two reads (the latest only moves forward), so both are read again until a read of
 * each sees the same newest checkpoint.
 */
async function settledView(store: CheckpointStore) {
  for (let attempt = 0; ; attempt++) {
    const latest = await store.getLatest<{ i: number; messages: unknown[] }>({ runId: 'torture' })
    const history = await store.listCheckpoints({ runId: 'torture' })
    if (attempt >= 20 || latest === undefined || history[0]?.seq === latest.seq) return { latest, history }
    await sleep(50)
  }
}
