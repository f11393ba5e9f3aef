import { describe, expect, it } from 'vitest'
import { CheckpointCorruptionError, CheckpointError, CheckpointNotFoundError, InvalidArgumentError } from '../../core/errors.js'
import { conversation, type SuiteContext } from './suite-context.js'

/** Round trips, ordering, listing, deletion and forks. */
export function checkpointCases(ctx: SuiteContext): void {
  describe('round trips', () => {
    it('returns exactly what was saved, tagged values included', async () => {
      const store = ctx.store()
      const payload = {
        at: new Date('2026-03-04T05:06:07.089Z'),
        counts: new Map<string, bigint>([['a', 1n], ['b', 2n ** 70n]]),
        seen: new Set(['x', 'y']),
        bytes: new Uint8Array([1, 2, 3, 255]),
        nested: { list: [1, 'two', null, true, { deep: [new Date(0)] }], '~': 'user data' },
        messages: conversation(3),
      }
      const id = await store.save({ runId: 'rt', kind: 'test', phase: 'p', payload, metadata: { step: 1, labels: ["a", "b"] } })
      const loaded = await store.load(id)
      expect(loaded.payload).toEqual(payload)
      expect(loaded).toMatchObject({ id, runId: 'rt', kind: 'test', phase: 'p', seq: 1, parentId: null, terminal: false, workflowName: null })
      expect(loaded.metadata).toEqual({ step: 1, labels: ["a", "b"] })
      expect(await store.getLatest({ runId: 'rt' })).toEqual(loaded)
    })

    it('hands out copies: mutating what was saved or loaded changes nothing stored', async () => {
      const store = ctx.store()
      const payload = { items: [{ n: 1 }] }
      const id = await store.save({ runId: 'copy', kind: 'test', phase: 'p', payload })
      payload.items[0]!.n = 99
      const first = await store.load<{ items: { n: number }[] }>(id)
      first.payload.items[0]!.n = 42
      expect((await store.load<{ items: { n: number }[] }>(id)).payload.items[0]!.n).toBe(1)
    })

    it('round-trips a 5 MB payload', async () => {
      const store = ctx.store()
      const big = { blob: 'x'.repeat(5 * 1024 * 1024), messages: conversation(50) }
      const id = await store.save({ runId: 'big', kind: 'test', phase: 'p', payload: big })
      const loaded = await store.load<typeof big>(id)
      expect(loaded.payload.blob.length).toBe(big.blob.length)
      expect(loaded.payload).toEqual(big)
    })

    it('reconstructs every checkpoint of a growing, edited and shrinking conversation', async () => {
      const store = ctx.store()
      const states = [
        conversation(4),
        conversation(9),
        conversation(9),
        [...conversation(8), { role: 'assistant', content: [{ text: 'edited'.padEnd(1200, '!') }] }],
        conversation(3),
        conversation(12),
        [],
      ]
      const ids: string[] = []
      for (const messages of states) ids.push(await store.save({ runId: 'grow', kind: 'test', phase: 'p', payload: { messages, extra: { messages } } }))
      for (const [i, id] of ids.entries()) {
        expect((await store.load(id)).payload).toEqual({ messages: states[i], extra: { messages: states[i] } })
      }
      // All at once, in the order asked for: the same records as one by one.
      const order = [...ids.keys()].reverse()
      const many = await store.loadMany(order.map((i) => ids[i]!))
      expect(many.map((record) => record.id)).toEqual(order.map((i) => ids[i]))
      for (const [k, i] of order.entries()) expect(many[k]).toEqual(await store.load(ids[i]!))
      await expect(store.loadMany([ids[0]!, 'no-such-checkpoint'])).rejects.toBeInstanceOf(CheckpointNotFoundError)
    })

    it('refuses an unserializable payload with its path and writes nothing', async () => {
      const store = ctx.store()
      await expect(store.save({ runId: 'bad', kind: 'test', phase: 'p', payload: { state: { client: () => 1 } } })).rejects.toThrow(
        'payload.state.client: a function cannot be checkpointed',
      )
      expect(await store.getLatest({ runId: 'bad' })).toBeUndefined()
    })

    it('rejects ids that are not safe names', async () => {
      const store = ctx.store()
      for (const runId of ['../escape', 'a/b', '..', '', '.hidden', 'a\\b', 'x\u0000y']) {
        await expect(store.save({ runId, kind: 'test', phase: 'p', payload: 1 })).rejects.toMatchObject({ code: 'invalid_argument' })
      }
      await expect(store.load('../../etc/passwd')).rejects.toMatchObject({ code: 'invalid_argument' })
    })

    it('throws CheckpointNotFoundError for an unknown id', async () => {
      await expect(ctx.store().load('no-such-checkpoint')).rejects.toBeInstanceOf(CheckpointNotFoundError)
    })
  })

  describe('ordering', () => {
    it('assigns increasing seqs, chains parents and keeps the latest monotonic', async () => {
      const store = ctx.store()
      const a = await store.save({ runId: 'ord', kind: 'test', phase: 'one', payload: 1 })
      const b = await store.save({ runId: 'ord', kind: 'test', phase: 'two', payload: 2 })
      const c = await store.save({ runId: 'ord', seq: 10, kind: 'test', phase: 'three', payload: 3 })
      expect((await store.load(b)).parentId).toBe(a)
      expect((await store.load(c)).parentId).toBe(b)
      expect((await store.getLatest({ runId: 'ord' }))?.id).toBe(c)
      for (const seq of [10, 9, 1]) {
        const error = await store.save({ runId: 'ord', seq, kind: 'test', phase: 'late', payload: 0 }).catch((err: unknown) => err)
        expect(error).toBeInstanceOf(CheckpointError)
        expect((error as CheckpointError).code).toBe('seq_conflict')
      }
      expect((await store.getLatest({ runId: 'ord' }))?.id).toBe(c)
      const d = await store.save({ runId: 'ord', kind: 'test', phase: 'four', payload: 4 })
      expect((await store.load(d)).seq).toBe(11)
      expect((await store.getRun('ord'))?.lastSeq).toBe(11)
    })

    it('never moves the latest backwards after the latest is deleted: a resume is refused, the seq never reused', async () => {
      const store = ctx.store()
      await store.save({ runId: 'del', kind: 'test', phase: 'p', payload: 1 })
      const second = await store.save({ runId: 'del', kind: 'test', phase: 'p', payload: 2 })
      expect(await store.delete(second)).toBe(true)
      // What a resume reads refuses the rolled-back run; its history says so too.
      await expect(store.getLatest({ runId: 'del' })).rejects.toBeInstanceOf(CheckpointCorruptionError)
      await expect(store.listCheckpoints({ runId: 'del' })).rejects.toBeInstanceOf(CheckpointCorruptionError)
      expect((await store.listCheckpoints({ runId: 'del', verify: false })).map((cp) => cp.seq)).toEqual([1])
      // A caller that saves on explicitly continues the run, never at a seq already used.
      await expect(store.save({ runId: 'del', seq: 2, kind: 'test', phase: 'p', payload: 3 })).rejects.toMatchObject({ code: 'seq_conflict' })
      const third = await store.save({ runId: 'del', kind: 'test', phase: 'p', payload: 3 })
      expect((await store.load(third)).seq).toBe(3)
      expect((await store.getLatest({ runId: 'del' }))?.id).toBe(third)
    })

    it('rejects a duplicate checkpoint id', async () => {
      const store = ctx.store()
      await store.save({ id: 'fixed-id', runId: 'dup', kind: 'test', phase: 'p', payload: 1 })
      await expect(store.save({ id: 'fixed-id', runId: 'dup', kind: 'test', phase: 'p', payload: 2 })).rejects.toBeInstanceOf(InvalidArgumentError)
      expect((await store.load('fixed-id')).payload).toBe(1)
    })

    it('loses nothing when one process saves to a run from many tasks at once', async () => {
      const store = ctx.store()
      await Promise.all(
        Array.from({ length: 40 }, (_, i) => store.save({ runId: 'busy', kind: 'test', phase: 'p', payload: { i, messages: conversation(i % 5) } })),
      )
      const history = await store.listCheckpoints({ runId: 'busy' })
      expect(history.map((cp) => cp.seq)).toEqual(Array.from({ length: 40 }, (_, i) => 40 - i))
      const seen = new Set<number>()
      for (const cp of history) seen.add((await store.load<{ i: number }>(cp.id)).payload.i)
      expect(seen.size).toBe(40)
    })
  })

  describe('listing', () => {
    it('lists newest first with limit and before cursor, headers only', async () => {
      const store = ctx.store()
      const ids: string[] = []
      for (let i = 0; i < 7; i++) ids.push(await store.save({ runId: 'list', kind: 'test', phase: `p${i}`, payload: { big: conversation(2) } }))
      await store.save({ runId: 'other', kind: 'test', phase: 'x', payload: 0 })
      const all = await store.listCheckpoints({ runId: 'list' })
      expect(all.map((cp) => cp.id)).toEqual([...ids].reverse())
      expect(all[0]).not.toHaveProperty('payload')
      const first = await store.listCheckpoints({ runId: 'list', limit: 3 })
      const second = await store.listCheckpoints({ runId: 'list', limit: 3, before: first[2]!.id })
      const third = await store.listCheckpoints({ runId: 'list', limit: 3, before: second[2]!.id })
      expect([...first, ...second, ...third].map((cp) => cp.id)).toEqual(all.map((cp) => cp.id))
      expect(third).toHaveLength(1)
      await expect(store.listCheckpoints({ limit: 0 })).rejects.toMatchObject({ code: 'invalid_argument' })
    })

    it('finds checkpoints and the latest by workflow name across runs', async () => {
      const store = ctx.store()
      const t0 = Date.now()
      await store.save({ runId: 'wf-a', kind: 'workflow', phase: 'superstep', workflowName: 'squares', createdAt: t0, payload: 1 })
      await store.save({ runId: 'wf-b', kind: 'workflow', phase: 'superstep', workflowName: 'squares', createdAt: t0 + 10, payload: 2 })
      const last = await store.save({ runId: 'wf-a', kind: 'workflow', phase: 'superstep', workflowName: 'squares', createdAt: t0 + 20, payload: 3 })
      await store.save({ runId: 'wf-c', kind: 'workflow', phase: 'superstep', workflowName: 'cubes', createdAt: t0 + 30, payload: 4 })
      expect((await store.getLatest({ workflowName: 'squares' }))?.id).toBe(last)
      expect((await store.getLatest({ workflowName: 'squares' }))?.payload).toBe(3)
      const listed = await store.listCheckpoints({ workflowName: 'squares' })
      expect(listed.map((cp) => cp.createdAt - t0)).toEqual([20, 10, 0])
      expect(await store.listCheckpoints({ workflowName: 'squares', limit: 1, before: listed[0]!.id })).toEqual([listed[1]])
      expect(await store.getLatest({ workflowName: 'none' })).toBeUndefined()
      expect((await store.getRun('wf-b'))?.workflowName).toBe('squares')
    })

    it('creates, updates and lists runs with filters', async () => {
      const store = ctx.store()
      const run = await store.createRun({ runId: 'r-1', name: 'research', threadId: 't-1', configSignature: 'sig', metadata: { owner: 'ana' } })
      expect(run).toMatchObject({ runId: 'r-1', status: 'running', name: 'research', threadId: 't-1', lastSeq: 0, metadata: { owner: 'ana' } })
      await expect(store.createRun({ runId: 'r-1' })).rejects.toMatchObject({ code: 'run_exists' })
      await store.createRun({ runId: 'r-2', threadId: 't-1' })
      await store.createRun({ runId: 'r-3', workflowName: 'wf' })
      const updated = await store.updateRun('r-2', { status: 'completed', metadata: { done: true } })
      expect(updated).toMatchObject({ status: 'completed', metadata: { done: true } })
      expect(updated.updatedAt).toBeGreaterThanOrEqual(updated.createdAt)
      await expect(store.updateRun('r-9', { status: 'failed' })).rejects.toMatchObject({ code: 'run_not_found' })
      await expect(store.updateRun('r-1', { status: 'exploded' as never })).rejects.toMatchObject({ code: 'invalid_argument' })
      expect((await store.listRuns({ threadId: 't-1' })).map((r) => r.runId).sort()).toEqual(['r-1', 'r-2'])
      expect((await store.listRuns({ status: 'completed' })).map((r) => r.runId)).toEqual(['r-2'])
      expect((await store.listRuns({ status: ['completed', 'running'] })).length).toBe(3)
      expect((await store.listRuns({ workflowName: 'wf' })).map((r) => r.runId)).toEqual(['r-3'])
      const all = await store.listRuns()
      const paged = [...(await store.listRuns({ limit: 2 })), ...(await store.listRuns({ limit: 2, before: all[1]!.runId }))]
      expect(paged.map((r) => r.runId)).toEqual(all.map((r) => r.runId))
    })
  })

  describe('deletion and forks', () => {
    it('deletes one checkpoint, and a whole run with its effects', async () => {
      const store = ctx.store()
      const a = await store.save({ runId: 'gone', kind: 'test', phase: 'p', payload: { messages: conversation(3) } })
      const b = await store.save({ runId: 'gone', kind: 'test', phase: 'p', payload: { messages: conversation(5) } })
      await store.save({ runId: 'kept', kind: 'test', phase: 'p', payload: 1 })
      await store.recordEffectIntent({ runId: 'gone', callId: 'c', name: 't', inputHash: 'h', idempotencyKey: 'k' })
      expect(await store.delete(a)).toBe(true)
      expect(await store.delete(a)).toBe(false)
      await expect(store.load(a)).rejects.toBeInstanceOf(CheckpointNotFoundError)
      expect((await store.load(b)).payload).toEqual({ messages: conversation(5) })
      expect(await store.deleteRun('gone')).toBe(true)
      expect(await store.deleteRun('gone')).toBe(false)
      expect(await store.getRun('gone')).toBeUndefined()
      expect(await store.getLatest({ runId: 'gone' })).toBeUndefined()
      expect(await store.listEffects('gone')).toEqual([])
      await expect(store.load(b)).rejects.toBeInstanceOf(CheckpointNotFoundError)
      expect(await store.getLatest({ runId: 'kept' })).toBeDefined()
      const again = await store.save({ runId: 'gone', kind: 'test', phase: 'p', payload: { messages: conversation(2) } })
      expect((await store.load(again)).seq).toBe(1)
    })

    it('forks a run from any checkpoint into a new run that outlives its source', async () => {
      const store = ctx.store()
      await store.createRun({ runId: 'src', name: 'agent', threadId: 'th' })
      const first = await store.save({ runId: 'src', kind: 'test', phase: 'p', payload: { messages: conversation(4) } })
      await store.save({ runId: 'src', kind: 'test', phase: 'p', payload: { messages: conversation(6) } })
      const fork = await store.fork({ checkpointId: first, runId: 'forked' })
      expect(fork).toMatchObject({ runId: 'forked', parentId: first, seq: 1, payload: { messages: conversation(4) } })
      expect(fork.metadata).toMatchObject({ forkedFrom: { runId: 'src', checkpointId: first } })
      expect(await store.getRun('forked')).toMatchObject({ name: 'agent', threadId: 'th' })
      const next = await store.save({ runId: 'forked', kind: 'test', phase: 'p', payload: { messages: conversation(5) } })
      await store.deleteRun('src')
      expect((await store.load(next)).payload).toEqual({ messages: conversation(5) })
      expect((await store.load(fork.id)).payload).toEqual({ messages: conversation(4) })
    })
  })
}
