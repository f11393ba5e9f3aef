const t00 = performance.now()
const pg = (await import('pg')).default
const tImport = performance.now() - t00
const { PostgresStore } = await import('../src/postgres.js')
const { loadLatestState } = await import('../bench/peers/systems/cairn.js')
const url = 'postgresql://postgres@127.0.0.1:5432/test'
const t0 = performance.now()
const raw = new pg.Pool({ connectionString: url })
const log: string[] = []
const wrap = (q: any) => async (text: string, values?: unknown[]) => { const s = performance.now(); const r = await q(text, values); log.push(`${(s - t0).toFixed(1)}+${(performance.now() - s).toFixed(1)} ${text.replace(/\s+/g, ' ').slice(0, 90)}`); return r }
const pool = { query: wrap(raw.query.bind(raw)), connect: async () => { const s = performance.now(); const c = await raw.connect(); log.push(`${(s - t0).toFixed(1)}+${(performance.now() - s).toFixed(1)} connect`); const q = c.query.bind(c); return Object.assign(c, { query: wrap(q) }) } }
const store = new PostgresStore({ pool: pool as any, schema: 'prof_pg' })
const s = await loadLatestState(store, 200)
console.log(`import pg ${tImport.toFixed(1)}; load ${(performance.now() - t0).toFixed(1)} ms, ${s.count}`)
console.log(log.join('\n'))
await store.close(); await raw.end()
