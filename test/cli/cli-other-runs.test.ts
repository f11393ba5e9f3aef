import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Annotation, START, StateGraph } from '@langchain/langgraph'
import { CairnSaver } from '../../src/langgraph.js'
import { SqliteStore } from '../../src/sqlite.js'
import { squaresWorkflow } from '../workflow/helpers.js'
import { AGENTS, cairn, cairnJson } from './cli-helpers.js'

// A store holds more than agent runs: workflow runs and LangGraph threads are not resumed with an
// agent, and the commands that continue runs say so and say what does.

const TIMEOUT_MS = 120_000
let dir = ''
let url = ''
let workflowRun = ''
let threadRun = ''

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-cli-other-'))
  url = `sqlite:${join(dir, 'mixed.db')}`
  const store = new SqliteStore({ path: join(dir, 'mixed.db') })
  try {
    await squaresWorkflow(store).workflow.run({ message: 3 })
    const State = Annotation.Root({ steps: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) })
    const graph = new StateGraph(State).addNode('plan', () => ({ steps: ['plan'] })).addEdge(START, 'plan').compile({ checkpointer: new CairnSaver({ store }) })
    await graph.invoke({ steps: [] }, { configurable: { thread_id: 'chat-1' } })
    const runs = await store.listRuns({ limit: 10 })
    workflowRun = runs.find((run) => run.threadId === null)!.runId
    threadRun = runs.find((run) => run.threadId === 'chat-1')!.runId
  } finally {
    await store.close()
  }
}, TIMEOUT_MS)

afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('cairn on runs no agent wrote', () => {
  it('fork of a workflow checkpoint says to continue it with the workflow, not with cairn resume', async () => {
    const fork = await cairn(url, ['fork', `${workflowRun}#3`, '--run-id', 'squares-fork'])
    expect(fork.code, fork.stderr).toBe(0)
    const [forked] = await cairnJson<{ checkpointId: string }[]>(url, ['show', 'squares-fork'])
    expect(fork.stdout).toContain(`continue it with the workflow that wrote it: workflow.run({ checkpointId: '${forked!.checkpointId}' })`)
    expect(fork.stdout).not.toContain('cairn resume')
  }, TIMEOUT_MS)

  it('resume of a workflow run or a LangGraph thread names what it is and what continues it', async () => {
    const workflow = await cairn(url, ['resume', workflowRun, '--agents', AGENTS])
    expect(workflow.code).toBe(1)
    expect(workflow.stderr).toBe(`cairn: run ${workflowRun} is a run of workflow "squares", not an agent run: continue it with the workflow that wrote it, workflow.run({ checkpointId }) from its latest checkpoint (\`cairn show ${workflowRun}\`); cairn resume and cairn recover continue agent runs only\n`)
    const thread = await cairn(url, ['resume', threadRun, '--agents', AGENTS])
    expect(thread.code).toBe(1)
    expect(thread.stderr).toBe(`cairn: run ${threadRun} is LangGraph thread "chat-1", not an agent run: it goes on when your graph is invoked with that thread_id; cairn resume and cairn recover continue agent runs only\n`)
  }, TIMEOUT_MS)
})
