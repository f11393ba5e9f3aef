import { describe, expect, it } from 'vitest'
import { freezeDeep, isDeepFrozen, MemoryStore } from '../src/index.js'
import { conversation } from '../src/testing.js'

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
})
