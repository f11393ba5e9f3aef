import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import { runStoreConformance } from '../../src/testing.js'

type CorruptArgs = Parameters<NonNullable<Parameters<typeof runStoreConformance>[0]['corrupt']>>[0]
import { SqliteStore } from '../../src/sqlite.js'

const dbPath = (location: string) => join(location, 'cairn.db')

await runStoreConformance({
  name: 'sqlite',
  open: (location) => new SqliteStore({ path: dbPath(location), onWarning: () => {} }),
  childModule: fileURLToPath(new URL('../fixtures/open-sqlite.ts', import.meta.url)),
  multiProcess: true,
  corrupt: corruptSqlite,
})

async function corruptSqlite({ location, runId, checkpointId, kind }: CorruptArgs): Promise<void> {
  const db = new Database(dbPath(location))
  try {
    const statements = {
      truncate: ['UPDATE checkpoints SET body = substr(body, 1, length(body) / 2) WHERE id = ?', checkpointId],
      garble: ["UPDATE checkpoints SET body = X'00FF7B225D' || body WHERE id = ?", checkpointId],
      edit: [`UPDATE checkpoints SET body = replace(body, '"n":4', '"n":40') WHERE id = ?`, checkpointId],
      'edit-list-item': ["UPDATE list_items SET item = replace(item, 'm0:', 'M0:') WHERE run_id = ? AND idx = 0", runId],
    } as const
    const [sql, arg] = statements[kind]
    const changed = db.prepare(sql).run(arg).changes
    if (changed === 0) throw new Error(`corrupting ${kind} changed no row`)
  } finally {
    db.close()
  }
}
