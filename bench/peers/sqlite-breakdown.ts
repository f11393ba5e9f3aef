import Database from 'better-sqlite3'

/**
 * Bytes of each table and index of a SQLite database, from its `dbstat` virtual table (pages
 * times page size, so free space inside pages counts where it sits). Opened read-only beside
 * the writer (WAL mode allows it). Undefined when this SQLite build has no `dbstat`.
 */
export function sqliteBreakdown(path: string): Record<string, number> | undefined {
  const db = new Database(path, { readonly: true, fileMustExist: true })
  try {
    const rows = db.prepare('SELECT name, sum(pgsize) AS bytes FROM dbstat GROUP BY name ORDER BY bytes DESC').all() as { name: string; bytes: number }[]
    return Object.fromEntries(rows.map((row) => [row.name, row.bytes]))
  } catch {
    return undefined
  } finally {
    db.close()
  }
}
