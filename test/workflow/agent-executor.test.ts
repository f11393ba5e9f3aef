import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import {
  Agent,
  AgentExecutor,
  ConfigMismatchError,
  executor,
  MemoryStore,
  loadWorkflowCheckpoint,
  tool,
  WorkflowBuilder,
  type AgentExecutorResponse,
  type AgentInterruptRequest,
  type AgentSnapshot,
  type CheckpointStorage,
  type ModelRequest,
  type WorkflowContext,
  type WorkflowEvent,
} from '../../src/index.js'
import { ScriptedModel, type ScriptedTurn } from '../../src/testing.js'

const texts = (request: ModelRequest) => request.messages.map((m) => m.content.flatMap((b) => ('text' in b ? [b.text] : [])).join(''))

const firstDraft: ScriptedTurn = [{ text: 'Stones stacked on a ridge, one for each who passed this way, the path remembers.' }]
const secondDraft: ScriptedTurn = (request) => {
  // The writer's second turn sees its whole conversation, restored from the workflow checkpoint.
  expect(texts(request)).toEqual(['Write about cairns.', 'Stones stacked on a ridge, one for each who passed this way, the path remembers.', 'Make it shorter.'])
  return [{ text: 'Stacked stones: the path remembers.' }]
}

/** A writer agent and an editor that asks for one revision, then publishes. */
function editorial(storage: CheckpointStorage, turns: ScriptedTurn[], systemPrompt = 'You write short poems.') {
  const writer = new AgentExecutor(new Agent({ model: new ScriptedModel(turns), systemPrompt }), { id: 'writer' })
  const editor = executor('editor', async (draft: AgentExecutorResponse, ctx: WorkflowContext<string, string>) => {
    const round = (ctx.state.get<number>('round') ?? 0) + 1
    ctx.state.set('round', round)
    if (round === 1) await ctx.sendMessage('Make it shorter.')
    else await ctx.yieldOutput(`final: ${draft.text}`)
  })
  return new WorkflowBuilder<string, string>({ name: 'editorial', startExecutor: writer, store: storage }).addEdge(writer, editor).addEdge(editor, writer).build()
}

describe('AgentExecutor', () => {
  it("puts an agent in a workflow: its response goes along the edges, and its conversation is part of every checkpoint, so a fresh process continues it", async () => {
    const storage = new MemoryStore()
    const events: WorkflowEvent[] = []
    for await (const event of editorial(storage, [firstDraft, secondDraft]).stream({ message: 'Write about cairns.' })) {
      events.push(event)
      if (event.type === 'superstep_completed' && event.iteration === 2) break
    }
    const checkpointId = events.findLast((e) => e.type === 'superstep_completed')!.checkpointId!
    const checkpoint = await loadWorkflowCheckpoint(storage, checkpointId)
    const snapshot = checkpoint.executorStates.writer!.snapshot as AgentSnapshot
    expect(snapshot.data.messages.map((m) => m.role)).toEqual(['user', 'assistant'])
    expect(checkpoint.messages).toEqual([{ kind: 'message', sourceId: 'editor', targetId: 'writer', data: 'Make it shorter.' }])

    // A fresh agent whose model has only the second turn: the first is never requested again.
    const result = await editorial(storage, [secondDraft]).run({ checkpointId })
    expect(result.getOutputs()).toEqual(['final: Stacked stones: the path remembers.'])
  })

  it("an agent's configuration is part of the graph signature", async () => {
    const storage = new MemoryStore()
    const first = editorial(storage, [firstDraft, secondDraft])
    const result = await first.run({ message: 'Write about cairns.' })
    expect(result.getOutputs()).toEqual(['final: Stacked stones: the path remembers.'])
    const changed = editorial(storage, [], 'You write long poems.')
    expect(changed.graphSignatureHash).not.toBe(first.graphSignatureHash)
    await expect(changed.run({ checkpointId: result.checkpointId! })).rejects.toThrow(ConfigMismatchError)
    await expect(changed.run({ checkpointId: result.checkpointId! })).rejects.toThrow(/executor writer changed from AgentExecutor\(/)
  })

  it("yields the response as an output when it has no outgoing edges, and refuses an agent that checkpoints on its own", async () => {
    const solo = new AgentExecutor(new Agent({ model: new ScriptedModel([[{ text: 'Hello.' }]]) }))
    const result = await new WorkflowBuilder({ name: 'solo', startExecutor: solo }).build().run({ message: 'Hi' })
    expect(result.getOutputs()).toEqual([{ executorId: 'agent', text: 'Hello.', message: { role: 'assistant', content: [{ text: 'Hello.' }] }, stopReason: 'end_turn' }])
    expect(() => new AgentExecutor(new Agent({ model: new ScriptedModel([]), checkpointing: true }))).toThrow(/checkpointing: false/)
  })

  it('turns a tool interrupt into a request; the answer, given to a fresh process, resumes the agent', async () => {
    const storage = new MemoryStore()
    const paid: string[] = []
    const build = (turns: ScriptedTurn[]) => {
      const pay = tool({
        name: 'pay',
        description: 'Pay an invoice after a human approves.',
        inputSchema: z.object({ amount: z.number() }),
        callback: ({ amount }, ctx) => {
          const answer = ctx.interrupt<string>({ name: 'approve_payment', reason: { amount } })
          paid.push(`${amount}:${answer}`)
          return answer === 'yes' ? 'paid' : 'refused'
        },
      })
      const clerk = new AgentExecutor(new Agent({ model: new ScriptedModel(turns), tools: [pay] }), { id: 'clerk' })
      return new WorkflowBuilder({ name: 'payments', startExecutor: clerk, store: storage }).build()
    }
    const done: ScriptedTurn = [{ text: 'The invoice is paid.' }]
    const first = await build([[{ toolUse: { toolUseId: 'p1', name: 'pay', input: { amount: 40 } } }], done]).run({ message: 'Pay invoice 7' })
    expect(first.status).toBe('paused')
    const [request] = first.getPendingRequests()
    const asked = request!.data as AgentInterruptRequest
    expect(asked.interrupts.map((i) => i.id)).toEqual(['p1:approve_payment'])

    const answered = await build([done]).run({ checkpointId: first.checkpointId!, responses: { [request!.requestId]: { 'p1:approve_payment': 'yes' } } })
    expect(paid).toEqual(['40:yes'])
    expect(answered.getOutputs()).toMatchObject([{ executorId: 'clerk', text: 'The invoice is paid.' }])
  })
})
