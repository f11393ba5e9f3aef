import { afterEach, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Agent, Runner, SlidingWindowConversationManager, tool, type ModelRequest, type ModelStreamEvent } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel } from '../../src/testing.js'

/**
 * Some providers number tool calls per response (`search:0` in every round) or send one
 * constant id. Each call is a new call all the same: it runs, with its own idempotency key, and
 * its result pairs with it.
 */

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A non-idempotent tool that records each execution and its idempotency key. */
function charger(executions: { cents: number; key: string }[]) {
  return tool({
    name: 'charge',
    description: 'Charge a card.',
    inputSchema: { type: 'object', properties: { cents: { type: 'number' } }, required: ['cents'] },
    callback: (input, ctx) => {
      executions.push({ cents: (input as { cents: number }).cents, key: ctx.idempotencyKey })
      return `charged ${(input as { cents: number }).cents}`
    },
  })
}

/** Rounds of one call each, every one with the id `call_0`, then an answer. */
function sameIdTurns(rounds: number) {
  return [
    ...Array.from({ length: rounds }, (_, k) => [{ toolUse: { toolUseId: 'call_0', name: 'charge', input: { cents: 100 * (k + 1) } } }]),
    [{ text: 'done' }],
  ]
}

/** The tool call ids and tool result ids of the conversation a request carries, in order. */
function idsOf(request: ModelRequest): string[] {
  return request.messages.flatMap((m) => m.content.flatMap((b) => ('toolUse' in b ? [`use ${b.toolUse.toolUseId}`] : 'toolResult' in b ? [`result ${b.toolResult.toolUseId}`] : [])))
}

describe('a tool call id a provider uses again in a later response', () => {
  it('is a new call: it runs, and its result pairs with it under an id of its own', async () => {
    const executions: { cents: number; key: string }[] = []
    const model = new ScriptedModel(sameIdTurns(3))
    const agent = new Agent({ name: 'payer', model, tools: [charger(executions)] })
    const events: ModelStreamEvent[] = []
    for await (const event of agent.stream('pay')) if (event.type === 'modelEvent') events.push(event.event)
    expect(executions.map((e) => e.cents)).toEqual([100, 200, 300])
    expect(idsOf(model.calls[3]!)).toEqual(['use call_0', 'result call_0', 'use call_0_2', 'result call_0_2', 'use call_0_3', 'result call_0_3'])
    // What streams carries the id kept, so a UI pairs the call with its result.
    expect(events.filter((e) => e.type === 'toolUseStart').map((e) => (e as { toolUseId: string }).toolUseId)).toEqual(['call_0', 'call_0_2', 'call_0_3'])
    const deltaIds = events.flatMap((e) => (e.type === 'toolUseInputDelta' ? [e.toolUseId] : []))
    expect([...new Set(deltaIds)]).toEqual(['call_0', 'call_0_2', 'call_0_3'])
  })

  it('a response that repeats an id within itself is still refused', async () => {
    const model = new ScriptedModel([[{ toolUse: { toolUseId: 'x', name: 'charge', input: { cents: 1 } } }, { toolUse: { toolUseId: 'x', name: 'charge', input: { cents: 2 } } }]])
    const agent = new Agent({ name: 'payer', model, tools: [charger([])] })
    await expect(agent.invoke('pay')).rejects.toThrow(/same id/)
  })

  it('under the runner, across a pause and a resume after the conversation dropped the first call, each call runs once with its own key', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-reused-ids-'))
    dirs.push(dir)
    const path = join(dir, 'cairn.db')
    const executions: { cents: number; key: string }[] = []
    const ask = tool({
      name: 'ask',
      description: 'Ask a human.',
      inputSchema: { type: 'object', properties: {} },
      callback: (_input, ctx) => ctx.interrupt<string>({ name: 'approval', reason: 'go on?' }),
    })
    // Two charges as call_0, a question (call_0 again), then two more charges as call_0.
    const turns = [
      [{ toolUse: { toolUseId: 'call_0', name: 'charge', input: { cents: 100 } } }],
      [{ toolUse: { toolUseId: 'call_0', name: 'charge', input: { cents: 200 } } }],
      [{ toolUse: { toolUseId: 'call_0', name: 'ask', input: {} } }],
      [{ toolUse: { toolUseId: 'call_0', name: 'charge', input: { cents: 300 } } }],
      [{ toolUse: { toolUseId: 'call_0', name: 'charge', input: { cents: 400 } } }],
      [{ text: 'done' }],
    ]
    // One script for both processes, answered in call order (the window keeps too few messages to count turns by).
    const model = new ScriptedModel(turns)
    const build = () => new Agent({ name: 'payer', model, tools: [charger(executions), ask], conversationManager: new SlidingWindowConversationManager({ windowSize: 3 }) })
    const first = new SqliteStore({ path })
    const paused = await new Runner({ store: first }).run(build(), { input: 'pay', runId: 'r' })
    expect(paused.state).toBe('paused')
    await first.close()
    // A fresh process: the window has dropped the first calls from the conversation.
    const store = new SqliteStore({ path })
    try {
      const agent = build()
      const interruptId = String(paused.interrupts?.at(0)?.id)
      const done = await new Runner({ store }).resume(agent, { runId: 'r', responses: { [interruptId]: 'yes' } })
      expect(done.state).toBe('completed')
      expect(executions.map((e) => e.cents)).toEqual([100, 200, 300, 400])
      expect(new Set(executions.map((e) => e.key)).size).toBe(4)
      const effects = await store.listEffects('r')
      expect(effects.map((e) => [e.callId, e.name, e.status])).toEqual([
        ['call_0', 'charge', 'succeeded'],
        ['call_0_2', 'charge', 'succeeded'],
        ['call_0_3', 'ask', 'succeeded'],
        ['call_0_4', 'charge', 'succeeded'],
        ['call_0_5', 'charge', 'succeeded'],
      ])
    } finally {
      await store.close()
    }
  })
})
