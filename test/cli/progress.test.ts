import { execFileSync } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { CAIRN_BIN, cairn, runNode } from './cli-helpers.js'

// Progress bars on a terminal, nothing on a pipe. The terminal is a pseudo-terminal made by
// util-linux `script`; where it is missing, that half is skipped and says so.

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-cli-progress-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

const script = (() => {
  try {
    execFileSync('script', ['--version'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
})()

describe('cairn progress bars', () => {
  test('on a pipe, a long command prints no progress to stderr', async () => {
    const exit = await cairn(`sqlite:${join(dir, 'piped.db')}`, ['migrate'])
    expect(exit.code, exit.stderr).toBe(0)
    expect(exit.stderr).toBe('')
    expect(exit.stdout).toContain('applied migrations')
  })

  test.skipIf(!script)('on a terminal, a long command draws a progress bar', async () => {
    const command = `${JSON.stringify(process.execPath)} ${JSON.stringify(CAIRN_BIN)} --store ${JSON.stringify(`sqlite:${join(dir, 'tty.db')}`)} migrate`
    const exit = await runNode(['-e', `process.stdout.write(require('node:child_process').execFileSync('script', ['-qec', ${JSON.stringify(command)}, '/dev/null']))`])
    expect(exit.code, exit.stderr).toBe(0)
    expect(exit.stdout).toMatch(/migrate \[[^\]]+\] 1\/1/)
    expect(exit.stdout).toContain('applied migrations')
  })
})
