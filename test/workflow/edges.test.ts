import { describe, expect, it } from 'vitest'
import { executor, MemoryStore, WorkflowBuilder, type WorkflowCheckpoint, type WorkflowContext } from '../../src/index.js'

/** An executor that records what it receives, by super step, and yields it. */
function sink(id: string, log: string[]) {
  return executor(id, async (message: unknown, ctx: WorkflowContext) => {
    log.push(`${ctx.iteration}:${id}:${JSON.stringify(message)}`)
    await ctx.yieldOutput({ [id]: message })
  })
}

/** Log lines grouped by executor (executors of one super step run concurrently, so only each one's own order is fixed). */
function grouped(log: readonly string[]): Record<string, string[]> {
  const out: Record<string, string[]> = {}
  for (const line of log) {
    const [step, id, message] = line.split(':')
    ;(out[id!] ??= []).push(`${step}:${message}`)
  }
  return out
}

/** A start executor that sends each number of its input list. */
const sendAll = (id = 'start') =>
  executor(id, async (numbers: number[], ctx: WorkflowContext<number>) => {
    for (const n of numbers) await ctx.sendMessage(n)
  })

describe('edges', () => {
  it('a conditional edge only carries the messages whose condition holds', async () => {
    const log: string[] = []
    const start = sendAll()
    const even = sink('even', log)
    const odd = sink('odd', log)
    const workflow = new WorkflowBuilder({ name: 'parity', startExecutor: start })
      .addEdge(start, even, { condition: (n: number) => n % 2 === 0 })
      .addEdge(start, odd, { condition: async (n: number) => n % 2 === 1 })
      .build()
    await workflow.run({ message: [1, 2, 3, 4] })
    expect(grouped(log)).toEqual({ even: ['2:2', '2:4'], odd: ['2:1', '2:3'] })
  })

  it('a fan-out sends each message to every target, or to those its selection picks', async () => {
    const log: string[] = []
    const start = sendAll()
    const [a, b, c] = [sink('a', log), sink('b', log), sink('c', log)]
    await new WorkflowBuilder({ name: 'fan-out', startExecutor: start }).addFanOutEdges(start, [a, b, c]).build().run({ message: [7] })
    expect(grouped(log)).toEqual({ a: ['2:7'], b: ['2:7'], c: ['2:7'] })

    log.length = 0
    const picky = sendAll()
    const [x, y] = [sink('x', log), sink('y', log)]
    const pick = (n: number, targets: readonly string[]) => (n > 5 ? targets : [targets[0]!])
    await new WorkflowBuilder({ name: 'picky', startExecutor: picky }).addFanOutEdges(picky, [x, y], { selection: pick }).build().run({ message: [1, 9] })
    expect(grouped(log)).toEqual({ x: ['2:1', '2:9'], y: ['2:9'] })
  })

  it('a fan-in delivers the list of messages, in source order, once every source has sent, even across super steps and a restore', async () => {
    const storage = new MemoryStore()
    const log: string[] = []
    const build = () => {
      const start = executor('start', async (_: unknown, ctx) => ctx.sendMessage('go'))
      const fast = executor('fast', async (_: unknown, ctx) => ctx.sendMessage('fast result'))
      const slow = executor('slow', async (_: unknown, ctx) => ctx.sendMessage('slow step 1'))
      const slower = executor('slower', async (_: unknown, ctx) => ctx.sendMessage('slow result'))
      const join = sink('join', log)
      return new WorkflowBuilder({ name: 'fan-in', startExecutor: start, store: storage })
        .addFanOutEdges(start, [fast, slow])
        .addEdge(slow, slower)
        .addFanInEdges([slower, fast], join)
        .build()
    }
    const events = []
    for await (const event of build().stream({ message: 1 })) {
      events.push(event)
      if (event.type === 'superstep_completed' && event.iteration === 2) break
    }
    // After super step 2, fast's message waits in the fan-in group: it is in the checkpoint.
    const waiting = (await storage.getLatest<WorkflowCheckpoint>({ workflowName: 'fan-in' }))!
    expect(waiting.payload.messages).toContainEqual({ kind: 'message', sourceId: 'fast', targetId: 'join', data: 'fast result', fanIn: 'fan_in:slower,fast->join' })
    const result = await build().run({ checkpointId: waiting.checkpointId })
    expect(log).toEqual(['4:join:["slow result","fast result"]'])
    expect(result.getOutputs()).toEqual([{ join: ['slow result', 'fast result'] }])
  })

  it('a switch-case group sends each message to the first matching case, else to the default', async () => {
    const log: string[] = []
    const start = sendAll()
    const [small, medium, large] = [sink('small', log), sink('medium', log), sink('large', log)]
    const workflow = new WorkflowBuilder({ name: 'switch', startExecutor: start })
      .addSwitchCaseEdges(
        start,
        [
          { condition: (n: number) => n < 10, target: small },
          { condition: (n: number) => n < 100, target: medium },
        ],
        { default: large },
      )
      .build()
    await workflow.run({ message: [5, 50, 500, 7] })
    expect(grouped(log)).toEqual({ small: ['2:5', '2:7'], medium: ['2:50'], large: ['2:500'] })
  })

  it('a self-loop delivers an executor its own messages in the next super step', async () => {
    const counter = executor('counter', async (n: number, ctx: WorkflowContext<number, number>) => {
      if (n < 3) await ctx.sendMessage(n + 1)
      else await ctx.yieldOutput(ctx.iteration)
    })
    const result = await new WorkflowBuilder({ name: 'loop', startExecutor: counter }).addEdge(counter, counter).build().run({ message: 0 })
    expect(result.getOutputs()).toEqual([4])
  })

  it('sendMessage with a targetId goes along that edge only; an unknown target or no edges at all is an error', async () => {
    const log: string[] = []
    const start = executor('start', async (_: unknown, ctx) => {
      await ctx.sendMessage('only b', { targetId: 'b' })
      await expect(ctx.sendMessage('nowhere', { targetId: 'c' })).rejects.toThrow(/has no edge to c; its edges reach a, b/)
    })
    const a = sink('a', log)
    const b = executor('b', async (message: string, ctx) => {
      log.push(`b:${message}`)
      await expect(ctx.sendMessage('x')).rejects.toThrow(/executor b has no outgoing edges/)
    })
    await new WorkflowBuilder({ name: 'targeted', startExecutor: start }).addFanOutEdges(start, [a, b]).build().run({ message: 1 })
    expect(log).toEqual(['b:only b'])
  })

  it('the builder refuses duplicate executor ids, duplicate edges and reserved ids', () => {
    const a = executor('a', () => {})
    const b = executor('b', () => {})
    expect(() => new WorkflowBuilder({ startExecutor: a }).addEdge(a, executor('a', () => {}))).toThrow(/two different executors have the id a/)
    expect(() => new WorkflowBuilder({ startExecutor: a }).addEdge(a, b).addEdge(a, b)).toThrow(/added twice/)
    expect(() => executor('$input', () => {})).toThrow(/reserved/)
    expect(new WorkflowBuilder({ startExecutor: a }).build().name).toBe('a')
  })
})
