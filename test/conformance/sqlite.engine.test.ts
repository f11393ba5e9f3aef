import { join } from 'node:path'
import Database from 'better-sqlite3'
import { SqliteEngine } from '../../src/sqlite.js'
import { runEngineConformance } from '../../src/testing.js'

await runEngineConformance({ name: 'sqlite', open: (location) => new SqliteEngine({ database: new Database(join(location, 'cairn.db')) }) })
