import { PGlite } from '@electric-sql/pglite'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PGliteClient } from '../src/postgres.js'

describe('PGliteClient', () => {
  let client: PGliteClient
  let db: PGlite | undefined

  beforeAll(async () => {
    db = await PGlite.create()
    client = new PGliteClient(db)
    await client.query('CREATE TABLE t (n integer)')
  }, 30_000)
  afterAll(() => db?.close())

  it('hands out the one connection exclusively: other queries wait until it is released', async () => {
    const held = await client.connect()
    await held.query('BEGIN')
    await held.query('INSERT INTO t VALUES (1)')
    let seen: unknown
    const outside = client.query('SELECT count(*)::int AS n FROM t').then((result) => (seen = result.rows))
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(seen).toBeUndefined() // it would see the uncommitted row if it ran inside the transaction
    await held.query('ROLLBACK')
    held.release()
    await outside
    expect(seen).toEqual([{ n: 0 }])
    await expect(held.query('SELECT 1')).rejects.toThrow('released')
  })

  it('release(true) rolls back what the holder left open; rowCount counts changed rows', async () => {
    const held = await client.connect()
    await held.query('BEGIN')
    await held.query('INSERT INTO t VALUES (1), (2)')
    held.release(true)
    expect((await client.query('SELECT count(*)::int AS n FROM t')).rows).toEqual([{ n: 0 }])
    expect((await client.query('INSERT INTO t VALUES (1), (2), (3)')).rowCount).toBe(3)
    expect((await client.query('DELETE FROM t WHERE n > $1', [1])).rowCount).toBe(2)
  })
})

