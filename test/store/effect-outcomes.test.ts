import { afterAll, describe, expect, it } from 'vitest'
import { MemoryStore, type CheckpointStore } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { postgresTarget } from '../fixtures/postgres-target.js'

const target = await postgresTarget()
afterAll(() => target.dropSchemas())

const intent = (callId: string) => ({ runId: 'r', callId, name: 'lookup', inputHash: 'a'.repeat(64), idempotencyKey: `r:${callId}` })
const outcome = (callId: string) => ({ runId: 'r', callId, status: 'succeeded' as const, output: { text: `result of ${callId}` } })
const checkpoint = { runId: 'r', kind: 'k', phase: 'p', payload: { n: 1 } }

/** Write an intent with its outcome in one commit, then the outcome of an intent stored earlier. */
async function writeBoth(store: CheckpointStore): Promise<void> {
  await store.write({ runId: 'r', checkpoints: [checkpoint], intents: [intent('early')] })
  await store.write({ runId: 'r', checkpoints: [checkpoint], intents: [intent('c1')], completions: [outcome('c1'), outcome('early')] })
}

describe('an intent and its outcome in one commit', () => {
  it('is stored finished, and so is an outcome of an intent stored before, on every backend', async () => {
    const stores: CheckpointStore[] = [new MemoryStore(), new SqliteStore({ path: ':memory:' }), target.openStore(target.freshSchema())]
    for (const store of stores) {
      await writeBoth(store)
      const effects = await store.listEffects('r')
      expect(effects.map((e) => [e.callId, e.status, e.output, e.attempts])).toEqual([
        ['early', 'succeeded', { text: 'result of early' }, 1],
        ['c1', 'succeeded', { text: 'result of c1' }, 1],
      ])
      // A second outcome of the same call changes nothing: the first one wins.
      await store.write({ runId: 'r', completions: [{ ...outcome('c1'), output: { text: 'other' } }] })
      expect((await store.getEffect('r', 'c1'))?.output).toEqual({ text: 'result of c1' })
      await store.close()
    }
  })

  it('is one row version on Postgres: the intent goes in with its outcome instead of being updated to it', async () => {
    const schema = target.freshSchema()
    const store = target.openStore(schema)
    await writeBoth(store)
    // Row versions go into the table's first page in the order they are written: early (0,1),
    // then c1 once, with its outcome (0,2), then early's new version with its outcome (0,3). An
    // intent inserted and then updated would leave c1's live version at (0,3) or after.
    const rows = await target.sql(`SELECT call_id, ctid::text AS ctid FROM "${schema}".effects ORDER BY call_id`)
    expect(rows).toEqual([
      { call_id: 'c1', ctid: '(0,2)' },
      { call_id: 'early', ctid: '(0,3)' },
    ])
    await store.close()
  })
})
