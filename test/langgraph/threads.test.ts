import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { AIMessage, HumanMessage, RemoveMessage, type BaseMessage } from '@langchain/core/messages'
import { Annotation, Command, MemorySaver, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph'
import type { SerializerProtocol } from '@langchain/langgraph-checkpoint'
import { CairnSaver } from 'cairn-agents/langgraph'
import { SqliteStore } from 'cairn-agents/sqlite'
import { MemoryStore } from 'cairn-agents/testing'
import { cairn, cairnJson } from '../cli/cli-helpers.js'
import { buildAgentGraph } from './fixtures/agent-graph.js'

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function tempDir() {
  const dir = await mkdtemp(join(tmpdir(), 'cairn-threads-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  return dir
}

/** A saver whose serde counts the values it serializes. */
/** A one-node graph whose `log` reducer changes the array it is given in place (`unshift` or `push` the new entries) and returns it. */
function logGraph(checkpointer: CairnSaver | MemorySaver, change: 'unshift' | 'push') {
  const State = Annotation.Root({
    log: Annotation<{ text: string }[]>({
      reducer: (kept, added) => {
        kept[change](...added)
        return kept
      },
      default: () => [],
    }),
  })
  return new StateGraph(State)
    .addNode('note', () => ({}))
    .addEdge(START, 'note')
    .compile({ checkpointer })
}

type LogGraph = ReturnType<typeof logGraph>

/** The texts of a state's `log`. */
function texts(values: unknown): string[] {
  return (values as { log?: { text: string }[] }).log?.map((entry) => entry.text) ?? []
}

/** Every state of a thread's history, newest first, as its log's texts. */
async function logHistory(graph: LogGraph, config: { configurable: { thread_id: string } }): Promise<string[][]> {
  const states: string[][] = []
  for await (const snapshot of graph.getStateHistory(config)) states.push(texts(snapshot.values))
  return states
}

function countingSaver(store: MemoryStore | SqliteStore) {
  const saver = new CairnSaver({ store })
  const serde = (saver as unknown as { serde: SerializerProtocol }).serde
  const counter = { dumps: 0 }
  const dumpsTyped = serde.dumpsTyped.bind(serde)
  serde.dumpsTyped = (value: unknown) => {
    counter.dumps++
    return dumpsTyped(value)
  }
  return { saver, counter }
}

/** A chat graph: each invoke appends a human message and the model's answer; `edit` rewrites history first. */
function chatGraph(checkpointer: CairnSaver | MemorySaver) {
  const State = Annotation.Root({ ...MessagesAnnotation.spec, edit: Annotation<string>() })
  return new StateGraph(State)
    .addNode('model', (state: { messages: BaseMessage[]; edit?: string }) => {
      const last = state.messages[state.messages.length - 1]!
      const removals = state.edit === 'drop-first' && state.messages[0]?.id ? [new RemoveMessage({ id: state.messages[0].id })] : []
      return { messages: [...removals, new AIMessage(`echo ${textOf(last)}`)] }
    })
    .addEdge(START, 'model')
    .compile({ checkpointer })
}

const textOf = (message: BaseMessage) => (typeof message.content === 'string' ? message.content : JSON.stringify(message.content))
const contents = (messages: BaseMessage[]) => messages.map(textOf)
const messagesOf = (values: unknown) => (values as { messages: BaseMessage[] }).messages

describe('CairnSaver puts in time linear in the thread', () => {
  it('serializes only the messages a step added, however long the thread is', async () => {
    const { saver, counter } = countingSaver(new MemoryStore())
    const graph = chatGraph(saver)
    const config = { configurable: { thread_id: 'linear' } }
    const perTurn: number[] = []
    for (let turn = 0; turn < 30; turn++) {
      const before = counter.dumps
      await graph.invoke({ messages: [new HumanMessage(`q${turn}`)] }, config)
      perTurn.push(counter.dumps - before)
    }
    // A turn adds two messages; the rest of each put is metadata and small channels. Without the
    // memo of stored items every put serializes the whole conversation again: 60 messages by the end.
    expect(Math.max(...perTurn.slice(5))).toBe(Math.min(...perTurn.slice(5)))
    expect(perTurn[29]).toBeLessThan(20)
    const state = await graph.getState(config)
    expect(contents(messagesOf(state.values))).toHaveLength(60)
  })

  it('stores a history a reducer rewrote (RemoveMessage) as LangGraph itself holds it, state by state', async () => {
    const store = new MemoryStore()
    const graph = chatGraph(new CairnSaver({ store }))
    const reference = chatGraph(new MemorySaver())
    const config = { configurable: { thread_id: 'edited' } }
    const turns = [{ messages: [new HumanMessage('a')] }, { messages: [new HumanMessage('b')] }, { messages: [new HumanMessage('c')], edit: 'drop-first' }, { messages: [new HumanMessage('d')] }]
    for (const input of turns) {
      await graph.invoke(input, config)
      await reference.invoke(input, config)
    }
    const history = async (g: ReturnType<typeof chatGraph>) => {
      const states: string[][] = []
      for await (const snapshot of g.getStateHistory(config)) states.push(contents((snapshot.values as { messages?: BaseMessage[] }).messages ?? []))
      return states
    }
    const ours = await history(graph)
    expect(ours).toEqual(await history(reference))
    expect(ours[0]).toEqual(['b', 'echo b', 'c', 'echo c', 'd', 'echo d'])
    // A fresh saver on the same store (a new process) reads the same thread.
    const fresh = chatGraph(new CairnSaver({ store }))
    expect(await history(fresh)).toEqual(ours)
  })

  it('a message replaced by a new object with the same id is stored anew', async () => {
    const store = new MemoryStore()
    const graph = chatGraph(new CairnSaver({ store }))
    const config = { configurable: { thread_id: 'replaced' } }
    await graph.invoke({ messages: [new HumanMessage({ content: 'first', id: 'h1' })] }, config)
    await graph.updateState(config, { messages: [new HumanMessage({ content: 'corrected', id: 'h1' })] })
    const reread = await chatGraph(new CairnSaver({ store })).getState(config)
    expect(contents(messagesOf(reread.values))).toEqual(['corrected', 'echo first'])
  })

  it('an array a reducer changes in place after a put (prepending to it) is stored as it now is', async () => {
    // The reducer returns the very array it was given, with new items in front: every item moves.
    const build = (checkpointer: CairnSaver | MemorySaver) => logGraph(checkpointer, 'unshift')
    const store = new MemoryStore()
    const graph = build(new CairnSaver({ store }))
    const reference = build(new MemorySaver())
    const config = { configurable: { thread_id: 'in-place' } }
    for (const text of ['a', 'b', 'c', 'd']) {
      await graph.invoke({ log: [{ text }] }, config)
      await reference.invoke({ log: [{ text }] }, config)
    }
    const fresh = build(new CairnSaver({ store }))
    expect(texts((await fresh.getState(config)).values)).toEqual(['d', 'c', 'b', 'a'])
    expect(await logHistory(fresh, config)).toEqual(await logHistory(reference, config))
  })

  it('an array a reducer appends to in place, and a branch from an older state, are stored as LangGraph holds them', async () => {
    // Each put's array starts with the whole last one: the saver extends what it remembers of it.
    const build = (checkpointer: CairnSaver | MemorySaver) => logGraph(checkpointer, 'push')
    const store = new MemoryStore()
    const graph = build(new CairnSaver({ store }))
    const reference = build(new MemorySaver())
    const config = { configurable: { thread_id: 'appended' } }
    for (const text of ['a', 'b', 'c']) {
      await graph.invoke({ log: [{ text }] }, config)
      await reference.invoke({ log: [{ text }] }, config)
    }
    // A branch from the state after 'a': its array starts with fewer items than the last put's.
    const branchFrom = async (g: LogGraph) => {
      for await (const snapshot of g.getStateHistory(config)) if (texts(snapshot.values).join() === 'a' && snapshot.next.length === 0) return snapshot.config
      throw new Error('no state after a')
    }
    for (const g of [graph, reference]) {
      const forked = await g.updateState(await branchFrom(g), { log: [{ text: 'x' }] })
      await g.invoke({ log: [{ text: 'y' }] }, forked)
      await g.invoke({ log: [{ text: 'z' }] }, config)
    }
    const fresh = build(new CairnSaver({ store }))
    expect(texts((await fresh.getState(config)).values)).toEqual(texts((await reference.getState(config)).values))
    expect(await logHistory(fresh, config)).toEqual(await logHistory(reference, config))
  })
})

describe('a LangGraph thread in the CLI', () => {
  it('cairn runs lists it by thread id with its state, and cairn show THREAD prints each checkpoint with its source, writers and next nodes', async () => {
    const dir = await tempDir()
    const path = join(dir, 'graph.db')
    const store = new SqliteStore({ path })
    cleanups.push(() => store.close())
    const graph = buildAgentGraph({ checkpointer: new CairnSaver({ store }), rounds: 1, log: join(dir, 'calls.log'), approval: true })
    await graph.invoke({ messages: [new HumanMessage('add things up')] }, { configurable: { thread_id: 'chat-7' } })
    const done = buildAgentGraph({ checkpointer: new CairnSaver({ store }), rounds: 1, log: join(dir, 'calls.log') })
    await done.invoke({ messages: [new HumanMessage('add things up')] }, { configurable: { thread_id: 'chat-8' } })
    await store.close()

    const runs = await cairnJson<{ runId: string; name: string; status: string; steps: number }[]>(`sqlite:${path}`, ['runs'])
    expect(runs.map((r) => [r.name, r.status]).sort()).toEqual([
      ['thread chat-7', 'interrupted'],
      ['thread chat-8', 'done'],
    ])
    expect(runs.every((r) => r.steps > 0)).toBe(true)

    const shown = await cairn(`sqlite:${path}`, ['show', 'chat-7'])
    expect(shown.stderr).toBe('')
    expect(shown.code).toBe(0)
    expect(shown.stdout).toContain('LangGraph thread "chat-7"')
    expect(shown.stdout).toContain('interrupted at step 1, waiting for an answer to {"question":"run the tools?"} (next: approve)')
    const lines = shown.stdout.split('\n').filter((line) => /^\s+\d+\s/.test(line))
    expect(lines).toHaveLength(3)
    expect(lines[0]).toMatch(/-1\s+input\s+lg\.\w+\s+next: __start__/)
    expect(lines[1]).toMatch(/0\s+loop\s+lg\.\w+\s+written by __start__; next: agent/)
    expect(lines[2]).toMatch(/1\s+loop\s+lg\.\w+\s+written by agent; next: approve/)
    expect(shown.stdout).not.toContain('langgraph checkpoint')

    // Answered, the thread runs to its end, and the listing says so.
    const reopened = new SqliteStore({ path })
    cleanups.push(() => reopened.close())
    const resumed = buildAgentGraph({ checkpointer: new CairnSaver({ store: reopened }), rounds: 1, log: join(dir, 'calls.log'), approval: true })
    await resumed.invoke(new Command({ resume: 'yes' }), { configurable: { thread_id: 'chat-7' } })
    await reopened.close()
    const after = await cairnJson<{ name: string; status: string }[]>(`sqlite:${path}`, ['runs'])
    expect(after.find((r) => r.name === 'thread chat-7')?.status).toBe('done')
    const byRun = await cairn(`sqlite:${path}`, ['show', runs.find((r) => r.name === 'thread chat-7')!.runId])
    expect(byRun.stdout).toContain('done at step')
    // The step the answer let run was written by the node that asked, not by LangGraph's own
    // `__interrupt__` bookkeeping (a versions_seen entry that is no node).
    const answered = byRun.stdout.split('\n').filter((line) => /^\s+\d+\s/.test(line))
    expect(answered[3]).toMatch(/2\s+loop\s+lg\.\w+\s+written by approve; next: tools/)
    expect(byRun.stdout).not.toContain('__interrupt__')
  })
})
