import { describe, expect, it } from 'vitest'
import { CheckpointCorruptionError } from '../../core/errors.js'
import type { SuiteContext } from './suite-context.js'

/**
 * A run's row remembers the seq of its newest checkpoint. A run whose checkpoints end before it
 * (the newest were removed, whoever removed them) is refused by `getLatest` (what a resume reads)
 * and by its listing, never silently continued from an older checkpoint; a fork goes on from any
 * earlier checkpoint.
 */
export function rollbackCases(ctx: SuiteContext): void {
  describe('rollbacks', () => {
    it('getLatest refuses a run whose newest checkpoints are gone, naming the run and both seqs', async () => {
      let store = ctx.store()
      const ids: string[] = []
      for (let n = 1; n <= 4; n++) ids.push(await store.save({ runId: 'rb', kind: 'test', phase: 'p', payload: { n } }))
      expect(await store.delete(ids[3]!)).toBe(true)
      expect(await store.delete(ids[2]!)).toBe(true)
      if (ctx.factory.persistent !== false) store = await ctx.reopen()
      for (const attempt of [() => store.getLatest({ runId: 'rb' })]) {
        const error = await attempt().then(
          () => undefined,
          (err: unknown) => err,
        )
        expect(error).toBeInstanceOf(CheckpointCorruptionError)
        expect(error).toMatchObject({ runId: 'rb' })
        expect((error as Error).message).toMatch(/seq 2\b.*seq 4\b/)
      }
      await expect(store.listCheckpoints({ runId: 'rb' })).rejects.toMatchObject({ runId: 'rb' })
      // The older checkpoints stay readable, and a fork goes on from one of them.
      expect((await store.load(ids[1]!)).payload).toEqual({ n: 2 })
      const forked = await store.fork({ checkpointId: ids[1]!, runId: 'rb-fork' })
      expect((await store.getLatest({ runId: 'rb-fork' }))?.id).toBe(forked.id)
      expect((await store.load(await store.save({ runId: 'rb-fork', kind: 'test', phase: 'p', payload: { n: 3 } }))).seq).toBe(2)
    })

    it('refuses a run that has a last seq but no checkpoint left, rather than starting it afresh', async () => {
      const store = ctx.store()
      const only = await store.save({ runId: 'rb-empty', kind: 'test', phase: 'p', payload: 1 })
      expect(await store.delete(only)).toBe(true)
      await expect(store.getLatest({ runId: 'rb-empty' })).rejects.toBeInstanceOf(CheckpointCorruptionError)
      // A run created without checkpoints has none to miss.
      await store.createRun({ runId: 'rb-new' })
      expect(await store.getLatest({ runId: 'rb-new' })).toBeUndefined()
    })

  })
}
