import { describe, expect, it } from 'vitest'
import {
  CairnError,
  canonicalJson,
  CheckpointCorruptionError,
  CheckpointError,
  CheckpointNotFoundError,
  ConfigMismatchError,
  hashValue,
  idTimestamp,
  newId,
  SchemaRegistry,
  SchemaVersionError,
  StoreError,
} from '../src/index.js'

describe('canonical hashing', () => {
  it('ignores key order and distinguishes values', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: null } })).toBe('{"a":{"c":null,"d":[1,{"y":2,"z":1}]},"b":1}')
    expect(hashValue({ a: 1, b: 2 })).toBe(hashValue({ b: 2, a: 1 }))
    expect(hashValue({ a: 1 })).not.toBe(hashValue({ a: 2 }))
    expect(hashValue({ at: new Date(0) })).not.toBe(hashValue({ at: '1970-01-01T00:00:00.000Z' }))
    expect(hashValue('x')).toMatch(/^[0-9a-f]{64}$/)
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
