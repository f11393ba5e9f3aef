/**
 * Start the bench run and stall at the model call of cycle `stallAt`, after telling the parent
 * (a line `stalled` on stdout); the parent then kills this process with SIGKILL.
 */
import { Runner } from '../../dist/index.js'
import { SqliteStore } from '../../dist/sqlite.js'
import { buildAgent } from './agent.mjs'

const [path, stallAt] = process.argv.slice(2)
const store = new SqliteStore({ path })
const agent = buildAgent({
  stallAt: Number(stallAt),
  onCall: (cycle) => {
    if (cycle === Number(stallAt)) process.stdout.write('stalled\n')
  },
})
await new Runner({ store, durability: 'sync' }).run(agent, { input: 'Look things up.', runId: 'startup-run' })
