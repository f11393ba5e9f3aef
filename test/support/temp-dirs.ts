import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach } from 'vitest'

/**
 * Temporary directories for the tests of one file: call it at the top of the file, then await
 * the function it returns for a new directory. Every directory made is removed after each test.
 */
export function useTempDirs(prefix: string): () => Promise<string> {
  const dirs: string[] = []
  afterEach(async () => {
    for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true })
  })
  return async () => {
    const dir = await mkdtemp(join(tmpdir(), prefix))
    dirs.push(dir)
    return dir
  }
}
