/**
 * The local Postgres the Postgres-backed systems share: one database per system, one schema per
 * (system, n), so no two runs see each other's tables. Sizes are `pg_total_relation_size` (heap,
 * TOAST and indexes) summed over the schema's tables.
 */
import pg from 'pg'

/** Server URL without a database; override with PEERS_PG_URL. */
export const PG_SERVER = (process.env.PEERS_PG_URL ?? 'postgresql://postgres@127.0.0.1:5432').replace(/\/+$/, '')

/** The database of each system family. */
export const PG_DATABASES = { cairn: 'cairn_bench_cairn', langgraph: 'cairn_bench_langgraph', dbos: 'cairn_bench_dbos' } as const
export type PgFamily = keyof typeof PG_DATABASES

/** The connection string of `database` on the bench server. */
export function pgUrl(database: string): string {
  return `${PG_SERVER}/${database}`
}

/** Whether the server answers, and why not when it does not. */
export async function postgresProblem(): Promise<string | undefined> {
  try {
    await withClient('postgres', async (client) => client.query('SELECT 1'))
    return undefined
  } catch (err) {
    return `Postgres at ${PG_SERVER} is not reachable: ${(err as Error).message}`
  }
}

/** Create the per-system databases that do not exist yet. */
export async function ensureDatabases(): Promise<void> {
  await withClient('postgres', async (client) => {
    for (const name of Object.values(PG_DATABASES)) {
      const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])
      if (found.rowCount === 0) await client.query(`CREATE DATABASE ${name}`)
    }
  })
}

/** Bytes of every table in `schema` (heap, TOAST and indexes); 0 when it has none. */
export async function schemaBytes(family: PgFamily, schema: string): Promise<number> {
  return withClient(PG_DATABASES[family], async (client) => {
    const result = await client.query<{ bytes: string | null }>(
      `SELECT sum(pg_total_relation_size(c.oid))::text AS bytes
         FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
        WHERE s.nspname = $1 AND c.relkind IN ('r', 'p', 'm')`,
      [schema],
    )
    return Number(result.rows[0]?.bytes ?? 0)
  })
}

/** Rows of `schema.table` whose `thread_id` is `threadId`. */
export async function countRows(family: PgFamily, schema: string, table: string, threadId: string): Promise<number> {
  return withClient(PG_DATABASES[family], async (client) => {
    const result = await client.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${quoteIdent(schema)}.${quoteIdent(table)} WHERE thread_id = $1`, [threadId])
    return Number(result.rows[0]?.n ?? 0)
  })
}

/** Drop `schema` and everything in it, if it exists. */
export async function dropSchema(family: PgFamily, schema: string): Promise<void> {
  await withClient(PG_DATABASES[family], async (client) => client.query(`DROP SCHEMA IF EXISTS ${quoteIdent(schema)} CASCADE`))
}

async function withClient<T>(database: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: pgUrl(database) })
  await client.connect()
  try {
    return await fn(client)
  } finally {
    await client.end()
  }
}

function quoteIdent(name: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a plain schema name: ${name}`)
  return `"${name}"`
}
