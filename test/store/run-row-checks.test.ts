import { join } from 'node:path'
import Database from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { CheckpointCorruptionError, FileStore, type CheckpointStore } from '../../src/index.js'
import { SqliteStore } from '../../src/sqlite.js'
import { runLogOf } from '../support/file-log.js'
import { useTempDirs } from '../support/temp-dirs.js'

const tempDir = useTempDirs('cairn-run-row-')

interface Backend {
  open(dir: string): CheckpointStore
  edit(dir: string, field: string, value: unknown): Promise<void>
}

const COLUMNS: Record<string, string> = { status: 'status', lastSeq: 'last_seq', metadata: 'metadata', threadId: 'thread_id' }
const backends: [string, Backend][] = [
  [
    'sqlite',
    {
      open: (dir) => new SqliteStore({ path: join(dir, 'cairn.db') }),
      edit: async (dir, field, value) => {
        const db = new Database(join(dir, 'cairn.db'))
        db.prepare(`UPDATE runs SET ${COLUMNS[field]!} = ? WHERE run_id = 'r'`).run(value)
        db.close()
      },
    },
  ],
  [
    'file',
    {
      open: (dir) => new FileStore({ directory: dir }),
      // The run row as the log's last frame leaves it, edited and the log's checks computed again.
      edit: async (dir, field, value) => {
        const log = await runLogOf(dir, 'r')
        const last = log.lines.length - 1
        const [check, ids, ...json] = log.lines[last]!.split(' ')
        const record = JSON.parse(json.join(' ')) as { r: Record<string, unknown> }
        record.r[field] = value
        log.lines[last] = `${check} ${ids} ${JSON.stringify(record)}`
        await log.write(true)
      },
    },
  ],
]

const edits: [string, string, unknown][] = [
  ['an unknown status', 'status', 'bogus'],
  ['a negative last seq', 'lastSeq', -1],
  ['metadata nested past the stack', 'metadata', `${'['.repeat(50_000)}${']'.repeat(50_000)}`],
  ['metadata that is not an object', 'metadata', '[1]'],
  ['metadata with a malformed tag', 'metadata', '{"at":{"~":"Date","v":"never"}}'],
  ['a last seq beyond the newest checkpoint', 'lastSeq', 9],
]

describe.each(backends)('run rows on %s are checked on every read', (_name, backend) => {
  for (const [name, field, value] of edits) {
    it(`${name} is a CheckpointCorruptionError naming the run, from getRun, listRuns or getLatest`, async () => {
      const dir = await tempDir()
      const store = backend.open(dir)
      await store.createRun({ runId: 'r', threadId: 't', metadata: { owner: 'me' } })
      await store.save({ runId: 'r', kind: 'test', phase: 'p', payload: 1 })
      await store.close()
      await backend.edit(dir, field, value)
      const reopened = backend.open(dir)
      const errors = await Promise.all(
        [() => reopened.getRun('r'), () => reopened.listRuns(), () => reopened.getLatest({ runId: 'r' })].map((read) =>
          read().then(
            () => undefined,
            (err: unknown) => err,
          ),
        ),
      )
      const error = field === 'lastSeq' && value === 9 ? errors[2] : errors[0]
      expect(error).toBeInstanceOf(CheckpointCorruptionError)
      expect(error).toMatchObject({ runId: 'r' })
      await reopened.close()
    })
  }
})
