import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { FileStore } from 'cairn-agents'
import { SqliteStore } from 'cairn-agents/sqlite'
import { validateCairnSaver } from './validation-suite.js'

const root = mkdtempSync(join(tmpdir(), 'cairn-langgraph-'))
let opened = 0

await validateCairnSaver({
  name: 'SqliteStore',
  open: () => new SqliteStore({ path: join(root, `saver-${++opened}.db`) }),
  afterAll: async () => rmSync(root, { recursive: true, force: true }),
})

await validateCairnSaver({
  name: 'FileStore',
  open: () => new FileStore({ directory: join(root, `saver-${++opened}`) }),
})
