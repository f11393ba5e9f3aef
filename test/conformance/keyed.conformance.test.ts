import { fileURLToPath } from 'node:url'
import { FileStore, MemoryStore } from '../../src/index.js'
import { runStoreConformance } from '../../src/testing.js'
import { CONFORMANCE_KEYS, openStore } from '../fixtures/open-sqlite-keyed.js'

// Every store promise holds with signing and encryption on: the sealing layer is invisible to callers.
await runStoreConformance({
  name: 'sqlite (signed, encrypted)',
  open: (location) => openStore(location),
  childModule: fileURLToPath(new URL('../fixtures/open-sqlite-keyed.ts', import.meta.url)),
  multiProcess: true,
})

await runStoreConformance({
  name: 'file (signed)',
  open: (location) => new FileStore({ directory: location, keys: CONFORMANCE_KEYS, onWarning: () => {} }),
})

await runStoreConformance({
  name: 'memory (signed, encrypted)',
  persistent: false,
  open: () => new MemoryStore({ keys: CONFORMANCE_KEYS, encrypt: true }),
})
