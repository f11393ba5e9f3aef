import { afterAll } from 'vitest'
import { PostgresEngine } from '../../src/postgres.js'
import { runEngineConformance } from '../../src/testing.js'
import { postgresTarget, schemaForLocation } from '../fixtures/postgres-target.js'

// A server when one answers (or DATABASE_URL / CAIRN_TEST_PG=server), else PGlite; see postgres-target.ts.
const target = await postgresTarget()
afterAll(() => target.close())

await runEngineConformance({
  name: `postgres (${target.kind})`,
  open: (location) => {
    const pool = target.pool()
    // A server pool is this engine's own; the PGlite client is shared and stays open.
    const onClose = target.kind === 'server' ? async () => void (await pool.end?.()) : undefined
    return new PostgresEngine({ pool, schema: target.track(schemaForLocation(location)), onWarning: () => {}, ...(onClose ? { onClose } : {}) })
  },
})
