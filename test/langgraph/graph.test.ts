import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { HumanMessage } from '@langchain/core/messages'
import { MemorySaver } from '@langchain/langgraph'
import { CairnSaver } from 'cairn-agents/langgraph'
import { SqliteStore } from 'cairn-agents/sqlite'
import { runScript } from '../support/child.js'
import { buildAgentGraph } from './fixtures/agent-graph.js'

const CHILD = 'test/langgraph/fixtures/agent-child.ts'
const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function workspace() {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-langgraph-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  return { db: join(dir, 'graph.db'), log: join(dir, 'calls.log') }
}

async function child(args: string[]) {
  const out = await runScript([CHILD, ...args])
  return { ...out, result: out.code === 0 ? (JSON.parse(out.stdout) as { contents: unknown[]; interrupts: unknown[]; next: string[] }) : undefined }
}

/** The contents of a state's messages. */
const contentsOf = (state: unknown) => (state as { messages: { content: unknown }[] }).messages.map((message) => message.content)

const lines = async (log: string) => (await readFile(log, 'utf8')).split('\n').filter(Boolean)

/** The messages the agent ends with when nothing goes wrong (on LangGraph's MemorySaver). */
async function uninterrupted(rounds: number, log: string) {
  const graph = buildAgentGraph({ checkpointer: new MemorySaver(), rounds, log })
  const result = await graph.invoke({ messages: [new HumanMessage('add things up')] }, { configurable: { thread_id: 'reference' } })
  return contentsOf(result)
}

describe('a LangGraph agent on CairnSaver over SQLite', () => {
  it('SIGKILLed inside a tool call, is resumed by a fresh process with graph.invoke(null): nothing done before the crash runs again', async () => {
    const { db, log } = await workspace()
    const crashed = await child(['start', db, log, '4', '2'])
    expect(crashed.code).toBeNull()
    expect(await lines(log)).toEqual(['model 0', 'tool 0', 'model 1', 'tool 1', 'model 2', 'tool 2'])

    const resumed = await child(['resume', db, log, '4'])
    expect(resumed.stderr).toBe('')
    expect(resumed.result?.contents).toEqual(await uninterrupted(4, `${log}.reference`))
    expect(resumed.result?.next).toEqual([])
    // Only the step the kill cut short runs again.
    expect(await lines(log)).toEqual(['model 0', 'tool 0', 'model 1', 'tool 1', 'model 2', 'tool 2', 'tool 2', 'model 3', 'tool 3', 'model 4'])
  })

  it('an interrupt() survives a process change and Command({ resume }) answers it in another process', async () => {
    const { db, log } = await workspace()
    const asked = await child(['start', db, log, '1', 'approval'])
    expect(asked.result?.interrupts).toEqual([{ question: 'run the tools?' }])
    expect(asked.result?.next).toEqual(['approve'])

    const answered = await child(['answer', db, log, '1', 'yes'])
    expect(answered.stderr).toBe('')
    expect(answered.result?.interrupts).toEqual([])
    expect(answered.result?.contents).toEqual(await uninterrupted(1, `${log}.reference`))
    expect(await lines(log)).toEqual(['model 0', 'approved yes', 'tool 0', 'model 1'])
  })

  it('travels in time: lists the history, updates an old state, and runs again from an old checkpoint as a fork', async () => {
    const { db, log } = await workspace()
    const store = new SqliteStore({ path: db })
    cleanups.push(() => store.close())
    const graph = buildAgentGraph({ checkpointer: new CairnSaver({ store }), rounds: 2, log })
    const config = { configurable: { thread_id: 'travel' } }
    const done = await graph.invoke({ messages: [new HumanMessage('add things up')] }, config)
    const finalContents = contentsOf(done)

    const history = []
    for await (const snapshot of graph.getStateHistory(config)) history.push(snapshot)
    expect(contentsOf(history[0]?.values)).toEqual(finalContents)
    for (let k = 0; k + 1 < history.length; k++) {
      expect(history[k]?.parentConfig?.configurable?.checkpoint_id).toBe(history[k + 1]?.config.configurable?.checkpoint_id)
    }
    expect(history.at(-1)?.metadata?.source).toBe('input')

    // Back to the state where the tools were about to run for the first time.
    const beforeTools = history.filter((snapshot) => snapshot.next.includes('tools')).at(-1)!
    expect(contentsOf(beforeTools.values)).toHaveLength(2)
    const replayed = await graph.invoke(null, beforeTools.config)
    expect(contentsOf(replayed)).toEqual(finalContents)
    const after = []
    for await (const snapshot of graph.getStateHistory(config)) after.push(snapshot)
    expect(after.length).toBeGreaterThan(history.length)
    expect(await lines(log)).toEqual(['model 0', 'tool 0', 'model 1', 'tool 1', 'model 2', 'tool 0', 'model 1', 'tool 1', 'model 2'])

    // Edit the old state: a forked checkpoint holds the edit, and the thread's latest is the fork.
    const edited = await graph.updateState(beforeTools.config, { messages: [new HumanMessage('one more thing')] })
    const forked = await graph.getState(edited)
    expect(contentsOf(forked.values)).toEqual([...contentsOf(beforeTools.values), 'one more thing'])
    expect(forked.parentConfig?.configurable?.checkpoint_id).toBe(beforeTools.config.configurable?.checkpoint_id)
    expect((await graph.getState(config)).config.configurable?.checkpoint_id).toBe(edited.configurable?.checkpoint_id)
  })
})
