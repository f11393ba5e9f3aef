import { describe, expect, it } from 'vitest'
import {
  CairnError,
  executor,
  MemoryStore,
  loadWorkflowCheckpoint,
  WorkflowBuilder,
  WorkflowError,
  type CheckpointStorage,
  type RequestInfoEvent,
  type WorkflowContext,
} from '../../src/index.js'
import { collect, squaresWorkflow, types } from './helpers.js'

interface Approval {
  approved: boolean
  comment?: string
}

/**
 * draft → review (asks a human) → publish; a rejection sends the draft back with the comment.
 * Built fresh each time, as a fresh process would.
 */
function approvalWorkflow(storage: CheckpointStorage) {
  const handled: string[] = []
  const draft = executor('draft', async (input: { topic: string; revision?: string }, ctx: WorkflowContext<string>) => {
    handled.push('draft')
    await ctx.sendMessage(input.revision === undefined ? `A post about ${input.topic}` : `${input.revision} (revised)`)
  })
  const review = executor(
    'review',
    async (text: string, ctx) => {
      handled.push('review')
      ctx.state.set('draft', text)
      await ctx.requestInfo({ question: 'Publish this?', draft: text }, { responseSchema: { type: 'object', properties: { approved: { type: 'boolean' } }, required: ['approved'] } })
    },
    {
      handleResponse: async (response, request: RequestInfoEvent, ctx) => {
        const answer = response as Approval
        handled.push(`answer ${answer.approved}`)
        const text = (request.data as { draft: string }).draft
        if (answer.approved) await ctx.sendMessage({ publish: text }, { targetId: 'publish' })
        else await ctx.sendMessage({ topic: '', revision: `${text} [${answer.comment ?? ''}]` }, { targetId: 'draft' })
      },
    },
  )
  const publish = executor('publish', async (message: { publish: string }, ctx: WorkflowContext<never, string>) => {
    handled.push('publish')
    await ctx.yieldOutput(`Published: ${message.publish}`)
  })
  const workflow = new WorkflowBuilder<{ topic: string }, string>({ name: 'approval', startExecutor: draft, store: storage })
    .addEdge(draft, review)
    .addEdge(review, publish)
    .addEdge(review, draft)
    .build()
  return { workflow, handled }
}

