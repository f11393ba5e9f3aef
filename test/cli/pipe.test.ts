import { spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CAIRN_BIN, ROOT, sqliteStore } from './cli-helpers.js'

let dir = ''
let store = ''

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-cli-pipe-'))
  const demo = spawn(process.execPath, ['--import', 'tsx', 'examples/research-demo.ts', '--dir', dir], { cwd: ROOT, stdio: 'ignore' })
  expect(await new Promise((resolve) => demo.on('close', resolve))).toBe(0)
  store = sqliteStore(join(dir, 'demo.db')).url
}, 120_000)

afterAll(() => rm(dir, { recursive: true, force: true }))

describe('cairn on a pipe its reader closes early', () => {
  it('stops quietly with exit code 0, like `cairn … | head`, and prints no stack', async () => {
    const child = spawn(process.execPath, [CAIRN_BIN, '--store', store, 'export', 'research-demo'], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    // The reader is gone before the first byte: every write meets a closed pipe.
    child.stdout.destroy()
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
    expect(stderr).toBe('')
    expect(code).toBe(0)
  }, 60_000)
})
