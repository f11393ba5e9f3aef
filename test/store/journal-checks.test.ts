import { afterAll, describe, expect, it } from 'vitest'
import { CheckpointCorruptionError } from '../../src/index.js'
import { fileBackend, postgresBackend, removeTempDirs, sqliteBackend, type RawBackend } from '../trust/raw-rows.js'

afterAll(removeTempDirs)

const backends: [string, () => Promise<RawBackend>][] = [
  ['sqlite', sqliteBackend],
  ['file', fileBackend],
  ['postgres', postgresBackend],
]

const output = { toolUseId: 'c1', status: 'success', content: [{ text: 'charged 10 EUR' }] }
const forged = JSON.stringify({ toolUseId: 'c1', status: 'success', content: [{ text: 'charged 0 EUR' }] })

/** Edits of a journaled outcome, each of which a read must refuse. */
const edits: { name: string; fields: (stored: { output: string; outputHash: string }) => { status: string; output: string | null; outputHash: string | null } }[] = [
  { name: 'a made-up output', fields: (s) => ({ status: 'succeeded', output: forged, outputHash: s.outputHash }) },
  { name: 'one character of the output changed', fields: (s) => ({ status: 'succeeded', output: s.output.replace('10', '90'), outputHash: s.outputHash }) },
  { name: 'an output nested past the stack', fields: (s) => ({ status: 'succeeded', output: `${'['.repeat(50_000)}${']'.repeat(50_000)}`, outputHash: s.outputHash }) },
  { name: 'an output that is not JSON', fields: (s) => ({ status: 'succeeded', output: s.output.slice(0, 9), outputHash: s.outputHash }) },
  { name: 'the hash of another output', fields: (s) => ({ status: 'succeeded', output: s.output, outputHash: '0'.repeat(64) }) },
  { name: 'the status rolled back to pending, the outcome kept', fields: (s) => ({ status: 'pending', output: s.output, outputHash: s.outputHash }) },
  { name: 'the status rolled back to started, the outcome kept', fields: (s) => ({ status: 'started', output: s.output, outputHash: s.outputHash }) },
  { name: 'marked succeeded without an output', fields: () => ({ status: 'succeeded', output: null, outputHash: null }) },
  { name: 'an unknown status', fields: (s) => ({ status: 'done', output: s.output, outputHash: s.outputHash }) },
  { name: 'the status flipped to failed', fields: (s) => ({ status: 'failed', output: s.output, outputHash: s.outputHash }) },
]

/** A store holding one pending effect whose stored input hash (digest and all) was replaced by `value`, reopened. */
async function withInputHash(make: () => Promise<RawBackend>, value: string) {
  const backend = await make()
  const store = backend.open({})
  await store.save({ runId: 'fx', kind: 'test', phase: 'p', payload: 1 })
  await store.recordEffectIntent({ runId: 'fx', callId: 'c1', name: 'charge', inputHash: 'h', idempotencyKey: 'fx:c1' })
  await store.close()
  const field = (await backend.fields('fx')).find((f) => f.table === 'effects' && f.id === 'c1' && f.column === 'input_hash')!
  await backend.writeField('fx', field, value)
  return backend.open({})
}

describe.each(backends)('the effect journal on %s is checked on every read', (_name, make) => {
  for (const edit of edits) {
    it(`${edit.name} is a CheckpointCorruptionError naming the run and the call, from getEffect and listEffects`, async () => {
      const backend = await make()
      const store = backend.open({})
      await store.save({ runId: 'fx', kind: 'test', phase: 'p', payload: 1 })
      await store.recordEffectIntent({ runId: 'fx', callId: 'c1', name: 'charge', inputHash: 'h', idempotencyKey: 'fx:c1' })
      const { effect } = await store.completeEffect({ runId: 'fx', callId: 'c1', status: 'succeeded', output })
      await store.close()
      const stored = (await backend.fields('fx')).filter((field) => field.table === 'effects' && field.id === 'c1')
      const value = (column: string) => String(stored.find((field) => field.column === column)?.value)
      expect(value('output_hash')).toContain(effect.outputHash!)
      await backend.updateEffect('fx', 'c1', edit.fields({ output: value('output'), outputHash: value('output_hash') }))

      const reopened = backend.open({})
      for (const read of [() => reopened.getEffect('fx', 'c1'), () => reopened.listEffects('fx')]) {
        const error = await read().then(
          () => undefined,
          (err: unknown) => err,
        )
        expect(error).toBeInstanceOf(CheckpointCorruptionError)
        expect(error).toMatchObject({ runId: 'fx' })
        // The run's log (an effect it records finished) or the row's own check names the run and the call.
        expect((error as Error).message).toMatch(/effect c1 of run fx|run fx was rolled back: its log records that effect c1/)
      }
      await reopened.close()
    })
  }

  for (const column of ['name', 'input_hash', 'idempotency_key']) {
    it(`an edited intent ${column} is a CheckpointCorruptionError naming the run and the call`, async () => {
      const backend = await make()
      const store = backend.open({})
      await store.save({ runId: 'fx', kind: 'test', phase: 'p', payload: 1 })
      await store.recordEffectIntent({ runId: 'fx', callId: 'c1', name: 'charge', inputHash: 'h', idempotencyKey: 'fx:c1' })
      await store.close()
      const field = (await backend.fields('fx')).find((f) => f.table === 'effects' && f.id === 'c1' && f.column === column)!
      await backend.writeField('fx', field, String(field.value).replace(/charge|h|fx:c1/, (word) => `${word}X`))
      const reopened = backend.open({})
      await expect(reopened.getEffect('fx', 'c1')).rejects.toThrow(/effect c1 of run fx/)
      await expect(reopened.listEffects('fx')).rejects.toBeInstanceOf(CheckpointCorruptionError)
      await reopened.close()
    })
  }

  for (const [label, replacement] of [
    ['made-up JSON', JSON.stringify({ toolUseId: 'c1', status: 'success' })],
    ['a SHA-256 in upper case', 'F'.repeat(64)],
    ['a short hash', 'h'],
  ] as const) {
    it(`an input hash replaced whole, intent digest and all, by ${label} is a CheckpointCorruptionError naming the run and the call`, async () => {
      const reopened = await withInputHash(make, replacement)
      await expect(reopened.getEffect('fx', 'c1')).rejects.toThrow(/effect c1 of run fx has an input hash that is neither/)
      await expect(reopened.listEffects('fx')).rejects.toBeInstanceOf(CheckpointCorruptionError)
      await reopened.close()
    })
  }

  it('a row written before intent digests, its input hash a SHA-256 alone, reads back', async () => {
    const reopened = await withInputHash(make, 'a'.repeat(64))
    expect(await reopened.getEffect('fx', 'c1')).toMatchObject({ status: 'pending', inputHash: 'a'.repeat(64) })
    await reopened.close()
  })

  it('an untouched outcome reads back as written', async () => {
    const backend = await make()
    const store = backend.open({})
    await store.recordEffectIntent({ runId: 'fx', callId: 'c1', name: 'charge', inputHash: 'h', idempotencyKey: 'fx:c1' })
    await store.completeEffect({ runId: 'fx', callId: 'c1', status: 'succeeded', output: { ...output, at: new Date(0), big: 10n } })
    await store.close()
    const reopened = backend.open({})
    expect(await reopened.getEffect('fx', 'c1')).toMatchObject({ status: 'succeeded', output: { ...output, at: new Date(0), big: 10n } })
    await reopened.close()
  })
})
