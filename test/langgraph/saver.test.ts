import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { AIMessage } from '@langchain/core/messages'
import { ERROR, INTERRUPT, emptyCheckpoint, uuid6, type Checkpoint } from '@langchain/langgraph-checkpoint'
import { FileStore, MemoryStore, type CheckpointStore } from 'cairn-agents'
import { DelegatingStore } from 'cairn-agents/engine'
import { CairnSaver } from 'cairn-agents/langgraph'
import { foldRunLog } from '../support/file-log.js'

/** A store that counts the calls made to it. */
class CountingStore extends DelegatingStore {
  calls = 0
  constructor(inner: CheckpointStore) {
    super(inner)
    return new Proxy(this, {
      get: (target, key, receiver) => {
        const value = Reflect.get(target, key, receiver) as unknown
        if (typeof value !== 'function' || key === 'constructor') return value
        return (...args: unknown[]) => {
          target.calls++
          return (value as (...a: unknown[]) => unknown).apply(target, args)
        }
      },
    })
  }
}

const meta = { source: 'loop' as const, step: 0, parents: {} }

function checkpoint(values: Record<string, unknown> = {}): Checkpoint {
  return { ...emptyCheckpoint(), id: uuid6(-1), channel_values: values, channel_versions: Object.fromEntries(Object.keys(values).map((k) => [k, 1])) }
}

async function thread(saver: CairnSaver, threadId: string, length: number, checkpointNs = '') {
  let config = { configurable: { thread_id: threadId, checkpoint_ns: checkpointNs } }
  for (let i = 0; i < length; i++) config = (await saver.put(config, checkpoint({ step: i }), { ...meta, step: i }, { step: 1 })) as typeof config
  return config
}

