/**
 * A process of the rotation test: `start` runs the agent on a fresh store until its note is
 * running and exits there (a crash with work in flight); `rekey` re-seals the store under the
 * first key of `CAIRN_KEYS`, printing progress. Keys come from `CAIRN_KEYS`, as the CLI reads them.
 */
import { KeyRing } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { crashedRun } from './scenario.js'

const [path, action] = process.argv.slice(2)
const store = new SqliteStore({ path: path!, keys: KeyRing.fromEnv()!, encrypt: true })
if (action === 'start') {
  await crashedRun(store, 'rotated')
  process.exit(0)
}
const result = await store.rekey({ onProgress: (p) => console.log(`rekeyed ${p.runsDone}/${p.runsTotal} ${p.runId} (${p.rewritten} records)`) })
console.log(JSON.stringify(result))
await store.close()
