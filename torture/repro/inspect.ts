/**
 * Print every run of a torture scenario directory (kept with `--keep-failed`): its checkpoints,
 * with the runtime snapshot's next step and message roles, and its effect journal.
 *
 *   npx tsx torture/repro/inspect.ts /tmp/cairn-torture-XXXXXX
 */
import { join } from 'node:path'
import { Runner } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'

const dir = process.argv[2]!
const store = new SqliteStore({ path: join(dir, 'cairn.db') })
const runner = new Runner({ store })
for (const run of await store.listRuns()) {
  console.log('RUN', run.runId, run.status)
  for (const c of await runner.history(run.runId)) {
    const rt = (c.payload as { runtime?: { messages: { role: string }[]; next: string } }).runtime
    console.log('  ', c.step, c.phase, rt ? `runtime next=${rt.next} messages=${rt.messages.map((m) => m.role[0]).join('')}` : '')
  }
  for (const e of await store.listEffects(run.runId)) console.log('   effect', e.callId, e.name, e.status, e.attempts)
}
await store.close()
