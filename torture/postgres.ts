/** The Postgres server the torture scenarios use, shared by the crash, race, stream and wake scenarios. */
import pg from 'pg'

/** `DATABASE_URL` when set (an empty value counts as unset), else the local test server. */
export const POSTGRES_URL = process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/test'

/** Whether the server answers within two seconds: the Postgres scenarios are left out when it does not. */
export async function postgresAnswers(): Promise<boolean> {
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 2000 })
  try {
    await client.connect()
    await client.query('SELECT 1')
    return true
  } catch {
    return false
  } finally {
    await client.end().catch(() => undefined)
  }
}

/** Drop a scenario's schema and everything in it. */
export async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_URL })
  await client.connect()
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => client.end())
}
