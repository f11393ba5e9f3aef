import { describe, expect, it } from 'vitest'
import { conversation, type SuiteContext } from './suite-context.js'

/** The effect journal, retention, and reopening a persistent store. */
export function journalCases(ctx: SuiteContext): void {
  describe('effect journal', () => {
    const intent = { runId: 'fx', callId: 'call-1', name: 'charge_card', inputHash: 'in-hash', idempotencyKey: 'fx:call-1' }

    it('records an intent, counts attempts and completes once', async () => {
      const store = ctx.store()
      const first = await store.recordEffectIntent(intent)
      expect(first).toMatchObject({ ...intent, status: 'pending', attempts: 1, output: undefined, outputHash: null, completedAt: null })
      expect((await store.recordEffectIntent(intent)).attempts).toBe(2)
      const done = await store.completeEffect({ runId: 'fx', callId: 'call-1', status: 'succeeded', output: { receipt: 'r-1', at: new Date(1) } })
      expect(done.recorded).toBe(true)
      expect(done.effect).toMatchObject({ status: 'succeeded', output: { receipt: 'r-1', at: new Date(1) }, attempts: 2 })
      expect(done.effect.outputHash).toMatch(/^[0-9a-f]{64}$/)
      expect(await store.getEffect('fx', 'call-1')).toEqual(done.effect)
      expect(await store.getEffect('fx', 'call-2')).toBeUndefined()
    })

    it('keeps the first outcome when two writers race, and tells the second', async () => {
      const store = ctx.store()
      await store.recordEffectIntent(intent)
      const results = await Promise.all([
        store.completeEffect({ runId: 'fx', callId: 'call-1', status: 'succeeded', output: 'A' }),
        store.completeEffect({ runId: 'fx', callId: 'call-1', status: 'failed', output: 'B' }),
      ])
      expect(results.filter((r) => r.recorded)).toHaveLength(1)
      const winner = results.find((r) => r.recorded)!.effect
      for (const result of results) expect(result.effect).toEqual(winner)
      const other = ctx.factory.persistent === false ? store : await ctx.openAnother()
      const late = await other.completeEffect({ runId: 'fx', callId: 'call-1', status: 'succeeded', output: 'C' })
      expect(late.recorded).toBe(false)
      expect(late.effect.output).toBe(winner.output)
    })

    it('refuses to complete an effect that has no intent', async () => {
      await expect(ctx.store().completeEffect({ runId: 'fx', callId: 'ghost', status: 'succeeded', output: 1 })).rejects.toMatchObject({
        code: 'invalid_argument',
      })
    })

    it('marks an effect started once (a compare-and-set), and a started effect still takes its first outcome', async () => {
      const store = ctx.store()
      await store.recordEffectIntent(intent)
      expect((await store.startEffect('fx', 'call-1')).status).toBe('started')
      await expect(store.startEffect('fx', 'call-1')).rejects.toMatchObject({ code: 'effect_started', status: 'started', callId: 'call-1' })
      const done = await store.completeEffect({ runId: 'fx', callId: 'call-1', status: 'succeeded', output: 1 })
      expect(done).toMatchObject({ recorded: true, effect: { status: 'succeeded', output: 1 } })
      await expect(store.startEffect('fx', 'call-1')).rejects.toMatchObject({ code: 'effect_started', status: 'succeeded' })
      await expect(store.startEffect('fx', 'nope')).rejects.toMatchObject({ code: 'invalid_argument' })
    })

    it('of many concurrent starts of one effect exactly one succeeds', async () => {
      const store = ctx.store()
      await store.recordEffectIntent({ ...intent, callId: 'raced' })
      const starts = await Promise.allSettled(Array.from({ length: 5 }, () => store.startEffect('fx', 'raced')))
      expect(starts.filter((start) => start.status === 'fulfilled')).toHaveLength(1)
      for (const start of starts) if (start.status === 'rejected') expect(start.reason).toMatchObject({ code: 'effect_started' })
    })

    it('a write whose effect start finds the effect started writes nothing of the batch', async () => {
      const store = ctx.store()
      await store.recordEffectIntent({ ...intent, callId: 'once' })
      await store.write({ runId: 'fx', starts: ['once'] })
      const before = await store.listCheckpoints({ runId: 'fx' })
      await expect(store.write({ runId: 'fx', starts: ['once'], checkpoints: [{ runId: 'fx', kind: 'demo', phase: 'p', payload: 1 }] })).rejects.toMatchObject({
        code: 'effect_started',
      })
      expect(await store.listCheckpoints({ runId: 'fx' })).toEqual(before)
    })

    it('records many outcomes of one write, the first outcome of a repeated call winning', async () => {
      const store = ctx.store()
      await store.write({ runId: 'fx', intents: ['a', 'b', 'c'].map((callId) => ({ ...intent, callId, idempotencyKey: `fx:${callId}` })) })
      await store.write({ runId: 'fx', completions: [{ runId: 'fx', callId: 'c', status: 'failed', output: 'early' }] })
      await store.write({
        runId: 'fx',
        completions: [
          { runId: 'fx', callId: 'a', status: 'succeeded', output: { n: 1 } },
          { runId: 'fx', callId: 'b', status: 'failed', output: 'no' },
          { runId: 'fx', callId: 'c', status: 'succeeded', output: 'late' },
        ],
      })
      await store.write({
        runId: 'fx',
        intents: [{ ...intent, callId: 'd' }, { ...intent, callId: 'd' }],
        completions: [
          { runId: 'fx', callId: 'd', status: 'succeeded', output: 'first' },
          { runId: 'fx', callId: 'd', status: 'failed', output: 'second' },
        ],
      })
      const effects = await store.listEffects('fx')
      expect(effects.map((e) => [e.callId, e.status, e.output, e.attempts])).toEqual([
        ['a', 'succeeded', { n: 1 }, 1],
        ['b', 'failed', 'no', 1],
        ['c', 'failed', 'early', 1],
        ['d', 'succeeded', 'first', 2],
      ])
    })

    it('commits several checkpoints with effect intents and outcomes in one write', async () => {
      const store = ctx.store()
      await store.recordEffectIntent({ ...intent, callId: 'earlier' })
      const ids = await store.write({
        runId: 'fx',
        checkpoints: [
          { runId: 'fx', kind: 'test', phase: 'one', payload: { messages: conversation(2) } },
          { runId: 'fx', kind: 'test', phase: 'two', payload: { messages: conversation(3) } },
          { runId: 'fx', kind: 'test', phase: 'three', payload: { messages: conversation(5) } },
        ],
        intents: [intent, { ...intent, callId: 'call-2' }],
        completions: [{ runId: 'fx', callId: 'earlier', status: 'failed', output: 'boom' }],
      })
      expect(ids).toHaveLength(3)
      const history = await store.listCheckpoints({ runId: 'fx' })
      expect(history.map((cp) => [cp.phase, cp.seq])).toEqual([['three', 3], ['two', 2], ['one', 1]])
      expect((await store.load(ids[1]!)).parentId).toBe(ids[0])
      for (const [i, id] of ids.entries()) expect((await store.load(id)).payload).toEqual({ messages: conversation([2, 3, 5][i]!) })
      expect((await store.listEffects('fx')).map((e) => [e.callId, e.status])).toEqual([['earlier', 'failed'], ['call-1', 'pending'], ['call-2', 'pending']])
      const effectsOnly = await store.write({ runId: 'fx', completions: [{ runId: 'fx', callId: 'call-1', status: 'succeeded', output: 2 }] })
      expect(effectsOnly).toEqual([])
      expect((await store.getEffect('fx', 'call-1'))?.status).toBe('succeeded')
      const next = await store.save({ runId: 'fx', kind: 'test', phase: 'four', payload: { messages: conversation(6) } })
      expect(await store.load(next)).toMatchObject({ seq: 4, parentId: ids[2], payload: { messages: conversation(6) } })
      await expect(store.write({ runId: 'fx', checkpoints: [{ runId: 'other', kind: 'test', phase: 'x', payload: 1 }] })).rejects.toMatchObject({ code: 'invalid_argument' })
      const decreasing = [
        { runId: 'fx', seq: 9, kind: 'test', phase: 'x', payload: 1 },
        { runId: 'fx', seq: 8, kind: 'test', phase: 'x', payload: 2 },
      ]
      await expect(store.write({ runId: 'fx', checkpoints: decreasing })).rejects.toMatchObject({ code: 'invalid_argument' })
      const twice = [
        { id: 'same', runId: 'fx', kind: 'test', phase: 'x', payload: 1 },
        { id: 'same', runId: 'fx', kind: 'test', phase: 'x', payload: 2 },
      ]
      await expect(store.write({ runId: 'fx', checkpoints: twice })).rejects.toMatchObject({ code: 'invalid_argument' })
      await expect(store.save({ runId: 'fx', kind: 'test', phase: 'a\u0000b', payload: 1 })).rejects.toMatchObject({ code: 'invalid_argument' })
      expect((await store.getRun('fx'))?.lastSeq).toBe(4)
    })

    it('lists a run’s effects in start order', async () => {
      const store = ctx.store()
      for (const callId of ['a', 'b', 'c']) await store.recordEffectIntent({ ...intent, callId })
      await store.recordEffectIntent({ ...intent, runId: 'fx-other', callId: 'z' })
      expect((await store.listEffects('fx')).map((e) => e.callId)).toEqual(['a', 'b', 'c'])
    })
  })

  describe('retention', () => {
    it('prune keeps the latest, terminal checkpoints and effects of unfinished runs', async () => {
      const store = ctx.store()
      const ids: string[] = []
      for (let i = 0; i < 6; i++) {
        ids.push(await store.save({ runId: 'pr', kind: 'test', phase: 'p', terminal: i === 1, payload: { messages: conversation(i + 1) } }))
      }
      await store.recordEffectIntent({ runId: 'pr', callId: 'c1', name: 't', inputHash: 'h', idempotencyKey: 'k' })
      const result = await store.prune({ runId: 'pr', keepLast: 2 })
      expect(result).toEqual({ checkpointsDeleted: 3, effectsDeleted: 0 })
      expect((await store.listCheckpoints({ runId: 'pr' })).map((cp) => cp.id)).toEqual([ids[5], ids[4], ids[1]])
      expect((await store.getLatest({ runId: 'pr' }))?.payload).toEqual({ messages: conversation(6) })
      expect((await store.load(ids[1]!)).payload).toEqual({ messages: conversation(2) })
      expect(await store.listEffects('pr')).toHaveLength(1)
      const next = await store.save({ runId: 'pr', kind: 'test', phase: 'p', payload: { messages: conversation(7) } })
      expect((await store.load(next)).payload).toEqual({ messages: conversation(7) })
    })

    it('prune removes effects of finished runs and respects olderThan', async () => {
      const store = ctx.store()
      const old = Date.now() - 60_000
      await store.save({ runId: 'done', kind: 'test', phase: 'p', createdAt: old, payload: 1 })
      await store.save({ runId: 'done', kind: 'test', phase: 'p', createdAt: old, payload: 2 })
      await store.save({ runId: 'done', kind: 'test', phase: 'p', payload: 3 })
      await store.recordEffectIntent({ runId: 'done', callId: 'c1', name: 't', inputHash: 'h', idempotencyKey: 'k' })
      await store.updateRun('done', { status: 'completed' })
      expect(await store.prune({ olderThan: Date.now() - 30_000 })).toEqual({ checkpointsDeleted: 2, effectsDeleted: 0 })
      expect(await store.prune({})).toEqual({ checkpointsDeleted: 0, effectsDeleted: 1 })
      expect((await store.getLatest({ runId: 'done' }))?.payload).toBe(3)
    })
  })

  describe('reopening', () => {
    it.skipIf(ctx.factory.persistent === false)('keeps everything across a reopen and continues the run', async () => {
      // Skipped for in-memory stores: their data ends with the handle.
      let store = ctx.store()
      for (let i = 1; i <= 5; i++) await store.save({ runId: 'again', kind: 'test', phase: 'p', payload: { messages: conversation(i) } })
      await store.recordEffectIntent({ runId: 'again', callId: 'c', name: 't', inputHash: 'h', idempotencyKey: 'k' })
      store = await ctx.reopen()
      expect((await store.getLatest({ runId: 'again' }))?.payload).toEqual({ messages: conversation(5) })
      const id = await store.save({ runId: 'again', kind: 'test', phase: 'p', payload: { messages: conversation(6) } })
      expect(await store.load(id)).toMatchObject({ seq: 6, payload: { messages: conversation(6) } })
      expect(await store.getEffect('again', 'c')).toMatchObject({ status: 'pending' })
      expect(await store.listCheckpoints({ runId: 'again' })).toHaveLength(6)
    })
  })
}
