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

        const attempts = [() => store.load(target), () => store.getLatest({ runId: 'broken' })]
        if (store.loadMany) attempts.push(() => store.loadMany!([target, ids[0]!]).then((records) => records[0]))
        for (const attempt of attempts) {
          const error = await attempt().then(
            () => undefined,
            (err: unknown) => err,
          )
          expect(error).toBeInstanceOf(CheckpointCorruptionError)
          expect(error).toMatchObject({ runId: 'broken', checkpointId: target })
        }
        const listed = await store.listCheckpoints({ runId: 'broken' })
        expect(listed.map((cp) => cp.id)).toEqual(expect.arrayContaining([ids[1], ids[0]]))

        if (kind !== 'edit-list-item') {
          // An operator can remove the damaged checkpoint and carry on from the one before.
          expect((await store.load(ids[1]!)).payload).toEqual({ messages: conversation(3), n: 3 })
          expect(await store.delete(target)).toBe(true)
          expect((await store.getLatest({ runId: 'broken' }))?.id).toBe(ids[1])
          const next = await store.save({ runId: 'broken', kind: 'test', phase: 'p', payload: { messages: conversation(5), n: 5 } })
          expect(await store.load(next)).toMatchObject({ seq: 4, payload: { messages: conversation(5), n: 5 } })
        }
      })
    }
  })
}