describe('CairnSaver', () => {
  it('keeps the first regular write of a task and index, and replaces special writes (errors, interrupts) with the newest', async () => {
    const saver = new CairnSaver({ store: new MemoryStore() })
    const config = await saver.put({ configurable: { thread_id: 't' } }, checkpoint(), meta, {})
    await saver.putWrites(config, [['answer', 'first'], [ERROR, { message: 'boom 1' }]], 'task-1')
    await saver.putWrites(config, [['answer', 'retried'], [ERROR, { message: 'boom 2' }], [INTERRUPT, { value: 'approve?' }]], 'task-1')
    const tuple = await saver.getTuple(config)
    expect(tuple?.pendingWrites).toEqual([
      ['task-1', INTERRUPT, { value: 'approve?' }],
      ['task-1', ERROR, { message: 'boom 2' }],
      ['task-1', 'answer', 'first'],
    ])
  })

  it('keeps thread ids, namespaces with | and :, and checkpoint ids exactly, without collisions', async () => {
    const saver = new CairnSaver({ store: new MemoryStore() })
    const id = uuid6(-1)
    const places = [
      { thread_id: 'a|b', checkpoint_ns: '' },
      { thread_id: 'a', checkpoint_ns: 'b' },
      { thread_id: 'a', checkpoint_ns: '|b' },
      { thread_id: 'a', checkpoint_ns: 'parent:1|child:2' },
      { thread_id: 'a:parent', checkpoint_ns: '1|child:2' },
    ]
    for (const [k, place] of places.entries()) {
      const saved = await saver.put({ configurable: place }, { ...checkpoint({ k }), id }, meta, { k: 1 })
      expect(saved.configurable).toEqual({ ...place, checkpoint_id: id })
    }
    for (const [k, place] of places.entries()) {
      const tuple = await saver.getTuple({ configurable: { ...place, checkpoint_id: id } })
      expect(tuple?.checkpoint.channel_values).toEqual({ k })
      expect(tuple?.config.configurable).toEqual({ ...place, checkpoint_id: id })
    }
    const listed = []
    for await (const tuple of saver.list({ configurable: { thread_id: 'a' } })) listed.push(tuple.config.configurable?.checkpoint_ns as string)
    expect(listed.sort()).toEqual(['b', '|b', 'parent:1|child:2'].sort())
  })

  it('reads the latest checkpoint and a checkpoint by id with the same number of store calls on a thread of 3 or 60 steps', async () => {
    const counts: number[][] = []
    for (const length of [3, 60]) {
      const store = new CountingStore(new MemoryStore())
      const saver = new CairnSaver({ store })
      const last = await thread(saver, `t${length}`, length)
      store.calls = 0
      expect((await saver.getTuple({ configurable: { thread_id: `t${length}` } }))?.checkpoint.channel_values).toEqual({ step: length - 1 })
      const latest = store.calls
      store.calls = 0
      expect((await saver.getTuple(last))?.checkpoint.channel_values).toEqual({ step: length - 1 })
      counts.push([latest, store.calls])
    }
    expect(counts[0]).toEqual(counts[1])
  })

  it('serializes a message a task wrote once more for its checkpoint only when it changed since the write (the reducer gave it an id)', async () => {
    const saver = new CairnSaver({ store: new MemoryStore() })
    const serialized: unknown[] = []
    const dumps = saver.serde.dumpsTyped.bind(saver.serde)
    saver.serde.dumpsTyped = (value: unknown) => {
      serialized.push(value)
      return dumps(value)
    }
    const withId = new AIMessage({ content: 'has an id', id: 'ai-1' })
    const withoutId = new AIMessage({ content: 'no id yet' })
    const first = await saver.put({ configurable: { thread_id: 't' } }, checkpoint({ messages: [] }), meta, { messages: 1 })
    await saver.putWrites(first, [['messages', [withId, withoutId]]], 'task-1')
    // As LangGraph's message reducer does between the write and the checkpoint.
    withoutId.id = 'ai-2'
    withoutId.lc_kwargs.id = 'ai-2'
    const next = { ...checkpoint({ messages: [withId, withoutId] }), channel_versions: { messages: 2 } }
    const second = await saver.put(first, next, meta, { messages: 2 })
    expect(serialized.filter((value) => value === withId)).toHaveLength(1)
    expect(serialized.filter((value) => value === withoutId)).toHaveLength(2)
    const fresh = new CairnSaver({ store: saver.store })
    const messages = (await fresh.getTuple(second))?.checkpoint.channel_values.messages as AIMessage[]
    expect(messages.map((message) => [message.id, message.content])).toEqual([
      ['ai-1', 'has an id'],
      ['ai-2', 'no id yet'],
    ])
    const written = (await fresh.getTuple(first))?.pendingWrites?.[0]?.[2] as AIMessage[]
    expect(written.map((message) => message.id)).toEqual(['ai-1', undefined])
  })

  it('stores each message of a growing conversation once: the store holds it as an append-only list', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'cairn-saver-'))
    try {
      const saver = new CairnSaver({ store: new FileStore({ directory }) })
      let config = { configurable: { thread_id: 'chat', checkpoint_ns: '' } }
      const messages: string[] = []
      for (let i = 0; i < 40; i++) {
        messages.push(`message ${i} `.repeat(30))
        const next = { ...checkpoint({ messages: [...messages] }), channel_versions: { messages: i + 1 } }
        config = (await saver.put(config, next, meta, { messages: i + 1 })) as typeof config
      }
      expect((await saver.getTuple(config))?.checkpoint.channel_values).toEqual({ messages })
      // Every list item of every run's log: each message once.
      const lines: string[] = []
      for (const run of await readdir(join(directory, 'runs'))) for (const items of (await foldRunLog(directory, run)).lists.values()) lines.push(...items)
      expect(lines).toHaveLength(messages.length)
      expect(new Set(lines).size).toBe(lines.length)
      await saver.store.close()
    } finally {
      await rm(directory, { recursive: true, force: true })
    }
  })

})
