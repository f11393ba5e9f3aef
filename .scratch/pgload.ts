import { PostgresStore } from '../src/postgres.js'
import { loadLatestState } from '../bench/peers/systems/cairn.js'
const url = 'postgresql://postgres@127.0.0.1:5432/test'
const t0 = performance.now(); const c0 = process.cpuUsage()
const store = new PostgresStore({ connectionString: url, schema: 'prof_pg' })
const t1 = performance.now()
const s = await loadLatestState(store, 200)
const t2 = performance.now(); const c = process.cpuUsage(c0)
console.log(`construct ${(t1 - t0).toFixed(1)} load ${(t2 - t1).toFixed(1)} ms, cpu ${((c.user + c.system) / 1000).toFixed(1)} ms, ${s.count} messages`)
const t3 = performance.now(); await loadLatestState(store, 200); console.log(`second load ${(performance.now() - t3).toFixed(1)}`)
await store.close()
