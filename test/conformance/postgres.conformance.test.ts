import { fileURLToPath } from 'node:url'
import { afterAll } from 'vitest'
import { runStoreConformance, type CorruptionKind } from '../../src/testing.js'
import { postgresTarget, schemaForLocation } from '../fixtures/postgres-target.js'

// A server when one answers (or DATABASE_URL / CAIRN_TEST_PG=server), else PGlite; see postgres-target.ts.
const target = await postgresTarget()
afterAll(() => target.close())

/** Each test's location is a fresh temp directory; its data lives in a schema named after it. */
const schemaOf = (location: string) => target.track(schemaForLocation(location))

await runStoreConformance({
  name: `postgres (${target.kind})`,
  open: (location) => target.openStore(schemaOf(location), { onWarning: () => {} }),
  // On PGlite the database lives in this process: the crash and two-writer tests, which need
  // child processes sharing it, are skipped (the reason is printed when the target is chosen).
  ...(target.skipChildProcesses === undefined
    ? { childModule: fileURLToPath(new URL('../fixtures/open-postgres.ts', import.meta.url)), multiProcess: true }
    : {}),
  corrupt: async ({ location, runId, checkpointId, kind }) => {
    const s = `"${schemaOf(location)}"`
    const statements: Record<CorruptionKind, [string, string]> = {
      truncate: [`UPDATE ${s}.checkpoints SET body = left(body, length(body) / 2) WHERE id = $1`, checkpointId],
      garble: [`UPDATE ${s}.checkpoints SET body = chr(255) || chr(1) || '{"]' || substr(body, 6) WHERE id = $1`, checkpointId],
      edit: [`UPDATE ${s}.checkpoints SET body = replace(body, '"n":4', '"n":40') WHERE id = $1 AND body LIKE '%"n":4%'`, checkpointId],
      'edit-list-item': [`UPDATE ${s}.list_items SET item = replace(item, 'm0:', 'M0:') WHERE run_id = $1 AND idx = 0`, runId],
    }
    const [sql, arg] = statements[kind]
    const changed = await target.sql(`WITH changed AS (${sql} RETURNING 1) SELECT count(*)::int AS n FROM changed`, [arg])
    if (changed[0]?.n === 0) throw new Error(`corrupting ${kind} changed no row`)
  },
})