describe('human requests', () => {
  it('ctx.requestInfo emits request_info; the run ends idle with the request pending, persisted in its checkpoint', async () => {
    const storage = new MemoryStore()
    const { workflow } = approvalWorkflow(storage)
    const result = await workflow.run({ message: { topic: 'cairns' } })
    expect(result.status).toBe('paused')
    const [request] = result.getPendingRequests()
    expect(request).toMatchObject({ type: 'request_info', executorId: 'review', iteration: 2, data: { question: 'Publish this?', draft: 'A post about cairns' } })
    expect(result.events.at(-1)).toMatchObject({ type: 'workflow_completed', status: 'paused', pendingRequestIds: [request!.requestId] })
    const checkpoint = await loadWorkflowCheckpoint(storage, result.checkpointId!)
    expect(checkpoint.pendingRequestInfoEvents).toEqual({ [request!.requestId]: request })
    expect(workflow.pendingRequests).toEqual([request])
  })

  it('an answer given later to a fresh instance is delivered to the requesting executor, and the run goes on', async () => {
    const storage = new MemoryStore()
    const first = await approvalWorkflow(storage).workflow.run({ message: { topic: 'cairns' } })
    const [request] = first.getPendingRequests()

    const rejected = approvalWorkflow(storage)
    const second = await rejected.workflow.run({ checkpointId: first.checkpointId!, responses: { [request!.requestId]: { approved: false, comment: 'shorter' } } })
    expect(rejected.handled).toEqual(['answer false', 'draft', 'review'])
    const [again] = second.getPendingRequests()
    expect(again!.data).toEqual({ question: 'Publish this?', draft: 'A post about cairns [shorter] (revised)' })

    const approved = approvalWorkflow(storage)
    const third = await approved.workflow.run({ checkpointId: second.checkpointId!, responses: { [again!.requestId]: { approved: true } } })
    expect(third.getOutputs()).toEqual(['Published: A post about cairns [shorter] (revised)'])
    expect(third.status).toBe('idle')
    expect(approved.handled).toEqual(['answer true', 'publish'])
  })

  it('answers are recorded in a responses checkpoint before they are processed, at the iteration of the checkpoint they answer', async () => {
    const storage = new MemoryStore()
    const first = await approvalWorkflow(storage).workflow.run({ message: { topic: 'cairns' } })
    const [request] = first.getPendingRequests()
    const answered = await approvalWorkflow(storage).workflow.run({ checkpointId: first.checkpointId!, responses: { [request!.requestId]: { approved: true } } })
    const run = (await storage.listCheckpoints({ runId: answered.runId })).reverse()
    expect(run.map((c) => `${c.phase}:${JSON.stringify(c.metadata.iterationCount)}`)).toEqual(['entry:0', 'superstep:1', 'superstep:2', 'responses:2', 'superstep:3', 'superstep:4'])
    const responses = await loadWorkflowCheckpoint(storage, run[3]!.id)
    expect(responses.previousCheckpointId).toBe(first.checkpointId)
    expect(responses.pendingRequestInfoEvents).toEqual({})
    expect(responses.messages).toEqual([{ kind: 'response', sourceId: '$response', targetId: 'review', data: { approved: true }, request }])
  })

  it('message excludes checkpointId and responses; at least one of the three is needed', async () => {
    const { workflow } = squaresWorkflow()
    const rejects = async (options: Parameters<typeof workflow.run>[0], pattern: RegExp) => {
      const error = await workflow.run(options).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(CairnError)
      expect(error).toMatchObject({ code: 'invalid_argument' })
      expect((error as Error).message).toMatch(pattern)
    }
    await rejects({ message: 1, checkpointId: 'x' }, /either message .* or checkpointId .*, not both/)
    await rejects({ message: 1, responses: { r: 1 } }, /either message .* or responses .*, not both/)
    await rejects({}, /run needs message .*, checkpointId .* or responses/)
    await rejects({ responses: {} }, /responses must be a non-empty object/)
    await rejects({ responses: { r: 1 } }, /has no run waiting for responses in this process/)
  })

  it('responses are validated against the pending request ids and the request schema, with the bad id named, before anything runs', async () => {
    const storage = new MemoryStore()
    const first = await approvalWorkflow(storage).workflow.run({ message: { topic: 'cairns' } })
    const [request] = first.getPendingRequests()
    const { workflow, handled } = approvalWorkflow(storage)
    const unknown = await workflow.run({ checkpointId: first.checkpointId!, responses: { 'not-a-request': { approved: true } } }).catch((e: unknown) => e)
    expect(unknown).toBeInstanceOf(WorkflowError)
    expect(unknown).toMatchObject({ code: 'unknown_request', requestId: 'not-a-request' })
    expect((unknown as Error).message).toBe(`workflow approval has no pending request not-a-request (unknown, or already answered); pending requests: ${request!.requestId}`)
    const invalid = await workflow.run({ checkpointId: first.checkpointId!, responses: { [request!.requestId]: { approved: 'yes' } } }).catch((e: unknown) => e)
    expect(invalid).toMatchObject({ code: 'invalid_response', requestId: request!.requestId })
    expect((invalid as Error).message).toBe(`the response to request ${request!.requestId} of executor review is invalid: response.approved: expected boolean, got string`)
    expect(handled).toEqual([])
    expect(await storage.listCheckpoints({ runId: first.runId })).toHaveLength(3)
  })

  it('an already answered request is refused with its id; answering it again from the checkpoint before the answer needs allowReanswer', async () => {
    const storage = new MemoryStore()
    const { workflow } = approvalWorkflow(storage)
    const first = await workflow.run({ message: { topic: 'cairns' } })
    const [request] = first.getPendingRequests()
    const answer = { [request!.requestId]: { approved: true } }
    // In memory: `responses` alone answers this instance's last run.
    const answered = await workflow.run({ responses: answer })
    expect(answered.getOutputs()).toEqual(['Published: A post about cairns'])
    await expect(workflow.run({ checkpointId: answered.checkpointId!, responses: answer })).rejects.toThrow(
      `workflow approval has no pending request ${request!.requestId} (unknown, or already answered); no request is pending`,
    )
    const again = approvalWorkflow(storage).workflow.run({ checkpointId: first.checkpointId!, responses: answer })
    await expect(again).rejects.toMatchObject({ name: 'WorkflowError', code: 'request_answered', requestId: request!.requestId })
    await expect(again).rejects.toThrow(`was already answered after checkpoint ${first.checkpointId!}`)
    const replay = await approvalWorkflow(storage).workflow.run({ checkpointId: first.checkpointId!, responses: answer, allowReanswer: true })
    expect(replay.getOutputs()).toEqual(['Published: A post about cairns'])
  })

  it('answering from an older checkpoint a request no later checkpoint answered is allowed', async () => {
    const storage = new MemoryStore()
    const { workflow } = approvalWorkflow(storage)
    const first = await workflow.run({ message: { topic: 'cairns' } })
    const [request] = first.getPendingRequests()
    const fresh = await approvalWorkflow(storage).workflow.run({ checkpointId: first.checkpointId!, responses: { [request!.requestId]: { approved: true } } })
    expect(fresh.getOutputs()).toEqual(['Published: A post about cairns'])
  })

  it('a resume re-emits the requests still pending, but not those it answers', async () => {
    const storage = new MemoryStore()
    const asker = executor('asker', async (_: unknown, ctx) => {
      await ctx.requestInfo('first')
      await ctx.requestInfo('second')
    }, { handleResponse: () => {} })
    const build = () => new WorkflowBuilder({ name: 'two-questions', startExecutor: asker, store: storage }).build()
    const first = await build().run({ message: 1 })
    const [one, two] = first.getPendingRequests()
    const resumed = await collect(build().stream({ checkpointId: first.checkpointId! }))
    expect(types(resumed)).toEqual(['workflow_started', 'request_info', 'request_info', 'workflow_completed'])
    const answered = await collect(build().stream({ checkpointId: first.checkpointId!, responses: { [one!.requestId]: 'yes' } }))
    expect(answered.filter((e) => e.type === 'request_info')).toEqual([two])
    expect(answered.at(-1)).toMatchObject({ status: 'paused', pendingRequestIds: [two!.requestId] })
  })

  it('an executor without handleResponse fails loudly when its answer arrives', async () => {
    const storage = new MemoryStore()
    const asker = executor('asker', async (_: unknown, ctx) => void (await ctx.requestInfo('?')))
    const workflow = new WorkflowBuilder({ name: 'no-handler', startExecutor: asker, store: storage }).build()
    const first = await workflow.run({ message: 1 })
    const id = first.getPendingRequests()[0]!.requestId
    await expect(workflow.run({ responses: { [id]: 'answer' } })).rejects.toThrow(`executor asker received the response to request ${id} but does not implement handleResponse`)
  })
})
