/**
 * A fresh process resuming the bench run: what a user's app does after a crash. Prints, as one
 * JSON line, the milliseconds since the process started (Node's own clock origin) at which the
 * imports were done, the store was open, and the resumed run made its first model call (and the
 * last two on the monotonic clock in microseconds, to cut a CPU profile to that window), and the
 * CPU time the process had used by its first model call.
 */
import { performance } from 'node:perf_hooks'

const imported = { at: 0 }
const { Runner } = await import('../../dist/index.js')
const { SqliteStore } = await import('../../dist/sqlite.js')
const { buildAgent } = await import('./agent.mjs')
imported.at = performance.now()

const store = new SqliteStore({ path: process.argv[2] })
const opened = performance.now()
const openedUs = Number(process.hrtime.bigint() / 1000n)
let firstCall
let firstCallUs
let firstCallCpu
const agent = buildAgent({
  onCall: () => {
    firstCall ??= performance.now()
    firstCallUs ??= Number(process.hrtime.bigint() / 1000n)
    firstCallCpu ??= process.cpuUsage()
  },
})
const result = await new Runner({ store }).resume(agent, { runId: 'startup-run' })
await store.close()
if (result.state !== 'completed') throw new Error(`the resumed run ended ${result.state}`)
process.stdout.write(`${JSON.stringify({ importedMs: imported.at, openMs: opened, firstCallMs: firstCall, firstCallCpuMs: (firstCallCpu.user + firstCallCpu.system) / 1000, window: [openedUs, firstCallUs] })}\n`)
