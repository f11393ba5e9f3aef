import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterEach, describe, expect, it } from 'vitest'
import { CheckpointCorruptionError, CheckpointError, configureLimits, DEFAULT_LIMITS, deserialize, limits, parseJson, serialize } from '../../src/index.js'
import { decodeValue, encodeValue } from '../../src/engine.js'
import { SqliteStore } from '../../src/sqlite.js'

function nestedArrays(depth: number): unknown {
  let value: unknown = 'leaf'
  for (let i = 0; i < depth; i++) value = [value]
  return value
}

function nestedObjects(depth: number): unknown {
  let value: unknown = 'leaf'
  for (let i = 0; i < depth; i++) value = { a: value }
  return value
}

const deepText = (depth: number) => '['.repeat(depth) + ']'.repeat(depth)

afterEach(() => {
  configureLimits(DEFAULT_LIMITS)
})

describe('codec limits', () => {
  it('refuses to encode a value nested deeper than maxDepth, naming the path, for any depth', () => {
    for (const value of [nestedArrays(100_000), nestedObjects(100_000), nestedObjects(DEFAULT_LIMITS.maxDepth + 1)]) {
      const err = catchError(() => encodeValue(value, 'payload'))
      expect(err).toBeInstanceOf(CheckpointError)
      expect((err as CheckpointError).code).toBe('unserializable')
      expect((err as CheckpointError).path).toMatch(/^payload(\[0\]|\.a)+$/)
      expect((err as Error).message).toContain('maxDepth')
    }
  })

  it('encodes and decodes a value exactly at maxDepth', () => {
    const value = nestedObjects(DEFAULT_LIMITS.maxDepth)
    expect(deserialize(serialize(value))).toEqual(value)
  })

  it('refuses to decode 100,000 nested arrays or objects with a corruption error, not a stack overflow', () => {
    for (const parsed of [nestedArrays(100_000), nestedObjects(100_000)]) {
      const err = catchError(() => decodeValue(parsed, { runId: 'r1', what: 'payload' }))
      expect(err).toBeInstanceOf(CheckpointCorruptionError)
      expect((err as CheckpointCorruptionError).runId).toBe('r1')
    }
    expect(catchError(() => deserialize(deepText(100_000)))).toBeInstanceOf(CheckpointCorruptionError)
    expect(catchError(() => parseJson(deepText(100_000), { what: 'checkpoint body' }))).toBeInstanceOf(CheckpointCorruptionError)
  })

  it('bounds BigInt tags: five million digits are refused at once instead of decoded', () => {
    const err = catchError(() => deserialize(JSON.stringify({ '~': 'BigInt', v: '7'.repeat(5_000_000) })))
    expect(err).toBeInstanceOf(CheckpointCorruptionError)
    expect((err as Error).message).toContain('maxBigIntDigits')
    expect(catchError(() => encodeValue(10n ** 20_000n))).toBeInstanceOf(CheckpointError)
    expect(deserialize(serialize(10n ** 9_000n))).toBe(10n ** 9_000n)
  })

  it('applies configured string and payload limits on save and load', () => {
    configureLimits({ maxStringLength: 1000, maxPayloadChars: 5000 })
    expect(limits().maxStringLength).toBe(1000)
    expect((catchError(() => encodeValue({ note: 'x'.repeat(1001) })) as CheckpointError).path).toBe('value.note')
    expect(catchError(() => decodeValue({ note: 'x'.repeat(1001) }))).toBeInstanceOf(CheckpointCorruptionError)
    expect(catchError(() => parseJson(JSON.stringify(new Array(3000).fill(1))))).toBeInstanceOf(CheckpointCorruptionError)
  })

  it('decodes a short text as fully as a long one: tags (escaped too) are decoded, and low limits refuse what they bound', () => {
    // Short plain texts skip the decoding walk: these are the texts that must not.
    expect(deserialize('{"at":{"~":"Date","v":"1970-01-01T00:00:00.000Z"}}')).toEqual({ at: new Date(0) })
    expect(deserialize('{"n":{"\\u007e":"BigInt","v":"7"}}')).toEqual({ n: 7n })
    expect(catchError(() => deserialize('{"x":{"\\u007e":"nope"}}'))).toBeInstanceOf(CheckpointCorruptionError)
    expect(deserialize('{"a":"~","b":[1,"x"]}')).toEqual({ a: '~', b: [1, 'x'] })
    configureLimits({ maxDepth: 3, maxStringLength: 4 })
    expect(catchError(() => deserialize('{"a":{"b":{"c":{}}}}'))).toBeInstanceOf(CheckpointCorruptionError)
    expect(deserialize('{"a":{"b":{}}}')).toEqual({ a: { b: {} } })
    expect(catchError(() => deserialize('{"a":"xxxxx"}'))).toBeInstanceOf(CheckpointCorruptionError)
    expect(deserialize('{"a":"xxxx"}')).toEqual({ a: 'xxxx' })
  })

  it('rejects limits that are not positive integers or would overflow the stack', () => {
    expect(() => configureLimits({ maxDepth: 100_000 })).toThrow(/maxDepth/)
    expect(() => configureLimits({ maxStringLength: -1 })).toThrow(/maxStringLength/)
    expect(() => configureLimits({ toolResultPolicy: 'drop' as 'refuse' })).toThrow(/toolResultPolicy/)
    expect(limits()).toEqual(DEFAULT_LIMITS)
  })
})

