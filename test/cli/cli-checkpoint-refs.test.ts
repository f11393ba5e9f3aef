import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { CheckpointDiff, TimelineEntry, VerifyReport } from '../../src/index.js'
import { AGENTS, cairn, cairnJson, runNode, sqliteStore } from './cli-helpers.js'

// `cairn show` prints the checkpoint ids that diff, fork and --payload take, and they take the
// `#` number too; `cairn verify` reports every run of a keyed store, with keys or without.

const TIMEOUT_MS = 120_000
const test = (title: string, fn: () => Promise<void>) => it(title, fn, TIMEOUT_MS)
const K1 = `k1:${randomBytes(32).toString('base64')}`
let dir = ''

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-cli-refs-'))
}, TIMEOUT_MS)

afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('checkpoint references', () => {
  test('show prints every checkpoint id; diff, fork and show --payload take an id, RUN#N or (with the run) N', async () => {
    const { url } = sqliteStore(join(dir, 'refs.db'))
    expect((await runNode([AGENTS, url, 'notes'])).code).toBe(0)
    const entries = await cairnJson<TimelineEntry[]>(url, ['show', 'notes'])
    const shown = await cairn(url, ['show', 'notes'])
    for (const entry of entries) expect(shown.stdout).toMatch(new RegExp(`^ +${entry.index}  ${entry.checkpointId} `, 'm'))

    const fourth = entries[3]!
    const byId = JSON.parse((await cairn(url, ['show', 'notes', '--payload', fourth.checkpointId])).stdout) as { id: string }
    expect(byId.id).toBe(fourth.checkpointId)
    for (const ref of ['4', '#4', 'notes#4']) expect(JSON.parse((await cairn(url, ['show', 'notes', '--payload', ref])).stdout)).toEqual(byId)

    const ninth = entries[8]!
    const diffByIds = await cairnJson<CheckpointDiff>(url, ['diff', fourth.checkpointId, ninth.checkpointId])
    expect(await cairnJson<CheckpointDiff>(url, ['diff', 'notes#4', 'notes#9'])).toEqual(diffByIds)
    // The table names each side by its stored seq, never by a `#` that `cairn show` numbers otherwise.
    const table = await cairn(url, ['diff', 'notes#4', 'notes#9'])
    expect(table.stdout).toContain(`from ${fourth.checkpointId} (notes seq ${fourth.seq} ${fourth.phase})`)
    expect(table.stdout).toContain(`  to ${ninth.checkpointId} (notes seq ${ninth.seq} ${ninth.phase})`)
    expect(table.stdout).not.toMatch(/\(notes #\d+ /)

    const fork = await cairnJson<{ runId: string }>(url, ['fork', 'notes#9', '--run-id', 'notes-fork'])
    expect(fork.runId).toBe('notes-fork')
    expect((await cairnJson<TimelineEntry[]>(url, ['show', 'notes-fork']))[0]!.summary).toContain(`forked from checkpoint ${ninth.checkpointId} of run notes`)

    const missing = await cairn(url, ['diff', 'notes#4', `notes#${entries.length + 1}`])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toBe(`cairn: run notes has no checkpoint #${entries.length + 1}: it has ${entries.length}, numbered 1 to ${entries.length} by \`cairn show notes\`\n`)
  })
})

describe('cairn verify on a keyed store', () => {
  test('reports each run: without keys each is named as not checked; with keys a tampered run is BAD and the others ok', async () => {
    const store = sqliteStore(join(dir, 'keyed.db'))
    for (const runId of ['first', 'second', 'third']) expect((await runNode([AGENTS, store.url, runId], { env: { CAIRN_KEYS: K1 } })).code).toBe(0)

    const keyless = await cairn(store.url, ['verify'])
    expect(keyless.code).toBe(1)
    for (const runId of ['first', 'second', 'third']) expect(keyless.stdout).toMatch(new RegExp(`^KEYS ${runId}: checkpoint .* is signed with key k1, but this store has no keys`, 'm'))
    expect(keyless.stdout).toContain('3 runs verified, 0 with a bad record, 3 signed and not checked without keys (set CAIRN_KEYS)')

    // A stored checkpoint (a light phase's id names the stored one that carries it).
    const victim = (await cairnJson<TimelineEntry[]>(store.url, ['show', 'second'], { env: { CAIRN_KEYS: K1 } })).filter((entry) => !entry.checkpointId.includes('~'))[2]!
    await store.tamper(victim.checkpointId)
    const keyed = await cairn(store.url, ['verify', '--json'], { env: { CAIRN_KEYS: K1 } })
    expect(keyed.code).toBe(1)
    const reports = JSON.parse(keyed.stdout) as VerifyReport[]
    expect(reports.map((r) => [r.runId, r.ok]).sort()).toEqual([
      ['first', true],
      ['second', false],
      ['third', true],
    ])
    expect(reports.find((r) => r.runId === 'second')!.firstBad).toMatchObject({ checkpointId: victim.checkpointId, code: 'checkpoint_integrity' })
  })
})
