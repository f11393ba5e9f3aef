import { describe, expect, it } from 'vitest'
import { CheckpointCorruptionError, configureLimits, DEFAULT_LIMITS, MemoryStore } from '../src/index.js'
import { decodeValue } from '../src/core/codec.js'
import { freezeDeep, isDeepFrozen } from '../src/core/freeze.js'
import { conversation } from '../src/testing.js'
import { cacheFromRefs, chainHash, decodePayload, encodePayload, type ListCache } from '../src/store/encoding/payload-lists.js'

let listIds = 0
const newListId = () => `list-${++listIds}`

describe('payload list encoding', () => {
  it('captures an in-place edit of a message that is not frozen', async () => {
    const store = new MemoryStore()
    const messages = conversation(5)
    await store.save({ runId: 'r', kind: 'k', phase: 'p', payload: { messages } })
    messages[1]!.content[0]!.text = 'edited in place'
    const id = await store.save({ runId: 'r', kind: 'k', phase: 'p', payload: { messages } })
    expect((await store.load<{ messages: typeof messages }>(id)).payload.messages[1]!.content[0]!.text).toBe('edited in place')
  })

  it('reuses the JSON of deeply frozen messages and still stores each checkpoint exactly', async () => {
    const store = new MemoryStore()
    const messages: unknown[] = []
    const ids: string[] = []
    for (const message of conversation(30)) {
      messages.push(freezeDeep(message))
      ids.push(await store.save({ runId: 'r', kind: 'k', phase: 'p', payload: { messages } }))
    }
    for (const [i, id] of ids.entries()) expect((await store.load(id)).payload).toEqual({ messages: conversation(i + 1) })
  })

  it('an append shares the kept list\'s arrays, and a second save from the same list (one not kept) still gets its own items and hash', () => {
    const messages = conversation(8).map((message) => freezeDeep(message))
    const json = messages.map((message) => JSON.stringify(message))
    const first = encodePayload({ messages: messages.slice(0, 6) }, undefined, newListId)
    const kept = first.lists.get('/messages')!
    // Appending two items reuses the first save's arrays instead of copying six.
    const appended = encodePayload({ messages: messages.slice(0, 8) }, first.lists, newListId)
    expect(appended.lists.get('/messages')!.sources).toBe(kept.sources)
    expect(appended.appends).toEqual([{ listId: kept.id, expectedLength: 6, items: json.slice(6, 8) }])
    expect(appended.refs[0]).toEqual({ id: kept.id, n: 8, h: chainHash('', json) })
    // A save from the first list again (the append above was not kept): the arrays it would share
    // already hold the other save's items, so it copies its six and appends its own.
    const other = freezeDeep({ role: 'user' as const, content: [{ text: 'another answer '.repeat(20) }] })
    const branch = encodePayload({ messages: [...messages.slice(0, 6), other] }, first.lists, newListId)
    const otherJson = JSON.stringify(other)
    expect(branch.appends).toEqual([{ listId: kept.id, expectedLength: 6, items: [otherJson] }])
    expect(branch.refs[0]).toEqual({ id: kept.id, n: 7, h: chainHash('', [...json.slice(0, 6), otherJson]) })
    expect(branch.lists.get('/messages')!.sources).not.toBe(kept.sources)
    // And the first list is still what it was: six items.
    expect(kept.n).toBe(6)
    const again = encodePayload({ messages: messages.slice(0, 6) }, first.lists, newListId)
    expect(again.appends).toEqual([])
    expect(again.refs[0]).toEqual(first.refs[0])
  })

  it('a writer that knows a list by its ref alone (a fresh process) extends it once the chain hash of its head matches, and starts a new one otherwise', () => {
    const messages = conversation(8).map((message) => JSON.parse(JSON.stringify(message)) as (typeof message))
    const json = messages.map((message) => JSON.stringify(message))
    const first = encodePayload({ messages: messages.slice(0, 6) }, undefined, newListId)
    const fromRefs = cacheFromRefs(JSON.parse(first.body), first.refs)
    expect(fromRefs.get('/messages')).toMatchObject({ id: first.refs[0]!.id, n: 6, h: first.refs[0]!.h, sources: [] })
    const extended = encodePayload({ messages }, fromRefs, newListId)
    expect(extended.appends).toEqual([{ listId: first.refs[0]!.id, expectedLength: 6, items: json.slice(6) }])
    expect(extended.refs[0]).toEqual({ id: first.refs[0]!.id, n: 8, h: chainHash('', json) })
    const edited = [{ ...messages[0]!, content: [{ text: 'edited' }] }, ...messages.slice(1)]
    const restarted = encodePayload({ messages: edited }, fromRefs, newListId)
    expect(restarted.refs[0]!.id).not.toBe(first.refs[0]!.id)
    expect(restarted.appends[0]).toMatchObject({ expectedLength: 0 })
    expect(restarted.appends[0]!.items).toHaveLength(8)
  })

  it('marks only plain trees as deeply frozen: a Date inside stays re-serialized', async () => {
    const plain = freezeDeep({ a: [1, { b: 'c' }] })
    expect(isDeepFrozen(plain)).toBe(true)
    expect(Object.isFrozen(plain.a[1])).toBe(true)
    const at = new Date(0)
    const withDate = freezeDeep({ text: 'x'.repeat(2000), at })
    expect(isDeepFrozen(withDate)).toBe(false)
    const store = new MemoryStore()
    await store.save({ runId: 'd', kind: 'k', phase: 'p', payload: { messages: [withDate] } })
    at.setTime(1000)
    const id = await store.save({ runId: 'd', kind: 'k', phase: 'p', payload: { messages: [withDate] } })
    expect((await store.load<{ messages: { at: Date }[] }>(id)).payload.messages[0]!.at.getTime()).toBe(1000)
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    expect(() => freezeDeep(cyclic)).not.toThrow()
    expect(isDeepFrozen(cyclic)).toBe(false)
  })

  it('a run read in one pass shares each list item across its records, frozen through and through, and a later save reuses it', async () => {
    const store = new MemoryStore()
    const at = new Date(5)
    const messages = [...conversation(6), { role: 'user', content: [{ text: 'x'.repeat(300) }], at }]
    await store.save({ runId: 'one-pass', kind: 'k', phase: 'p', payload: { messages: messages.slice(0, 4) } })
    await store.save({ runId: 'one-pass', kind: 'k', phase: 'p', payload: { messages } })
    const [first, second] = (await store.loadRun('one-pass')) as { payload: { messages: { content: { text: string }[]; at?: Date }[] } }[]
    const item = second!.payload.messages[1]!
    expect(first!.payload.messages[1]).toBe(item)
    expect(Object.isFrozen(item) && Object.isFrozen(item.content) && Object.isFrozen(item.content[0])).toBe(true)
    expect(() => {
      item.content[0]!.text = 'changed'
    }).toThrow(TypeError)
    expect(isDeepFrozen(item)).toBe(true)
    // An item holding a Date is frozen around it, never marked: a later save serializes it again.
    expect(isDeepFrozen(second!.payload.messages[6])).toBe(false)
    expect(second!.payload.messages[6]!.at).toEqual(at)
    const id = await store.save({ runId: 'one-pass', kind: 'k', phase: 'p', payload: { messages: second!.payload.messages } })
    expect((await store.load(id)).payload).toEqual({ messages })
  })

  it('a run read in one pass checks the depth of a list item without tags: one at maxDepth is read frozen, one deeper is refused naming the item', async () => {
    const nested = (depth: number): unknown => {
      let value: unknown = 'x'.repeat(300)
      for (let i = 0; i < depth; i++) value = { value }
      return value
    }
    const store = new MemoryStore()
    await store.save({ runId: 'deep', kind: 'k', phase: 'p', payload: { messages: [nested(2), nested(2), nested(2), nested(5)] } })
    try {
      configureLimits({ maxDepth: 5 })
      const [record] = (await store.loadRun('deep')) as { payload: { messages: unknown[] } }[]
      expect(record!.payload.messages[3]).toEqual(nested(5))
      expect(isDeepFrozen(record!.payload.messages[3])).toBe(true)
      configureLimits({ maxDepth: 4 })
      const refused = await store.loadRun('deep').catch((err: unknown) => err)
      expect(refused).toBeInstanceOf(CheckpointCorruptionError)
      expect((refused as Error).message).toMatch(/item 3 of list .*maxDepth/)
    } finally {
      configureLimits({ maxDepth: DEFAULT_LIMITS.maxDepth })
    }
  })

  it('stores a value the conversation also holds in the body itself: a record reads its own body and lists alone', async () => {
    const messages = conversation(10).map(freezeDeep)
    const last = messages[9]!
    const payload = { messages, pending: last, finalText: last.content[0]!.text }
    const encoded = encodePayload(payload, undefined, newListId)
    const body = JSON.parse(encoded.body) as Record<string, unknown>
    expect(body.messages).toEqual({ '~': 'list', i: 0 })
    expect(body.pending).toEqual(JSON.parse(JSON.stringify(last)))
    expect(body.finalText).toBe(last.content[0]!.text)

    const store = new MemoryStore()
    const id = await store.save({ runId: 'inline', kind: 'k', phase: 'p', payload })
    expect((await store.load(id)).payload).toEqual(JSON.parse(JSON.stringify(payload)))
  })

  it('refuses a list ref to a list the record does not have, and a ref of any other kind', () => {
    const items = conversation(2).map((message) => JSON.stringify(message))
    const refs = [{ id: 'l', n: 2, h: chainHash('', items) }]
    const decode = (ref: unknown) => decodeValue(decodePayload({ body: { messages: { '~': 'list', i: 0 }, x: ref }, refs, items: [items], runId: 'r', checkpointId: 'c' }), { runId: 'r', checkpointId: 'c', what: 'payload' })
    expect(decode(1)).toMatchObject({ messages: conversation(2), x: 1 })
    expect(() => decode({ '~': 'list', i: 3 })).toThrow(/list #3, which it does not have/)
    expect(() => decode({ '~': 'item', i: 0, n: 1 })).toThrow(CheckpointCorruptionError)
  })

  it('refuses an item that is not one JSON value, naming it, even when its chain hash matches', () => {
    for (const bad of ['{"role":"user"', '1,2', '']) {
      const items = [JSON.stringify(conversation(1)[0]), bad]
      const refs = [{ id: 'l', n: 2, h: chainHash('', items) }]
      const decode = () => decodePayload({ body: { messages: { '~': 'list', i: 0 } }, refs, items: [items], runId: 'r', checkpointId: 'c' })
      expect(decode).toThrow(CheckpointCorruptionError)
      expect(decode).toThrow('checkpoint c of run r: item 1 of list l is not valid JSON')
    }
  })

  it('extends a list by what was appended, re-serializes items that are not frozen, and starts a new list when the head changes', () => {
    const frozen = conversation(4).map(freezeDeep)
    const mutable = { role: 'user', content: [{ text: 'mutable '.repeat(40) }] }
    let cache: ListCache | undefined
    const save = (messages: unknown[]) => {
      const encoded = encodePayload({ messages }, cache, newListId)
      cache = encoded.lists
      return encoded
    }
    const first = save([...frozen.slice(0, 2), mutable])
    expect(first.appends).toHaveLength(1)
    const listId = first.appends[0]!.listId
    // The same frozen head, the mutable item edited in place, one more frozen item.
    mutable.content[0]!.text = 'edited '.repeat(40)
    const second = save([...frozen.slice(0, 2), mutable, frozen[2]])
    // The edited item no longer matches what the list holds at its place: a new list.
    expect(second.appends).toMatchObject([{ expectedLength: 0, items: { length: 4 } }])
    expect(second.appends[0]!.listId).not.toBe(listId)
    expect(JSON.parse(second.appends[0]!.items[2]!)).toEqual(mutable)
    // Appending after an unchanged head only appends.
    const third = save([...frozen.slice(0, 2), mutable, frozen[2], frozen[3]])
    expect(third.appends).toMatchObject([{ listId: second.appends[0]!.listId, expectedLength: 4, items: { length: 1 } }])
    expect(third.refs[0]!.h).toBe(chainHash('', [...frozen.slice(0, 2), mutable, frozen[2], frozen[3]].map((m) => JSON.stringify(m))))
    // Dropping the head (a trimmed conversation) starts a new list.
    const fourth = save(frozen.slice(1))
    expect(fourth.appends).toMatchObject([{ expectedLength: 0, items: { length: 3 } }])
  })
})
