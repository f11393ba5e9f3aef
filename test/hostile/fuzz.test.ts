import { afterAll, describe, expect, it } from 'vitest'
import { fuzzStoreSurface, fuzzValueSurface } from '../../fuzz/fuzz.js'
import type { SurfaceReport } from '../../fuzz/outcomes.js'
import { fileSurface, postgresSurface, sqliteSurface } from '../../fuzz/store-surfaces.js'
import { valueSurfaces } from '../../fuzz/value-surfaces.js'
import { postgresTarget } from '../fixtures/postgres-target.js'

// A few hundred mutated inputs per decoding surface (`npm run fuzz` runs 10,000). Every one must
// end in a CairnError or be read back; none may raise another error, hang, or touch a prototype.
const RUNS = 300
const SEED = 7
/** Each store surface edits and reads back RUNS stored rows: about 6 s on an idle 2-core machine, several times that on a busy one. */
const STORE_TIMEOUT_MS = 120_000

function expectNoUntypedOutcome(report: SurfaceReport): void {
  expect(report.inputs).toBe(RUNS)
  expect({ surface: report.surface, untyped: report.counts.untyped, hang: report.counts.hang, polluted: report.counts.polluted, examples: report.examples }).toMatchObject({
    untyped: 0,
    hang: 0,
    polluted: 0,
  })
  expect(report.counts.typed).toBeGreaterThan(0)
}

describe('fuzzing every decoding surface', async () => {
  const surfaces = await valueSurfaces()
  it.each(surfaces.map((s) => [s.name, s] as const))('%s: every mutated input is read or refused with a CairnError', async (_name, surface) => {
    expectNoUntypedOutcome(await fuzzValueSurface(surface, { runs: RUNS, seed: SEED }))
  })

  it('SQLite rows edited in the database file: every read is a CairnError or returns data', async () => {
    expectNoUntypedOutcome(await fuzzStoreSurface(await sqliteSurface(), { runs: RUNS, seed: SEED }))
  }, STORE_TIMEOUT_MS)

  it('file store files edited on disk: every read is a CairnError or returns data', async () => {
    expectNoUntypedOutcome(await fuzzStoreSurface(await fileSurface(), { runs: RUNS, seed: SEED }))
  }, STORE_TIMEOUT_MS)

  it('Postgres rows edited on the server: every read is a CairnError or returns data', async (ctx) => {
    const target = await postgresTarget()
    if (target.connectionString === undefined) ctx.skip()
    expectNoUntypedOutcome(await fuzzStoreSurface(await postgresSurface(target.connectionString!), { runs: RUNS, seed: SEED }))
  }, STORE_TIMEOUT_MS)

  afterAll(async () => {
    await (await postgresTarget()).close()
  })
})
