import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

// The built package (`npm test` builds before running this), as a user's tests would load it: the
// suite's crash child is a file that the bundles start by path. The types come from the sources,
// so typechecking does not need a build.
const built = (entry: string) => new URL(`../../dist/${entry}.js`, import.meta.url).href
const { runStoreConformance } = (await import(built('testing'))) as typeof import('../../src/testing.js')
const { SqliteStore } = (await import(built('sqlite'))) as typeof import('../../src/sqlite.js')

await runStoreConformance({
  name: 'built sqlite',
  open: (location) => new SqliteStore({ path: join(location, 'cairn.db'), onWarning: () => {} }),
  childModule: fileURLToPath(new URL('../fixtures/open-sqlite-built.mjs', import.meta.url)),
  multiProcess: true,
})
