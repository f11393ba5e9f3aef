import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { Agent, Runner, tool, type WriteBatch } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { ScriptedModel } from '../../src/testing.js'

let dir = ''
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-lease-sync-'))
})
afterEach(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** A write transaction as the connection ran it: its statements, and whether it waited for the disk. */
interface Transaction {
  synced: boolean
  statements: string[]
}

/**
 * A store on a connection that logs every statement it runs, grouped into write transactions
 * with the `synchronous` level each was committed under.
 */
function loggedStore(options: { synchronous?: 'full' | 'normal' } = {}) {
  const transactions: Transaction[] = []
  let synced = options.synchronous !== 'normal'
  let open: Transaction | undefined
  const database = new Database(join(dir, 'cairn.db'), {
    verbose: (sql?: unknown) => {
      const text = String(sql).replace(/\s+/g, ' ').trim()
      if (/^PRAGMA synchronous = NORMAL$/i.test(text)) synced = false
      else if (/^PRAGMA synchronous = FULL$/i.test(text)) synced = true
      else if (text.startsWith('BEGIN')) open = { synced, statements: [] }
      else if (text === 'COMMIT' && open) {
        transactions.push({ ...open, synced })
        open = undefined
      } else open?.statements.push(text)
    },
  })
  const store = new SqliteStore({ database, ...options })
  transactions.length = 0 // the migrations of a new file
  const kinds = (t: Transaction) => ({
    checkpoint: t.statements.some((s) => s.startsWith('INSERT INTO checkpoints')),
    effect: t.statements.some((s) => s.startsWith('INSERT INTO effects') || s.startsWith('UPDATE effects')),
    status: t.statements.some((s) => /^UPDATE runs SET status = CASE WHEN 1/.test(s) || /status = 'cancelled'|status = 'queued'/.test(s)),
    // A transaction that only reads (the run's log, checked before a run is handed out) changes nothing.
    leaseOnly: t.statements.some((s) => !s.startsWith('SELECT')) && t.statements.every((s) => s.startsWith('SELECT') || /^UPDATE runs SET (owner|lease_expires_at)/.test(s) || s.startsWith('INSERT INTO runs')),
  })
  return { store, database, transactions, kinds }
}

describe('SQLite: which commits wait for the disk', () => {
  it('a run with sync durability syncs every commit of state, and takes and gives back its lease without a sync', async () => {
    const { store, database, transactions, kinds } = loggedStore()
    const note = tool({ name: 'note', description: 'note', inputSchema: z.object({ text: z.string() }), callback: ({ text }) => `noted ${text}` })
    const model = new ScriptedModel([[{ toolUse: { toolUseId: 'n1', name: 'note', input: { text: 'a' } } }], [{ text: 'done' }]])
    const result = await new Runner({ store, durability: 'sync' }).run(new Agent({ model, tools: [note] }), { input: 'go', runId: 'r1' })
    expect(result.state).toBe('completed')

    const ofState = transactions.filter((t) => kinds(t).checkpoint || kinds(t).effect || kinds(t).status)
    expect(ofState.length).toBeGreaterThanOrEqual(3)
    expect(ofState.every((t) => t.synced)).toBe(true)
    const leaseOnly = transactions.filter((t) => kinds(t).leaseOnly)
    // The acquire (with the run's row) and the release.
    const owners = leaseOnly.map((t) => t.statements.find((s) => s.startsWith('UPDATE runs SET owner')) ?? '')
    expect(owners).toHaveLength(2)
    expect(owners[0]).toMatch(/^UPDATE runs SET owner = '[^']+', lease_epoch = lease_epoch \+ 1/)
    expect(owners[1]).toMatch(/^UPDATE runs SET owner = NULL/)
    expect(leaseOnly.every((t) => !t.synced)).toBe(true)
    // The level stays relaxed after the release until a write that syncs switches it back.
    expect(database.pragma('synchronous', { simple: true })).toBe(1)
    await store.save({ runId: 'other', kind: 'demo', phase: 'p', payload: 1 })
    expect(transactions.at(-1)).toMatchObject({ synced: true })
    expect(database.pragma('synchronous', { simple: true })).toBe(2)
    await store.close()
  })

  it('a run with async durability commits its checkpoints and effects without a sync; the store\'s own writes still sync', async () => {
    const { store, database, transactions, kinds } = loggedStore()
    const note = tool({ name: 'note', description: 'note', inputSchema: z.object({ text: z.string() }), callback: ({ text }) => `noted ${text}` })
    const model = new ScriptedModel([[{ toolUse: { toolUseId: 'n1', name: 'note', input: { text: 'a' } } }], [{ text: 'done' }]])
    const result = await new Runner({ store, durability: 'async' }).run(new Agent({ model, tools: [note] }), { input: 'go', runId: 'r1' })
    expect(result.state).toBe('completed')

    const checkpoints = transactions.filter((t) => kinds(t).checkpoint)
    expect(checkpoints.length).toBeGreaterThanOrEqual(2)
    expect(checkpoints.every((t) => !t.synced)).toBe(true)
    // Marking an effect started is the store's own compare-and-set, not the writer's: it syncs.
    const starts = transactions.filter((t) => t.statements.some((s) => s.startsWith("UPDATE effects SET status = 'started'")))
    expect(starts.length).toBeGreaterThan(0)
    expect(starts.every((t) => t.synced)).toBe(true)
    // Nothing else on the connection inherits the relaxed level: a plain save, an event, a timer sync.
    await store.write({ runId: 'r2', checkpoints: [{ runId: 'r2', kind: 'demo', phase: 'p', payload: 1 }], durability: 'async' })
    expect(transactions.at(-1)).toMatchObject({ synced: false })
    await store.save({ runId: 'r2', kind: 'demo', phase: 'q', payload: 2 })
    expect(transactions.at(-1)).toMatchObject({ synced: true })
    await store.write({ runId: 'r2', checkpoints: [{ runId: 'r2', kind: 'demo', phase: 'r', payload: 3 }], durability: 'async' })
    expect(database.pragma('synchronous', { simple: true })).toBe(1)
    await store.waits!.setTimer('r2', Date.now() + 60_000)
    expect(database.pragma('synchronous', { simple: true })).toBe(2)
    await store.close()
  })

  it('a write batch with a durability other than async or sync is refused before anything is written', async () => {
    const { store, transactions } = loggedStore()
    const bad = { runId: 'r3', checkpoints: [{ runId: 'r3', kind: 'demo', phase: 'p', payload: 1 }], durability: 'later' } as unknown as WriteBatch
    await expect(store.write(bad)).rejects.toThrow(/durability must be 'async' or 'sync'/)
    expect(transactions.filter((t) => t.statements.some((s) => s.startsWith('INSERT INTO checkpoints')))).toHaveLength(0)
    await store.close()
  })

  it('a lease change that records state (an enqueue, a cancel, a release with a final status) is synced', async () => {
    const { store, transactions, kinds } = loggedStore()
    const leases = store.leases!
    await leases.enqueue({ runId: 'queued', queue: 'q' })
    await leases.cancel('queued')
    await leases.enqueue({ runId: 'held', queue: 'q' })
    const [claimed] = await leases.claim({ owner: 'w1', leaseMs: 60_000, limit: 1 })
    await leases.heartbeat({ owner: 'w1', leaseMs: 60_000, runs: [{ runId: 'held', epoch: claimed!.lease.epoch }] })
    await leases.release({ runId: 'held', owner: 'w1', epoch: claimed!.lease.epoch }, { status: 'failed' })

    const writes = transactions.filter((t) => t.statements.some((s) => !s.startsWith('SELECT')))
    const synced = writes.filter((t) => t.synced).map((t) => t.statements.find((s) => s.startsWith('INSERT') || s.startsWith('UPDATE'))?.split(' ').slice(0, 4).join(' '))
    const unsynced = writes.filter((t) => !t.synced).map((t) => t.statements.find((s) => s.startsWith('UPDATE'))?.split(' ').slice(0, 5).join(' '))
    // Each final status is recorded in the run's log too (the list item after the cancel and after the release).
    expect(synced).toEqual(['INSERT INTO runs (run_id,', 'UPDATE runs SET status', 'INSERT INTO list_items (run_id,', 'INSERT INTO runs (run_id,', 'UPDATE runs SET owner', 'INSERT INTO list_items (run_id,'])
    // The claim and the heartbeat.
    expect(unsynced).toEqual(['UPDATE runs SET owner =', 'UPDATE runs SET lease_expires_at ='])
    expect(transactions.filter((t) => kinds(t).status).every((t) => t.synced)).toBe(true)
    await store.close()
  })

  it('a store opened with synchronous: normal never switches the level', async () => {
    const { store, database, transactions } = loggedStore({ synchronous: 'normal' })
    const model = new ScriptedModel([[{ text: 'done' }]])
    await new Runner({ store }).run(new Agent({ model }), { input: 'go', runId: 'r2' })
    expect(transactions.length).toBeGreaterThan(0)
    expect(transactions.every((t) => !t.synced)).toBe(true)
    expect(database.pragma('synchronous', { simple: true })).toBe(1)
    await store.close()
  })
})
