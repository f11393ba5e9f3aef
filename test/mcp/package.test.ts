import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { ROOT } from '../support/child.js'

// The built package (`npm test` builds first), in a process where the optional peer is missing.
const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url))

describe('cairn-agents/mcp without @modelcontextprotocol/sdk', () => {
  it('importing cairn-agents and cairn-agents/mcp loads no part of the SDK; connecting names the package and how to install it', () => {
    const child = spawnSync(process.execPath, ['--import', fixture('hide-sdk.mjs'), fixture('without-sdk.mjs')], { cwd: ROOT, encoding: 'utf8' })
    expect(child.status, child.stderr).toBe(0)
    const outcome = JSON.parse(child.stdout.trim()) as { name: string; code: string; cairn: boolean; message: string }
    expect(outcome).toMatchObject({ name: 'MissingDependencyError', code: 'missing_dependency', cairn: true })
    expect(outcome.message).toContain('npm install @modelcontextprotocol/sdk')
  })
})
