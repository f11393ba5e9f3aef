import { readdir, readFile } from 'node:fs/promises'
import { expect, it } from 'vitest'
import { runEngineConformance } from 'cairn-agents/testing'
import { KvEngine } from './kv-engine.js'

/**
 * An engine written only against the published `cairn-agents/engine` entry point (see the imports of
 * kv-engine.ts, kv-leases.ts and kv-database.ts) passes the engine conformance suite, its lease
 * capability detected and checked.
 */
const found = await runEngineConformance({ name: 'outside kv engine', open: (location) => new KvEngine(location) })

it('the suite found the lease capability of the outside engine', () => {
  expect(found).toEqual({ leases: true, pendingWrites: false })
})

it('cairn/engine is a published subpath export of the package', async () => {
  const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { exports: Record<string, unknown> }
  expect(pkg.exports['./engine']).toEqual({ types: './dist/engine.d.ts', default: './dist/engine.js' })
})

it('the outside engine imports nothing of Cairn but cairn/engine', async () => {
  const dir = new URL('./', import.meta.url)
  const sources = (await readdir(dir)).filter((name) => name.endsWith('.ts') && !name.endsWith('.test.ts'))
  expect(sources.sort()).toEqual(['kv-database.ts', 'kv-engine.ts', 'kv-leases.ts'])
  for (const name of sources) {
    const specifiers = [...(await readFile(new URL(name, dir), 'utf8')).matchAll(/from '([^']+)'/g)].map((match) => match[1])
    expect(specifiers.filter((specifier) => specifier !== 'cairn-agents/engine' && !specifier!.startsWith('./')), name).toEqual([])
  }
})
