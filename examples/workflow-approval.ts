/**
 * A workflow that asks a human for approval and waits, across processes. A writer drafts a
 * post; a reviewer executor asks for approval with `ctx.requestInfo`, and the run ends idle with
 * the request pending in its SQLite checkpoint. Each answer is given by a fresh process that
 * knows nothing but the workflow's name: it finds the latest checkpoint, reads the pending
 * request there, and answers it. A rejection sends the draft back for a revision (and a new
 * request); an approval publishes it.
 *
 *   npx tsx examples/workflow-approval.ts [--dir DIR]
 *
 * Or play the human yourself, one process per step:
 *
 *   npx tsx examples/workflow-approval.ts start DIR
 *   npx tsx examples/workflow-approval.ts answer DIR reject "Make it shorter"
 *   npx tsx examples/workflow-approval.ts answer DIR approve
 */
import { spawn } from 'node:child_process'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { executor, getLatestWorkflowCheckpoint, WorkflowBuilder, type CheckpointStorage, type RequestInfoEvent, type WorkflowContext, type WorkflowRunResult } from 'cairn-agents'
import { SqliteStore } from 'cairn-agents/sqlite'

interface Draft {
  text: string
  revision: number
}

interface Approval {
  approved: boolean
  comment?: string
}

const WORKFLOW = 'post-approval'

/** Built the same way in every process: same executors, same edges, same name. */
function createWorkflow(storage: CheckpointStorage) {
  const writer = executor('writer', async (input: { topic: string } | { feedback: string; previous: Draft }, ctx: WorkflowContext<Draft>) => {
    const draft =
      'topic' in input
        ? { text: `Cairns mark the way: stones stacked by those who came before, so that those who follow do not get lost on ${input.topic}.`, revision: 1 }
        : { text: revise(input.previous.text, input.feedback), revision: input.previous.revision + 1 }
    await ctx.sendMessage(draft)
  })
  const reviewer = executor(
    'reviewer',
    async (draft: Draft, ctx) => {
      await ctx.requestInfo(
        { question: 'Publish this post?', draft },
        { responseSchema: { type: 'object', properties: { approved: { type: 'boolean' }, comment: { type: 'string' } }, required: ['approved'] } },
      )
    },
    {
      handleResponse: async (response, request: RequestInfoEvent, ctx) => {
        const answer = response as Approval
        const { draft } = request.data as { draft: Draft }
        if (answer.approved) await ctx.sendMessage(draft, { targetId: 'publisher' })
        else await ctx.sendMessage({ feedback: answer.comment ?? '', previous: draft }, { targetId: 'writer' })
      },
    },
  )
  const publisher = executor('publisher', async (draft: Draft, ctx: WorkflowContext<never, string>) => {
    await ctx.yieldOutput(`Published (revision ${draft.revision}): ${draft.text}`)
  })
  return new WorkflowBuilder<{ topic: string }, string>({ name: WORKFLOW, startExecutor: writer, store: storage })
    .addEdge(writer, reviewer)
    .addEdge(reviewer, publisher)
    .addEdge(reviewer, writer)
    .build()
}

function revise(text: string, feedback: string): string {
  return /shorter/i.test(feedback) ? text.split(':')[0]! + '.' : `${text} (${feedback})`
}

const [command, dirArg, ...rest] = process.argv.slice(2)
if (command === 'start' || command === 'answer') {
  process.exitCode = await step(command, dirArg!, rest)
} else {
  process.exitCode = await main()
}

/** The parent: start the run, then answer it twice, each time from a fresh process. */
async function main(): Promise<number> {
  const { values } = parseArgs({ options: { dir: { type: 'string' } } })
  const dir = values.dir ?? (await mkdtemp(join(tmpdir(), 'cairn-approval-')))
  await mkdir(dir, { recursive: true })
  try {
    console.log(`checkpoints in ${join(dir, 'approval.db')}`)
    const steps: [string, string[]][] = [
      ['1. A process starts the workflow; it asks for approval and stops:', ['start', dir]],
      ['2. A fresh process answers: rejected, make it shorter:', ['answer', dir, 'reject', 'Make it shorter']],
      ['3. Another fresh process answers: approved:', ['answer', dir, 'approve']],
    ]
    for (const [title, args] of steps) {
      console.log(title)
      const code = await runStep(args)
      if (code !== 0) return code ?? 1
    }
    return 0
  } finally {
    if (values.dir === undefined) await rm(dir, { recursive: true, force: true })
  }
}

/** One process: start the workflow, or answer the request pending in its latest checkpoint. */
async function step(command: 'start' | 'answer', dir: string, args: string[]): Promise<number> {
  const storage = new SqliteStore({ path: join(dir, 'approval.db') })
  try {
    const workflow = createWorkflow(storage)
    if (command === 'start') {
      report(await workflow.run({ message: { topic: 'a mountain ridge' } }))
      return 0
    }
    const latest = await getLatestWorkflowCheckpoint(storage, { workflowName: WORKFLOW })
    const [request] = Object.values(latest?.pendingRequestInfoEvents ?? {})
    if (latest === undefined || request === undefined) {
      console.error('nothing is waiting for an answer')
      return 1
    }
    console.log(`   found request ${request.requestId} in checkpoint ${latest.checkpointId} (iteration ${latest.iterationCount})`)
    const answer: Approval = args[0] === 'approve' ? { approved: true } : { approved: false, comment: args[1] ?? '' }
    console.log(`ANSWER: ${JSON.stringify(answer)}`)
    report(await workflow.run({ checkpointId: latest.checkpointId, responses: { [request.requestId]: answer } }))
    return 0
  } finally {
    await storage.close()
  }
}

function report(result: WorkflowRunResult<string>): void {
  for (const request of result.getPendingRequests()) console.log(`REQUEST: ${JSON.stringify(request.data)}`)
  for (const output of result.getOutputs()) console.log(`OUTPUT: ${output}`)
  console.log(`STATUS: ${result.status}`)
}

async function runStep(args: string[]): Promise<number | null> {
  const self = fileURLToPath(import.meta.url)
  const child = spawn(process.execPath, [...process.execArgv, self, ...args], { stdio: 'inherit' })
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('exit', (code) => resolve(code))
  })
}
