import { describe, expect, it } from 'vitest'
import type { CheckpointStore } from '../../store/checkpoint-store.js'
import type { SuiteContext } from './suite-context.js'

/** Pending writes: their place in the store, which write of a key wins, their order, and their removal. */
export function pendingWriteCases(ctx: SuiteContext): void {
  describe.skipIf(ctx.factory.pendingWrites === false)('pending writes', () => {
    const writesOf = async (store: CheckpointStore, runId: string, ids: string[]) =>
      (await store.listPendingWrites(runId, ids)).map(({ checkpointId, taskId, index, channel, taskPath, value }) => ({ checkpointId, taskId, index, channel, taskPath, value }))

    it('keeps the first regular write of a key and the newest special (negative index) write, across reopening', async () => {
      const store = ctx.store()
      const cp = await store.save({ runId: 'pw', kind: 'graph', phase: 'step', payload: {} })
      await store.putPendingWrites!({ runId: 'pw', checkpointId: cp, writes: [
        { taskId: 'task-a', index: 0, channel: 'messages', value: { text: 'first' } },
        { taskId: 'task-a', index: -1, channel: '__error__', value: 'boom 1' },
      ] })
      await store.putPendingWrites!({ runId: 'pw', checkpointId: cp, writes: [
        { taskId: 'task-a', index: 0, channel: 'messages', value: { text: 'retried' } },
        { taskId: 'task-a', index: -1, channel: '__error__', value: 'boom 2' },
        { taskId: 'task-a', index: -3, channel: '__interrupt__', value: { ask: 'approve?' } },
      ] })
      const expected = [
        { checkpointId: cp, taskId: 'task-a', index: -3, channel: '__interrupt__', taskPath: '', value: { ask: 'approve?' } },
        { checkpointId: cp, taskId: 'task-a', index: -1, channel: '__error__', taskPath: '', value: 'boom 2' },
        { checkpointId: cp, taskId: 'task-a', index: 0, channel: 'messages', taskPath: '', value: { text: 'first' } },
      ]
      expect(await writesOf(store, 'pw', [cp])).toEqual(expected)
      if (ctx.factory.persistent !== false) expect(await writesOf(await ctx.openAnother(), 'pw', [cp])).toEqual(expected)
    })

    it('lists writes by checkpoint in the order asked, then by task path, task id (code point) and index, values through the codec', async () => {
      const store = ctx.store()
      const first = await store.save({ runId: 'pw', kind: 'graph', phase: 'step', payload: {} })
      const second = await store.save({ runId: 'pw', kind: 'graph', phase: 'step', payload: {} })
      await store.putPendingWrites!({ runId: 'pw', checkpointId: first, writes: [
        { taskId: 'b', index: 1, channel: 'c', taskPath: '~1', value: 2 },
        { taskId: 'b', index: 0, channel: 'c', taskPath: '~1', value: 1 },
        { taskId: '\u{1F600}', index: 0, channel: 'c', taskPath: '', value: 'astral' },
        { taskId: '\uFFFF', index: 0, channel: 'c', taskPath: '', value: 'bmp' },
      ] })
      await store.putPendingWrites!({ runId: 'pw', checkpointId: second, writes: [{ taskId: 'x', index: 0, channel: 'when', value: new Date(7) }] })
      const listed = await writesOf(store, 'pw', [second, first, 'cp-unknown'])
      expect(listed.map((write) => write.value)).toEqual([new Date(7), 'bmp', 'astral', 1, 2])
      expect(await writesOf(store, 'other-run', [first])).toEqual([])
    })

    it('goes with its checkpoint when the checkpoint or its run is deleted', async () => {
      const store = ctx.store()
      const [kept, doomed] = [await store.save({ runId: 'pw', kind: 'graph', phase: 'step', payload: {} }), await store.save({ runId: 'pw', kind: 'graph', phase: 'step', payload: {} })]
      const write = { taskId: 't', index: 0, channel: 'c', value: 1 }
      for (const checkpointId of [kept, doomed]) await store.putPendingWrites!({ runId: 'pw', checkpointId, writes: [write] })
      expect(await store.delete(doomed)).toBe(true)
      expect((await writesOf(store, 'pw', [kept, doomed])).map((w) => w.checkpointId)).toEqual([kept])
      expect(await store.deleteRun('pw')).toBe(true)
      expect(await writesOf(store, 'pw', [kept])).toEqual([])
    })

    it('refuses a write without a task id, channel or integer index', async () => {
      const store = ctx.store()
      for (const bad of [{ taskId: '', index: 0, channel: 'c' }, { taskId: 't', index: 0, channel: '' }, { taskId: 't', index: 0.5, channel: 'c' }]) {
        await expect(store.putPendingWrites!({ runId: 'pw', checkpointId: 'cp', writes: [{ ...bad, value: 1 }] })).rejects.toMatchObject({ code: 'invalid_argument' })
      }
    })
  })
}
