import { describe, expect, it } from 'vitest'
import { Checkpoint, CheckpointCorruptionError, CheckpointError, Runner, type CheckpointJSON, type WorkflowCheckpoint } from '../../src/index.js'
import { weatherAgent } from '../agent/helpers.js'
import { researchAgent, sqliteStore, World } from '../runner/helpers.js'
import { squaresWorkflow } from '../workflow/helpers.js'

const resumeWith = (checkpoint: unknown) => [{ checkpointResume: { checkpoint } }]

async function pausedCheckpoint(): Promise<CheckpointJSON> {
  const { agent } = weatherAgent()
  const first = await agent.invoke('Weather?')
  return first.checkpoint!.toJSON()
}

async function resumeError(edit: (json: CheckpointJSON & Record<string, unknown>) => void): Promise<unknown> {
  const json = (await pausedCheckpoint()) as CheckpointJSON & Record<string, unknown>
  edit(json)
  const { agent, model } = weatherAgent()
  const err = await agent.invoke(resumeWith(json)).then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(model.calls).toHaveLength(0)
  return err
}

describe('agent resume validates the snapshot before reading it', () => {
  it('a state that is a 10-million-character string is refused at once, naming the path', async () => {
    const err = await resumeError((json) => {
      ;(json.snapshot.data as Record<string, unknown>).state = 'x'.repeat(10_000_000)
    })
    expect(err).toBeInstanceOf(CheckpointError)
    expect(err).toMatchObject({ code: 'checkpoint_invalid', path: 'snapshot.data.state' })
  })

  it.each([
    ['message content that is not a list', (j: CheckpointJSON) => void ((j.snapshot.data.messages[0] as unknown as Record<string, unknown>).content = 'garbled'), 'snapshot.data.messages[0].content'],
    ['a message that is null', (j: CheckpointJSON) => void ((j.snapshot.data.messages as unknown[])[1] = null), 'snapshot.data.messages[1]'],
    ['completed interrupts that are not a list', (j: CheckpointJSON) => void ((j.snapshot.data.interrupts as unknown as Record<string, unknown>).completed = 7), 'snapshot.data.interrupts.completed'],
    ['a tool-use block without a name', (j: CheckpointJSON) => void (((j.snapshot.data.messages[1]!.content[0] as { toolUse: Record<string, unknown> }).toolUse.name = 42)), 'snapshot.data.messages[1].content[0].toolUse.name'],
    ['a config whose tools are not names to hashes', (j: CheckpointJSON) => void ((j.snapshot.data.config as unknown as Record<string, unknown>).tools = { get_weather: [] }), 'snapshot.data.config.tools.get_weather'],
  ])('%s is a CheckpointError naming %s', async (_name, edit, path) => {
    const err = await resumeError(edit)
    expect(err).toBeInstanceOf(CheckpointError)
    expect(err).toMatchObject({ code: 'checkpoint_invalid', path })
    expect((err as Error).message).toContain(path)
  })

  it('a checkpoint nested 100,000 levels deep is a CheckpointError, not a stack overflow', async () => {
    let deep: unknown = 1
    for (let i = 0; i < 100_000; i++) deep = { a: deep }
    const err = await resumeError((json) => {
      json.appData = { deep } as never
    })
    expect(err).toBeInstanceOf(CheckpointError)
    expect(() => Checkpoint.fromJSON({ ...JSON.parse('{"snapshot":{}}'), deep })).toThrow(CheckpointError)
  })

  it('an unchanged checkpoint still resumes', async () => {
    const json = await pausedCheckpoint()
    const { agent } = weatherAgent()
    const result = await agent.invoke(resumeWith(JSON.parse(JSON.stringify(json))))
    expect(result.stopReason).toBe('checkpoint')
  })
})

describe('runner resume validates the stored runtime snapshot', () => {
  it('a runtime snapshot whose agent state is a string is a CheckpointCorruptionError naming the path; no model call is made', async () => {
    const { store } = await sqliteStore()
    const world = new World()
    await new Runner({ store }).run(researchAgent(world).agent, { input: 'research', runId: 'ok' })
    const snapshot = (await store.listCheckpoints({ runId: 'ok' })).find((c) => c.phase === 'post_llm')!
    const record = await store.load<{ runtime: { agent: Record<string, unknown>; messages: unknown[] } }>(snapshot.id)
    const runtime = record.payload.runtime
    await store.save({
      runId: 'bad-state',
      kind: 'runner',
      phase: 'post_llm',
      metadata: { snapshot: true, step: 0 },
      payload: { runtime: { ...runtime, agent: { ...runtime.agent, state: 'x'.repeat(1_000_000) } } },
    })
    await store.save({
      runId: 'bad-message',
      kind: 'runner',
      phase: 'post_llm',
      metadata: { snapshot: true, step: 0 },
      payload: { runtime: { ...runtime, messages: [...runtime.messages, { role: 'user', content: [{ toolResult: { toolUseId: 1 } }] }] } },
    })
    const fresh = researchAgent(world)
    const runner = new Runner({ store })
    await expect(runner.resume(fresh.agent, { runId: 'bad-state' })).rejects.toMatchObject({ name: CheckpointCorruptionError.name, path: 'runtime.agent.state' })
    const err = await runner.resume(fresh.agent, { runId: 'bad-message' }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CheckpointCorruptionError)
    expect((err as CheckpointCorruptionError).path).toMatch(/^runtime\.messages\[\d+\]\.content\[0\]\.toolResult/)
    expect(fresh.model.calls).toHaveLength(0)
  })
})

describe('workflow restore validates the stored checkpoint', () => {
  it('a checkpoint whose metadata phase or run id is not of the written shape is a CheckpointCorruptionError', async () => {
    const { workflow, storage } = squaresWorkflow()
    const ran = await workflow.run({ message: 2 })
    const record = await storage.load<WorkflowCheckpoint>(ran.checkpointId!)
    for (const edit of [(p: WorkflowCheckpoint) => void ((p.metadata as unknown as Record<string, unknown>).phase = 7), (p: WorkflowCheckpoint) => void ((p.metadata as unknown as Record<string, unknown>).runId = null)]) {
      const payload = structuredClone(record.payload)
      edit(payload)
      const id = await storage.save({ runId: `tampered-${Math.random().toString(36).slice(2)}`, kind: 'workflow', phase: 'superstep', workflowName: 'squares', payload })
      await expect(squaresWorkflow(storage).workflow.run({ checkpointId: id })).rejects.toThrow(CheckpointCorruptionError)
    }
  })
})
