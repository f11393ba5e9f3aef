import pg from 'pg'
import { Runner } from '../src/index.js'
import { PostgresStore } from '../src/postgres.js'
import { buildAgent } from '../bench/peers/systems/cairn.js'
import { PROMPT } from '../bench/peers/workload.js'
const url = 'postgresql://postgres@127.0.0.1:5432/test'
const admin = new pg.Client({ connectionString: url }); await admin.connect(); await admin.query('DROP SCHEMA IF EXISTS prof_pg CASCADE'); await admin.end()
const store = new PostgresStore({ connectionString: url, schema: 'prof_pg' })
await new Runner({ store, durability: 'async' }).run(buildAgent(200), { input: PROMPT, runId: 'bench-run' })
await store.close()
