import { describe, expect, it } from 'vitest'
import { CairnError, CheckpointCorruptionError, CheckpointError, CheckpointNotFoundError, ConfigMismatchError, hashValue, SchemaVersionError, StoreError } from '../src/index.js'
import { canonicalJson, idTimestamp, newId, SchemaRegistry } from '../src/engine.js'
import { hashEncoded, matchesEncodedHash } from '../src/core/hash.js'

describe('canonical hashing', () => {
  it('ignores key order and distinguishes values', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: null } })).toBe('{"a":{"c":null,"d":[1,{"y":2,"z":1}]},"b":1}')
    expect(hashValue({ a: 1, b: 2 })).toBe(hashValue({ b: 2, a: 1 }))
    expect(hashValue({ a: 1 })).not.toBe(hashValue({ a: 2 }))
    expect(hashValue({ at: new Date(0) })).not.toBe(hashValue({ at: '1970-01-01T00:00:00.000Z' }))
    expect(hashValue('x')).toMatch(/^[0-9a-f]{64}$/)
  })

  it('checks a stored text against a hash as the full canonical writer does, for texts as written and edited', () => {
    const written = { toolUseId: 'call-1', status: 'success', content: [{ text: 'step 1', extra: { z: 1, a: [2] } }], n: -1.5 }
    const text = JSON.stringify(written)
    const hash = hashEncoded(JSON.parse(text) as never)
    expect(matchesEncodedHash(JSON.parse(text) as never, text, hash)).toBe(true)
    // Edits: a changed value next to the slice, a duplicate key whose value wins, whitespace, a member moved.
    const edits = [
      text.replace('"success"', '"failure"'),
      text.replace('"n":-1.5}', '"n":-1.5,"status":"failure"}'),
      text.replace('"content":[', '"content":[{"text":"forged"},'),
      text.replace('"status":"success",', '"status":"success","status":"x",'),
      text.replace(',"n":-1.5}', ',"n":-1.5 }'),
      `{"status":"success",${text.slice(1).replace('"status":"success",', '')}`,
      text.replace('"step 1"', '"step 2"'),
    ]
    for (const edited of edits) {
      const parsed = JSON.parse(edited) as never
      expect(matchesEncodedHash(parsed, edited, hash)).toBe(hashEncoded(parsed) === hash)
    }
    expect(matchesEncodedHash(JSON.parse(edits[0]!) as never, edits[0]!, hash)).toBe(false)
    expect(matchesEncodedHash(JSON.parse(edits[5]!) as never, edits[5]!, hash)).toBe(true)
  })

  it('agrees with the full canonical writer on generated values and their edited texts', () => {
    let seed = 11
    const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648
    const keys = ['a', 'b', 'B', '1', '10', '__proto__', 'é', '', '~', ':', ',"a":1', '}']
    const scalars = [null, true, 0, 1.5, 'x"', 'y,"a":1}', '{', 'é']
    const value = (depth: number): unknown => {
      const r = random()
      if (depth > 3 || r < 0.3) return scalars[Math.floor(random() * scalars.length)]
      if (r < 0.5) return Array.from({ length: Math.floor(random() * 4) }, () => value(depth + 1))
      const object: Record<string, unknown> = {}
      for (let n = Math.floor(random() * 5); n > 0; n--) {
        Object.defineProperty(object, keys[Math.floor(random() * keys.length)]!, { value: value(depth + 1), enumerable: true, writable: true, configurable: true })
      }
      return object
    }
    const inserts = ['', ' ', ',', '"a":1,', '}', '{', '0']
    for (let i = 0; i < 3000; i++) {
      const text = JSON.stringify(value(0))
      const hash = hashEncoded(JSON.parse(text) as never)
      expect(matchesEncodedHash(JSON.parse(text) as never, text, hash)).toBe(true)
      const at = Math.floor(random() * text.length)
      const edited = text.slice(0, at) + inserts[Math.floor(random() * inserts.length)]! + text.slice(at + (random() < 0.5 ? 1 : 0))
      let parsed: never
      try {
        parsed = JSON.parse(edited) as never
      } catch {
        continue
      }
      expect(matchesEncodedHash(parsed, edited, hash)).toBe(hashEncoded(parsed) === hash)
    }
  })
})

describe('ids', () => {
  it('are unique UUIDv7 strings that sort by creation time', () => {
    const ids = Array.from({ length: 5000 }, () => newId())
    expect(new Set(ids).size).toBe(ids.length)
    expect([...ids].sort()).toEqual(ids)
    expect(ids[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    const at = Date.UTC(2030, 0, 1)
    expect(idTimestamp(newId(at))).toBeGreaterThanOrEqual(at)
  })
})

describe('errors', () => {
  it('carry a code, a cause, a name and context fields', () => {
    const cause = new Error('disk full')
    const store = new StoreError('failed to save checkpoint (run r1): disk full', { runId: 'r1', cause })
    expect(store).toBeInstanceOf(CairnError)
    expect(store.name).toBe('StoreError')
    expect(store.code).toBe('store_failure')
    expect(store.cause).toBe(cause)
    const corrupt = new CheckpointCorruptionError('bad', { runId: 'r1', checkpointId: 'c1' })
    expect(corrupt).toBeInstanceOf(CheckpointError)
    expect([corrupt.name, corrupt.code, corrupt.runId, corrupt.checkpointId]).toEqual(['CheckpointCorruptionError', 'checkpoint_corrupt', 'r1', 'c1'])
    expect(new CheckpointNotFoundError('gone', { checkpointId: 'c' }).code).toBe('checkpoint_not_found')
    expect(new ConfigMismatchError({ message: 'changed', expected: 'a', actual: 'b' }).code).toBe('config_mismatch')
  })
})

describe('schema registry', () => {
  const v2 = () =>
    new SchemaRegistry()
      .define('note', 3)
      .register({ kind: 'note', from: 1, description: 'text became lines', up: (p) => ({ lines: (p as { text: string }).text.split('\n') }) })
      .register({ kind: 'note', from: 2, description: 'lines gained a count', up: (p) => ({ ...(p as object), count: (p as { lines: string[] }).lines.length }) })

  it('upgrades an old record step by step', () => {
    expect(v2().upgrade({ kind: 'note', schemaVersion: 1, payload: { text: 'a\nb' } })).toEqual({
      schemaVersion: 3,
      payload: { lines: ['a', 'b'], count: 2 },
    })
  })

  it('rejects a newer record naming both versions', () => {
    const error = (() => {
      try {
        v2().upgrade({ kind: 'note', schemaVersion: 7, payload: {} })
      } catch (err) {
        return err
      }
    })()
    expect(error).toBeInstanceOf(SchemaVersionError)
    expect((error as Error).message).toMatch(/version 7.*up to 3/)
  })

  it('rejects a missing step and a failing migration', () => {
    const gap = new SchemaRegistry().define('k', 3).register({ kind: 'k', from: 2, description: 'x', up: (p) => p })
    expect(() => gap.upgrade({ kind: 'k', schemaVersion: 1, payload: {} })).toThrow(/no migration from 1 to 2/)
    const failing = new SchemaRegistry().define('k', 2).register({ kind: 'k', from: 1, description: 'x', up: () => { throw new Error('boom') } })
    expect(() => failing.upgrade({ kind: 'k', schemaVersion: 1, payload: {} })).toThrow(/boom/)
  })

  it('passes records of undefined kinds through', () => {
    expect(new SchemaRegistry().upgrade({ kind: 'other', schemaVersion: 9, payload: 1 })).toEqual({ schemaVersion: 9, payload: 1 })
  })
})
