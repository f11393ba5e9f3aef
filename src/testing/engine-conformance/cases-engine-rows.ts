import { describe, expect, it } from 'vitest'
import type { CommitRequest } from '../../store/engine/storage-engine.js'
import type { EngineContext } from './engine-context.js'
import { checkpointRow, commitOne, effectRow, runRow } from './rows.js'

/** Cases on the engine's own interface: rows and strings in, the same rows and strings out. */
export function engineRowCases(ctx: EngineContext): void {
  describe('rows', () => {
    it('a commit creates its run, stores rows and list items, and reads them back in order', async () => {
      const engine = ctx.engine()
      const appends = [{ listId: 'L', expectedLength: 0, items: ['"a"', '"b"'] }]
      expect(await engine.commit(commitOne({ runId: 'r1', id: 'c1', seq: 1, appends }))).toEqual({ ok: true })
      const more = [{ listId: 'L', expectedLength: 2, items: ['"c"'] }]
      expect(await engine.commit(commitOne({ runId: 'r1', id: 'c2', seq: 2, appends: more }))).toEqual({ ok: true })
      expect(await engine.getRun('r1')).toMatchObject({ runId: 'r1', lastSeq: 2, status: 'running' })
      expect(await engine.getCheckpoints(['c1'])).toEqual([checkpointRow({ id: 'c1', runId: 'r1', seq: 1 }, appends)])
      expect((await engine.getLatest({ runId: 'r1' }))?.id).toBe('c2')
      expect(await engine.readLists('r1', [{ id: 'L', n: 2 }, { id: 'L', n: 3 }])).toEqual([['"a"', '"b"'], ['"a"', '"b"', '"c"']])
      expect(await engine.readLists('r1', [{ id: 'L', from: 1, n: 3 }, { id: 'L', from: 2, n: 2 }])).toEqual([['"b"', '"c"'], []])
      const headers = await engine.listCheckpoints({ runId: 'r1' })
      expect(headers.map((row) => row.id)).toEqual(['c2', 'c1'])
      expect(headers[0]).not.toHaveProperty('body')
      expect((await engine.listCheckpoints({ runId: 'r1', before: 'c2' })).map((row) => row.id)).toEqual(['c1'])
      expect(await engine.listCheckpoints({ runId: 'r1', rows: true, limit: 1 })).toEqual([checkpointRow({ id: 'c2', runId: 'r1', seq: 2 }, more)])
      expect((await engine.getCheckpoints(['c2', 'nope', 'c1'])).map((row) => row.id).sort()).toEqual(['c1', 'c2'])
    })

    it('a commit writes nothing when the seq is stale, an id is taken or a list has moved on', async () => {
      const engine = ctx.engine()
      expect(await engine.commit(commitOne({ runId: 'run', id: 'c1', seq: 1, appends: [{ listId: 'L', expectedLength: 0, items: ['"a"'] }] }))).toEqual({ ok: true })
      const appendB = [{ listId: 'L', expectedLength: 1, items: ['"b"'] }]
      const intents = [effectRow({ runId: 'run', callId: 'e1' })]
      expect(await engine.commit(commitOne({ runId: 'run', id: 'c2', seq: 1, appends: appendB, intents }))).toEqual({ ok: false, reason: 'stale_seq', lastSeq: 1 })
      expect(await engine.commit(commitOne({ runId: 'run', id: 'c1', seq: 2, appends: appendB, intents }))).toEqual({ ok: false, reason: 'duplicate_id' })
      const conflicting = [...appendB, { listId: 'L2', expectedLength: 3, items: ['"x"'] }]
      expect(await engine.commit(commitOne({ runId: 'run', id: 'c2', seq: 2, appends: conflicting, intents }))).toEqual({ ok: false, reason: 'list_conflict' })
      const two = commitOne({ runId: 'run', id: 'c2', seq: 2, appends: appendB, intents })
      const taken = { ...two, rows: [...two.rows, checkpointRow({ id: 'c1', runId: 'run', seq: 3 }, [])] }
      expect(await engine.commit(taken)).toEqual({ ok: false, reason: 'duplicate_id' })
      // A failed first commit does not leave its run behind.
      expect(await engine.commit(commitOne({ runId: 'other', id: 'c1', seq: 1 }))).toEqual({ ok: false, reason: 'duplicate_id' })
      expect(await engine.getRun('other')).toBeUndefined()
      expect(await engine.getRun('run')).toMatchObject({ lastSeq: 1 })
      expect(await engine.readLists('run', [{ id: 'L', n: 2 }])).toEqual([['"a"']])
      expect(await engine.listEffects('run', ['e1'])).toEqual([])
      expect(await engine.commit(commitOne({ runId: 'run', id: 'c2', seq: 2, appends: appendB, intents }))).toEqual({ ok: true })
      expect(await engine.readLists('run', [{ id: 'L', n: 2 }])).toEqual([['"a"', '"b"']])
      expect(await engine.listEffects('run', ['e1'])).toMatchObject([{ status: 'pending', attempts: 1 }])
    })

    it('deleteCheckpoints drops the list items no remaining checkpoint of the run references', async () => {
      const engine = ctx.engine()
      await engine.commit(commitOne({ runId: 'r1', id: 'c1', seq: 1, appends: [{ listId: 'L', expectedLength: 0, items: ['1', '2'] }] }))
      await engine.commit(commitOne({ runId: 'r1', id: 'c2', seq: 2, appends: [{ listId: 'L', expectedLength: 2, items: ['3', '4'] }, { listId: 'M', expectedLength: 0, items: ['m'] }] }))
      await engine.commit(commitOne({ runId: 'r2', id: 'd1', seq: 1, appends: [{ listId: 'L', expectedLength: 0, items: ['x'] }] }))
      expect(await engine.deleteCheckpoints('r1', ['c2'])).toBe(1)
      expect(await engine.getCheckpoints(['c2'])).toEqual([])
      expect(await engine.readLists('r1', [{ id: 'L', n: 4 }, { id: 'M', n: 1 }])).toEqual([['1', '2'], []])
      expect(await engine.deleteCheckpoints('r1', ['c1', 'nope'])).toBe(1)
      expect(await engine.readLists('r1', [{ id: 'L', n: 4 }])).toEqual([[]])
      // Another run's lists are untouched, and the emptied run takes new appends from zero.
      expect(await engine.readLists('r2', [{ id: 'L', n: 1 }])).toEqual([['x']])
      expect(await engine.commit(commitOne({ runId: 'r1', id: 'c3', seq: 3, appends: [{ listId: 'L', expectedLength: 0, items: ['y'] }] }))).toEqual({ ok: true })
    })

    it('runs: insert once, patch, list newest first with filters and a cursor, delete with all their rows', async () => {
      const engine = ctx.engine()
      expect(await engine.insertRun(runRow({ runId: 'a', createdAt: 1, workflowName: 'wf' }))).toBe(true)
      expect(await engine.insertRun(runRow({ runId: 'a', createdAt: 5 }))).toBe(false)
      await engine.insertRun(runRow({ runId: 'b', createdAt: 2, status: 'paused' }))
      await engine.insertRun(runRow({ runId: 'c', createdAt: 3, threadId: 't' }))
      expect((await engine.listRuns({})).map((run) => run.runId)).toEqual(['c', 'b', 'a'])
      expect((await engine.listRuns({ before: 'c', limit: 1 })).map((run) => run.runId)).toEqual(['b'])
      expect((await engine.listRuns({ status: ['paused', 'completed'] })).map((run) => run.runId)).toEqual(['b'])
      expect((await engine.listRuns({ workflowName: 'wf' })).map((run) => run.runId)).toEqual(['a'])
      expect((await engine.listRuns({ threadId: 't' })).map((run) => run.runId)).toEqual(['c'])
      expect(await engine.updateRun('b', { status: 'completed', metadata: '{"k":1}', updatedAt: 9 })).toMatchObject({ status: 'completed', metadata: '{"k":1}', updatedAt: 9 })
      expect(await engine.updateRun('nope', { status: 'completed', updatedAt: 9 })).toBeUndefined()
      await engine.commit(commitOne({ runId: 'a', id: 'a1', seq: 1, appends: [{ listId: 'L', expectedLength: 0, items: ['1'] }], intents: [effectRow({ runId: 'a', callId: 'e' })] }))
      expect(await engine.deleteRun('a')).toBe(true)
      expect(await engine.deleteRun('a')).toBe(false)
      expect(await engine.getCheckpoints(['a1'])).toEqual([])
      expect(await engine.listEffects('a')).toEqual([])
      expect(await engine.readLists('a', [{ id: 'L', n: 1 }])).toEqual([[]])
    })

    it("run digests: a new row's digest and seal are stored as given, a swap replaces the digest only while the stored one is as expected, a commit moves the seal with the last seq", async () => {
      const engine = ctx.engine()
      expect(await engine.insertRun(runRow({ runId: 'd', digest: 'as-given', seal: 'seal-0' }))).toBe(true)
      expect(await engine.getRun('d')).toMatchObject({ digest: 'as-given', seal: 'seal-0' })
      // A swap that expects another digest writes nothing and says the row changed.
      expect(await engine.updateRun('d', { status: 'paused', updatedAt: 5, swap: { ifDigest: 'other', digest: 'paused' } })).toEqual({ outcome: 'changed' })
      expect(await engine.getRun('d')).toMatchObject({ status: 'running', digest: 'as-given' })
      expect(await engine.updateRun('d', { status: 'paused', metadata: '{"k":2}', updatedAt: 5, swap: { ifDigest: 'as-given', digest: 'paused' } })).toMatchObject({ status: 'paused', digest: 'paused' })
      expect(await engine.updateRun('d', { updatedAt: 6 })).toMatchObject({ digest: 'paused' })
      const commit = commitOne({ runId: 'd', id: 'd1', seq: 1 })
      expect(await engine.commit({ ...commit, run: { ...commit.run, seal: 'seal-1' } })).toEqual({ ok: true })
      expect(await engine.getRun('d')).toMatchObject({ lastSeq: 1, seal: 'seal-1', digest: 'paused' })
      // An effects-only commit leaves the seal; a run patch in a commit swaps the digest, or refuses the whole commit.
      const effectsOnly = (ifDigest: string): CommitRequest => ({
        rows: [],
        appends: [{ listId: 'log', expectedLength: 0, items: ['"x"'] }],
        run: runRow({ runId: 'd', seal: 'seal-0' }),
        runPatch: { status: 'running', updatedAt: 7, swap: { ifDigest, digest: 'running' } },
      })
      expect(await engine.commit(effectsOnly('stale'))).toEqual({ ok: false, reason: 'run_changed' })
      expect(await engine.readLists('d', [{ id: 'log', n: 1 }])).toEqual([[]])
      expect(await engine.commit(effectsOnly('paused'))).toEqual({ ok: true })
      expect(await engine.getRun('d')).toMatchObject({ lastSeq: 1, status: 'running', seal: 'seal-1', digest: 'running' })
      // A commit that creates its run stores the run's digest and seal as given.
      const created = commitOne({ runId: 'e', id: 'e1', seq: 1 })
      await engine.commit({ ...created, run: { ...created.run, digest: 'new-run', seal: 'seal-e1' } })
      expect(await engine.getRun('e')).toMatchObject({ lastSeq: 1, digest: 'new-run', seal: 'seal-e1' })
    })

    it('effects ride in commits: an intent counts attempts, a start marks it started once, the first outcome wins', async () => {
      const engine = ctx.engine()
      await engine.insertRun(runRow({ runId: 'r' }))
      const effects = (parts: NonNullable<CommitRequest['effects']>): CommitRequest => ({ rows: [], appends: [], run: runRow({ runId: 'r' }), effects: parts })
      expect(await engine.commit(effects({ intents: [effectRow({ runId: 'r', callId: 'e1', startedAt: 2 })] }))).toEqual({ ok: true })
      expect(await engine.commit(effects({ intents: [effectRow({ runId: 'r', callId: 'e1', startedAt: 2 }), effectRow({ runId: 'r', callId: 'e0', startedAt: 1 })] }))).toEqual({ ok: true })
      expect(await engine.listEffects('r', ['e1'])).toMatchObject([{ attempts: 2, status: 'pending' }])
      expect(await engine.commit(effects({ starts: ['e1'] }))).toEqual({ ok: true })
      expect(await engine.commit(effects({ starts: ['e1'] }))).toEqual({ ok: false, reason: 'effect_not_pending', callId: 'e1', status: 'started' })
      expect(await engine.commit(effects({ starts: ['nope'] }))).toEqual({ ok: false, reason: 'effect_not_pending', callId: 'nope', status: null })
      const done = { runId: 'r', callId: 'e1', status: 'succeeded' as const, output: '"ok"', outputHash: 'h1', completedAt: 5 }
      expect(await engine.commit(effects({ completions: [done] }))).toEqual({ ok: true })
      expect(await engine.commit(effects({ completions: [{ ...done, status: 'failed', output: '"late"' }] }))).toEqual({ ok: true })
      expect(await engine.listEffects('r', ['e1', 'nope'])).toMatchObject([{ status: 'succeeded', output: '"ok"', completedAt: 5 }])
      // An intent and its outcome in one commit; a start of an intent of the same commit.
      expect(await engine.commit(effects({ intents: [effectRow({ runId: 'r', callId: 'e2', startedAt: 3 })], starts: ['e2'], completions: [{ ...done, callId: 'e2' }] }))).toEqual({ ok: true })
      expect((await engine.listEffects('r')).map((row) => [row.callId, row.status])).toEqual([['e0', 'pending'], ['e1', 'succeeded'], ['e2', 'succeeded']])
      expect(await engine.deleteEffects('r')).toBe(3)
      expect(await engine.listEffects('r')).toEqual([])
    })

    it('loadRun reads the run, its newest checkpoints, the lists they refer to and its log', async () => {
      const engine = ctx.engine()
      const intents = [effectRow({ runId: 'r', callId: 'e1' })]
      await engine.commit(commitOne({ runId: 'r', id: 'c1', seq: 1, appends: [{ listId: 'L', expectedLength: 0, items: ['1'] }, { listId: 'run-log', expectedLength: 0, items: ['["started","e1"]'] }], intents }))
      await engine.commit(commitOne({ runId: 'r', id: 'c2', seq: 2, appends: [{ listId: 'L', expectedLength: 1, items: ['2'] }, { listId: 'M', expectedLength: 0, items: ['m'] }] }))
      await engine.commit(commitOne({ runId: 'r', id: 'c3', seq: 3 }))
      const read = await engine.loadRun('r', { recent: 2 })
      expect(read.run).toMatchObject({ runId: 'r', lastSeq: 3 })
      expect(read.checkpoints.map((row) => row.id)).toEqual(['c3', 'c2'])
      expect(read.checkpoints[1]).toEqual(checkpointRow({ id: 'c2', runId: 'r', seq: 2 }, [{ listId: 'L', expectedLength: 1, items: ['2'] }, { listId: 'M', expectedLength: 0, items: ['m'] }]))
      const lists = Object.fromEntries(read.lists.map((list) => [list.id, list.items]))
      expect(lists).toMatchObject({ L: ['1', '2'], M: ['m'], 'run-log': ['["started","e1"]'] })
      expect(await engine.loadRun('nope', { recent: 2 })).toMatchObject({ run: undefined, checkpoints: [] })
    })

    it('a second handle on the same data sees every commit', async () => {
      const engine = ctx.engine()
      const other = await ctx.openEngine()
      await engine.commit(commitOne({ runId: 'r1', id: 'c1', seq: 1, appends: [{ listId: 'L', expectedLength: 0, items: ['1'] }] }))
      expect(await other.commit(commitOne({ runId: 'r1', id: 'c2', seq: 1 }))).toEqual({ ok: false, reason: 'stale_seq', lastSeq: 1 })
      expect(await other.commit(commitOne({ runId: 'r1', id: 'c2', seq: 2, appends: [{ listId: 'L', expectedLength: 1, items: ['2'] }] }))).toEqual({ ok: true })
      expect((await engine.getLatest({ runId: 'r1' }))?.id).toBe('c2')
      expect(await engine.readLists('r1', [{ id: 'L', n: 2 }])).toEqual([['1', '2']])
    })
  })
}
