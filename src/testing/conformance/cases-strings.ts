import { describe, expect, it } from 'vitest'
import { InvalidArgumentError } from '../../core/errors.js'
import type { SuiteContext } from './suite-context.js'

/** Half of an emoji: a string no UTF-8 column can hold as it is. */
const CUT = 'plan \uD83D'
const WHOLE = 'plan \uD83D\uDE80'

/**
 * Every string a store keeps in a column of its own is refused at save when it holds a lone
 * UTF-16 surrogate, naming the field, so no backend stores a record it cannot read back;
 * well-formed text, and lone surrogates inside payloads, metadata and effect outputs (stored as
 * escaped JSON), round-trip on every backend.
 */
export function stringCases(ctx: SuiteContext): void {
  describe('strings', () => {
    const runFields = ['name', 'threadId', 'workflowName', 'configSignature'] as const
    for (const field of runFields) {
      it(`refuses a lone surrogate in run ${field} on create and on update, naming the field`, async () => {
        const store = ctx.store()
        await expectRefused(store.createRun({ runId: `cr-${field}`, [field]: CUT }), field)
        expect(await store.getRun(`cr-${field}`)).toBeUndefined()
        await store.createRun({ runId: `up-${field}` })
        await expectRefused(store.updateRun(`up-${field}`, { [field]: CUT }), field)
        await expectRefused(store.write({ runId: `up-${field}`, run: { [field]: CUT } }), field)
        expect((await store.getRun(`up-${field}`))?.[field]).toBeNull()
      })
    }

    for (const field of ['kind', 'phase', 'workflowName'] as const) {
      it(`refuses a lone surrogate in checkpoint ${field}, naming the field, and stores nothing`, async () => {
        const store = ctx.store()
        const input = { runId: `ck-${field}`, kind: 'test', phase: 'p', payload: 1, [field]: CUT }
        await expectRefused(store.save(input), field)
        expect(await store.listCheckpoints({ runId: `ck-${field}` })).toEqual([])
        expect(await store.getLatest({ runId: `ck-${field}` })).toBeUndefined()
      })
    }

    for (const field of ['callId', 'name', 'inputHash', 'idempotencyKey'] as const) {
      it(`refuses a lone surrogate in effect ${field}, naming the field`, async () => {
        const store = ctx.store()
        const intent = { runId: `fx-${field}`, callId: 'c1', name: 'tool', inputHash: 'h', idempotencyKey: 'k', [field]: CUT }
        await expectRefused(store.recordEffectIntent(intent), field)
        await expectRefused(store.write({ runId: `fx-${field}`, intents: [intent] }), field)
        expect(await store.listEffects(`fx-${field}`)).toEqual([])
      })
    }

    it('refuses a lone surrogate in the call id of an effect outcome or start', async () => {
      const store = ctx.store()
      await expectRefused(store.completeEffect({ runId: 'fx-out', callId: CUT, status: 'succeeded', output: 1 }), 'callId')
      await expectRefused(store.write({ runId: 'fx-out', starts: [CUT] }), 'callId')
    })

    it('round-trips well-formed text in every field, and lone surrogates inside payloads, metadata and outputs', async () => {
      let store = ctx.store()
      const run = { runId: 'text', name: WHOLE, threadId: WHOLE, workflowName: WHOLE, configSignature: WHOLE, metadata: { note: CUT } }
      await store.createRun(run)
      const id = await store.save({ runId: 'text', kind: WHOLE, phase: WHOLE, workflowName: WHOLE, metadata: { note: CUT }, payload: { messages: [CUT, WHOLE], text: CUT } })
      await store.recordEffectIntent({ runId: 'text', callId: WHOLE, name: WHOLE, inputHash: WHOLE, idempotencyKey: WHOLE })
      await store.completeEffect({ runId: 'text', callId: WHOLE, status: 'succeeded', output: { text: CUT } })
      if (ctx.factory.persistent !== false) store = await ctx.reopen()
      expect(await store.getRun('text')).toMatchObject(run)
      expect(await store.load(id)).toMatchObject({ kind: WHOLE, phase: WHOLE, workflowName: WHOLE, metadata: { note: CUT }, payload: { messages: [CUT, WHOLE], text: CUT } })
      expect((await store.listCheckpoints({ runId: 'text' }))[0]).toMatchObject({ kind: WHOLE, phase: WHOLE })
      expect(await store.getEffect('text', WHOLE)).toMatchObject({ callId: WHOLE, name: WHOLE, inputHash: WHOLE, idempotencyKey: WHOLE, output: { text: CUT } })
    })
  })
}

async function expectRefused(attempt: Promise<unknown>, field: string): Promise<void> {
  const error = await attempt.then(
    () => undefined,
    (err: unknown) => err,
  )
  expect(error).toBeInstanceOf(InvalidArgumentError)
  expect(error).toMatchObject({ code: 'invalid_argument' })
  expect((error as Error).message).toContain(field)
  expect((error as Error).message).toContain('surrogate')
}
