import { describe, expect, it } from 'vitest'
import { CheckpointCorruptionError } from '../../core/errors.js'
import { conversation } from './fixtures.js'
import type { CorruptionKind } from './store-factory.js'
import type { SuiteContext } from './suite-context.js'

const KINDS: readonly CorruptionKind[] = ['truncate', 'garble', 'edit', 'edit-list-item']

/** Damaged records are reported with their ids, never used and never silently skipped over. */
export function corruptionCases(ctx: SuiteContext): void {
  const { corrupt, persistent } = ctx.factory
  describe('corruption', () => {
    for (const kind of KINDS) {
      it.skipIf(corrupt === undefined)(`a ${kind} checkpoint is a CheckpointCorruptionError naming run and checkpoint`, async () => {
        let store = ctx.store()
        const ids: string[] = []
        for (let n = 2; n <= 4; n++) ids.push(await store.save({ runId: 'broken', kind: 'test', phase: 'p', payload: { messages: conversation(n), n } }))
        const target = ids[2]!
        if (persistent !== false) await store.close()
        await corrupt!({ location: ctx.location(), store, runId: 'broken', checkpointId: target, kind })
        if (persistent !== false) store = await ctx.reopen()

        const attempts = [() => store.load(target), () => store.getLatest({ runId: 'broken' }), () => store.loadMany([target, ids[0]!]).then((records) => records[0])]
        for (const attempt of attempts) {
          const error = await attempt().then(
            () => undefined,
            (err: unknown) => err,
          )
          expect(error).toBeInstanceOf(CheckpointCorruptionError)
          expect(error).toMatchObject({ runId: 'broken', checkpointId: target })
        }
        if (kind === 'edit-list-item') {
          // A listing checks headers, not list items: the header is intact.
          expect((await store.listCheckpoints({ runId: 'broken' })).map((cp) => cp.id)).toEqual([target, ids[1], ids[0]])
        } else {
          // A listing never skips the damaged record, nor returns its header unchecked.
          await expect(store.listCheckpoints({ runId: 'broken' })).rejects.toMatchObject({ runId: 'broken', checkpointId: target })
          await expect(store.listCheckpoints({ runId: 'broken' })).rejects.toBeInstanceOf(CheckpointCorruptionError)
          expect((await store.listCheckpoints({ runId: 'broken', before: target })).map((cp) => cp.id)).toEqual([ids[1], ids[0]])
        }

        if (kind !== 'edit-list-item') {
          // An operator can remove the damaged checkpoint, but the run is not silently continued
          // from the one before (that is a rollback): the operator forks it and carries on there.
          expect((await store.load(ids[1]!)).payload).toEqual({ messages: conversation(3), n: 3 })
          expect(await store.delete(target)).toBe(true)
          await expect(store.getLatest({ runId: 'broken' })).rejects.toMatchObject({ runId: 'broken', checkpointId: ids[1] })
          const forked = await store.fork({ checkpointId: ids[1]!, runId: 'mended' })
          const next = await store.save({ runId: 'mended', kind: 'test', phase: 'p', payload: { messages: conversation(5), n: 5 } })
          expect(await store.load(next)).toMatchObject({ seq: 2, payload: { messages: conversation(5), n: 5 } })
          expect((await store.getLatest({ runId: 'mended' }))?.id).toBe(next)
          expect(forked.payload).toEqual({ messages: conversation(3), n: 3 })
        }
      })
    }
  })
}