describe('deep values in a SQLite store', () => {
  let dir: string | undefined
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it('a save of a too-deep payload is refused as unserializable; a row edited to 100,000 levels loads as corruption', async () => {
    dir = mkdtempSync(join(tmpdir(), 'cairn-deep-'))
    const path = join(dir, 'cairn.db')
    const store = new SqliteStore({ path })
    try {
      const err = await store.save({ runId: 'r1', kind: 'test', phase: 'p', payload: { tree: nestedArrays(10_000) } }).catch((e: unknown) => e)
      expect((err as CheckpointError).code).toBe('unserializable')
      const id = await store.save({ runId: 'r1', kind: 'test', phase: 'p', payload: { tree: [1] } })
      const db = new Database(path)
      db.prepare('UPDATE checkpoints SET body = ? WHERE id = ?').run(`{"tree":${deepText(100_000)}}`, id)
      db.close()
      const loaded = await store.load(id).catch((e: unknown) => e)
      expect(loaded).toBeInstanceOf(CheckpointCorruptionError)
    } finally {
      await store.close()
    }
  })
})

function catchError(fn: () => unknown): unknown {
  try {
    fn()
  } catch (err) {
    return err
  }
  throw new Error('expected an error')
}

describe('payload size on save', () => {
  let dir: string | undefined
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it('a payload, effect output or run metadata longer than maxPayloadChars is refused on save, so nothing saved is unreadable', async () => {
    configureLimits({ maxPayloadChars: 10_000 })
    dir = mkdtempSync(join(tmpdir(), 'cairn-size-'))
    const store = new SqliteStore({ path: join(dir, 'cairn.db') })
    try {
      const big = { note: 'y'.repeat(20_000) }
      await expect(store.save({ runId: 'r1', kind: 'test', phase: 'p', payload: big })).rejects.toMatchObject({ code: 'unserializable', path: 'payload' })
      await expect(store.createRun({ runId: 'r2', metadata: big })).rejects.toMatchObject({ code: 'unserializable', path: 'metadata' })
      await store.save({ runId: 'r1', kind: 'test', phase: 'p', payload: { small: true } })
      await store.write({ runId: 'r1', intents: [{ runId: 'r1', callId: 'c1', name: 'tool', inputHash: 'h', idempotencyKey: 'c1' }] })
      await expect(store.completeEffect({ runId: 'r1', callId: 'c1', status: 'succeeded', output: big })).rejects.toMatchObject({ code: 'unserializable', path: 'effect output' })
      expect(await store.listEffects('r1')).toMatchObject([{ status: 'pending' }])
    } finally {
      await store.close()
    }
  })
})
