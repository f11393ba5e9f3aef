import { execFile } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { CairnClient } from '../../src/index.js'
import { PostgresStore } from '../../src/postgres.js'
import { postgresTarget } from '../fixtures/postgres-target.js'
import { auditRuns } from './fixtures/audit.js'
import { Fleet, waitFor } from './fixtures/fleet.js'

/**
 * PostgreSQL restarted under running workers. The test restarts a server of its own — a private
 * cluster created with the Debian tools (`pg_createcluster`, `pg_ctlcluster`) on a free port and
 * dropped afterwards — so that the other test files, which share the main server and run in
 * parallel, are not cut off by the restart.
 */
const run = promisify(execFile)
const target = await postgresTarget()
const version = existsSync('/etc/postgresql') ? readdirSync('/etc/postgresql')[0] : undefined
const skipReason =
  target.kind === 'pglite'
    ? 'the tests run on PGlite: there is no server to restart'
    : process.getuid?.() !== 0 || version === undefined || !existsSync('/usr/bin/pg_createcluster')
      ? 'this test cannot control a PostgreSQL server: it needs root and the Debian cluster tools (pg_createcluster, pg_ctlcluster)'
      : undefined
if (skipReason) console.info(`skipped: database restart test (${skipReason})`)
afterAll(() => target.close())

const cluster = `cairn_restart_${process.pid}`
let connectionString = ''

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

describe.skipIf(skipReason !== undefined)('PostgreSQL restarted under running workers', () => {
  beforeAll(async () => {
    const port = await freePort()
    await run('pg_createcluster', [version!, cluster, '-p', String(port), '--start', '--', '--auth=trust'])
    connectionString = `postgresql://postgres@127.0.0.1:${port}/postgres`
  }, 60_000)

  afterAll(async () => {
    await run('pg_dropcluster', ['--stop', version!, cluster]).catch(() => undefined)
  }, 30_000)

  it('workers ride out the restart: they reconnect, take over what was cut short, and every run finishes', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-restart-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    const store = new PostgresStore({ connectionString, schema: 'cairn_restart', onWarning: () => {} })
    cleanups.push(() => store.close())
    const client = new CairnClient({ store })
    const fleet = new Fleet({
      backend: { kind: 'postgres', connectionString, schema: 'cairn_restart' },
      logFile: join(dir, 'events.log'),
      effectsDir: dir,
      concurrency: 4,
      leaseMs: 1500,
      heartbeatMs: 300,
      pollMs: 200,
      maxRecoveryAttempts: 50,
      cycles: 5,
      toolDelayMs: 150,
    })
    cleanups.push(() => fleet.stopAll(1000))
    const runIds = Array.from({ length: 60 }, (_, i) => `run-${String(i).padStart(2, '0')}`)
    for (const runId of runIds) await client.enqueue('job', { input: 'apply five effects', runId })
    for (let slot = 0; slot < 3; slot++) fleet.start(slot)
    // The parent's own queries fail while the server is down: count those as "not yet".
    const completed = async () => (await store.listRuns({ status: 'completed', limit: 1000 }).catch(() => [])).length
    await waitFor(async () => (await completed()) >= 6, 'the first runs to finish', 30_000)

    const before = await completed()
    const restartedAt = Date.now()
    await run('pg_ctlcluster', ['--skip-systemctl-redirect', version!, cluster, 'restart'])
    await waitFor(async () => (await completed()) === runIds.length, 'every run to finish after the restart', 60_000).catch(async (err: Error) => {
      const unfinished = (await store.listRuns({ limit: 1000 })).filter((r) => r.status !== 'completed').map((r) => `${r.runId}: ${r.status}`)
      throw new Error(`${err.message}; unfinished: ${unfinished.join(', ')}; worker stderr:\n${fleet.stderr()}`)
    })
    for (const member of fleet.members.values()) expect(member.child.exitCode, fleet.stderr()).toBeNull()
    await fleet.stopAll()

    // The restart came in the middle of the work.
    expect(before).toBeLessThan(runIds.length / 2)
    // The restart reached the workers: their writes or heartbeats failed while it was down.
    expect(fleet.log().filter((e) => (e.type === 'error' || e.type === 'warning') && e.at >= restartedAt).length).toBeGreaterThan(0)
    const audit = await auditRuns({ store, runIds, log: fleet.log(), effectsDir: dir, cycles: 5 })
    expect(audit.violations).toEqual([])
    const after = fleet.log().filter((e) => e.at >= restartedAt)
    const count = (type: string, reason?: string) => after.filter((e) => e.type === type && (reason === undefined || e.reason === reason)).length
    console.info(
      `restart test: ${before} of ${runIds.length} runs done at the restart; then ${count('error')} errors, ${count('released', 'failed_attempt')} runs handed back after a failed write, ` +
        `${count('lost')} leases given up, ${audit.recoveredRuns} runs continued by a later claim`,
    )
  }, 120_000)
})

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))))
    })
  })
}
